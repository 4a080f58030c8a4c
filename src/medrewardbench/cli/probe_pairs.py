"""``probe counterfactual`` and ``probe bias``: the pair probes on the command line.

Each command loads the data, makes the derived pairs (:mod:`medrewardbench.probes.counterfactual`,
:mod:`medrewardbench.probes.bias`), judges them in both orders with the ordinary eval job into
``--out``'s store, reads the runs back from the store, and writes ``probe-<name>.json`` and
``probe-<name>.html`` beside it; it prints one line per judge. Errors and Ctrl-C go through the
one handler of :mod:`medrewardbench.cli.errors`.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer

from medrewardbench.cli.errors import command_errors
from medrewardbench.cli.options import (
    DEFAULT_JUDGE_FLAGS,
    BootstrapOpt,
    CiOpt,
    DataOpt,
    ExternalImagesOpt,
    JudgeFlags,
    JudgeSpecsOpt,
    QuietOpt,
    with_judge_flags,
)
from medrewardbench.cli.progress import RichProgress
from medrewardbench.cli.support import console, err_console, terminal_safe
from medrewardbench.cli.support import fail as _fail
from medrewardbench.cli.support import setup_logging as _setup_logging
from medrewardbench.cli.support import split_option as _split_option
from medrewardbench.judges.registry import BASELINE_SPECS
from medrewardbench.report.files import json_text

if TYPE_CHECKING:
    from medrewardbench.data.benchmark import Benchmark
    from medrewardbench.models.options import JudgeOptions
    from medrewardbench.probes.pairs import ProbeData, ProbeFigures, SkipTally

__all__ = ["bias_command", "counterfactual_command"]

_OutOpt = Annotated[Path, typer.Option("--out", "-o", metavar="DIR", help="output directory (store, JSON and page)")]
_SeedOpt = Annotated[int, typer.Option("--seed", metavar="N", help="seed of every edit, placement and resample")]
_DimensionOpt = Annotated[str, typer.Option("--dimension", metavar="DIM", help="the dimension whose verdicts are read")]
_LimitOpt = Annotated[
    int | None, typer.Option("--limit", min=1, metavar="N", help="the first N parent cases only", show_default="all")
]
_TypesOpt = Annotated[
    list[str] | None,
    typer.Option("--types", metavar="LIST", help="edit types (repeat or comma-separate)", show_default="all"),
]
_SeveritiesOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--severities",
        metavar="LIST",
        help="error severities to keep, 1-4 (repeat or comma-separate)",
        show_default="all",
    ),
]
_ExportOpt = Annotated[
    Path | None,
    typer.Option("--export", metavar="FILE", help="also write the pairs as canonical data (.jsonl, .json, .parquet)"),
]
_RewriterOpt = Annotated[
    str | None,
    typer.Option(
        "--rewriter", metavar="api:MODEL", help="add paraphrases written by this API model", show_default="none"
    ),
]
_VerboseOpt = Annotated[bool, typer.Option("--verbose", "-v", help="log what the library does (INFO)")]


def _load(data: str, limit: int | None, allow_external_images: bool, quiet: bool) -> Any:
    from medrewardbench.data import load_benchmark

    if not quiet:
        err_console.print(f"loading {terminal_safe(data)} ...", highlight=False, markup=False)
    parent = load_benchmark(data, limit=limit, allow_external_images=allow_external_images)
    if not len(parent):
        raise _fail(f"{data}: no cases in the data: nothing to probe")
    return parent


_Figures = TypeVar("_Figures", bound="ProbeFigures")


def _judge_measure_write(
    derived: Benchmark,
    parent: Benchmark,
    tally: SkipTally,
    specs: list[str],
    out: Path,
    options: JudgeOptions,
    quiet: bool,
    measure: Callable[[ProbeData], _Figures],
) -> tuple[_Figures, Path]:
    """Judge the derived pairs into --out's store, read them back, measure them and write ``probe-<name>.json``.

    Returns:
        The figures and the JSON file's path.
    """
    from medrewardbench.evaluation.store import Store
    from medrewardbench.probes.pairs import load_probe_data, run_probe

    sink = RichProgress(enabled=not quiet)
    with command_errors(sink=sink):
        run_probe(derived, specs, out, options=options, progress=sink)
    with command_errors(None, write_errors=True, out=out):
        with Store.in_dir(out) as store:
            figures = measure(load_probe_data(store, derived.data_hash(), specs))
        json_path = out / f"probe-{figures.PROBE}.json"
        _write_json(json_path, figures.document(derived, parent, tally))
    return figures, json_path


def _write_json(path: Path, document: dict[str, Any]) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json_text(document, indent=2, ensure_ascii=False, allow_nan=False), encoding="utf-8")
    tmp.replace(path)


def _say(lines: list[str], out: Path, files: list[Path], quiet: bool) -> None:
    if not quiet:
        for line in lines:
            console.print(terminal_safe(line), highlight=False, markup=False, soft_wrap=True)
    err_console.print(
        "wrote " + ", ".join(terminal_safe(str(f)) for f in files), highlight=False, markup=False, soft_wrap=True
    )


@with_judge_flags
def counterfactual_command(
    data: DataOpt = "demo",
    judge: JudgeSpecsOpt = None,
    out: _OutOpt = Path("results"),
    types: _TypesOpt = None,
    severities: _SeveritiesOpt = None,
    export: _ExportOpt = None,
    rewriter: _RewriterOpt = None,
    dimension: _DimensionOpt = "overall",
    limit: _LimitOpt = None,
    seed: _SeedOpt = 0,
    ci: CiOpt = 0.95,
    bootstrap: BootstrapOpt = 2000,
    judge_flags: JudgeFlags = DEFAULT_JUDGE_FLAGS,
    quiet: QuietOpt = False,
    verbose: _VerboseOpt = False,
    allow_external_images: ExternalImagesOpt = False,
) -> None:
    """Counterfactual pairs: does the judge catch one injected clinical error, and leave a harmless rewording alone?

    Writes probe-counterfactual.json and probe-counterfactual.html into --out (the judgments go to
    its store). The --rewriter reaches its server with the judges' API options (--base-url,
    --api-key-env, --timeout, --max-retries, ...). Exit status: 0 when done; 2 for bad input; 130 on
    Ctrl-C.
    """
    from medrewardbench.data.canonical import write_canonical
    from medrewardbench.probes.counterfactual import ALL_TYPES, PROBE, counterfactual_figures, make_pairs
    from medrewardbench.probes.pairs import derived_benchmark, dimension_index
    from medrewardbench.probes.pairs_page import render_counterfactual_page

    _setup_logging(verbose)
    specs = _split_option(judge, "--judge") or list(BASELINE_SPECS)
    with command_errors():
        dimension_index(dimension)
        chosen = _split_option(types, "--types") or list(ALL_TYPES)
        levels = [_severity(s) for s in _split_option(severities, "--severities") or []]
        options = judge_flags.options(seed)
        parent = _load(data, limit, allow_external_images, quiet)
        rewrite = None
        if rewriter is not None:
            from medrewardbench.probes.counterfactual import original_texts
            from medrewardbench.probes.rewriter import as_rewriter, paraphrases

            rewrite = as_rewriter(paraphrases(rewriter, original_texts(parent), options))
        cases, tally = make_pairs(parent, types=chosen, severities=levels or None, seed=seed, rewriter=rewrite)
        if not cases:
            raise _fail(f"{data}: no pair could be made with types {', '.join(chosen)} (every answer was skipped)")
        derived = derived_benchmark(PROBE, parent, cases)
    measure = partial(counterfactual_figures, dimension=dimension, confidence=ci, n_resamples=bootstrap, seed=seed)
    figures, json_path = _judge_measure_write(derived, parent, tally, specs, out, options, quiet, measure)
    with command_errors(None, write_errors=True, out=out):
        page = render_counterfactual_page(
            figures,
            out / "probe-counterfactual.html",
            data_name=derived.name,
            source=derived.source,
            tally=tally.as_dict(),
        )
        files = [json_path, page]
        if export is not None:
            files.append(write_canonical(cases, export))
    lines = [
        f"{j.judge}: detects {_p(j.detection['all'].point)} of errors, critical-miss {_p(j.critical_miss.point)}, "
        f"over-penalises {_p(j.over_penalisation['all'].point)} of harmless variants"
        + (" (fails the harmless-variant control)" if j.control_fails else "")
        for j in figures.judges
    ]
    _say(lines, out, files, quiet)


@with_judge_flags
def bias_command(
    data: DataOpt = "demo",
    judge: JudgeSpecsOpt = None,
    out: _OutOpt = Path("results"),
    dimension: _DimensionOpt = "overall",
    limit: _LimitOpt = None,
    seed: _SeedOpt = 0,
    ci: CiOpt = 0.95,
    bootstrap: BootstrapOpt = 2000,
    judge_flags: JudgeFlags = DEFAULT_JUDGE_FLAGS,
    quiet: QuietOpt = False,
    verbose: _VerboseOpt = False,
    allow_external_images: ExternalImagesOpt = False,
) -> None:
    """A bias card per judge: position, length, authority, self-preference, image mention, confident wording, markdown.

    Writes probe-bias.json and probe-bias.html into --out (the judgments go to its store). Exit
    status: 0 when done; 2 for bad input; 130 on Ctrl-C.
    """
    from medrewardbench.probes.bias import PROBE, bias_figures, make_bias_pairs
    from medrewardbench.probes.pairs import derived_benchmark, dimension_index
    from medrewardbench.probes.pairs_page import render_bias_page

    _setup_logging(verbose)
    specs = _split_option(judge, "--judge") or list(BASELINE_SPECS)
    with command_errors():
        dimension_index(dimension)
        options = judge_flags.options(seed)
        parent = _load(data, limit, allow_external_images, quiet)
        cases, tally = make_bias_pairs(parent, seed=seed)
        derived = derived_benchmark(PROBE, parent, cases)
    measure = partial(bias_figures, dimension=dimension, confidence=ci, n_resamples=bootstrap, seed=seed)
    figures, json_path = _judge_measure_write(derived, parent, tally, specs, out, options, quiet, measure)
    with command_errors(None, write_errors=True, out=out):
        page = render_bias_page(
            figures, out / "probe-bias.html", data_name=derived.name, source=derived.source, tally=tally.as_dict()
        )
    _say([card.summary() for card in figures.cards], out, [json_path, page], quiet)


def _severity(text: str) -> int:
    if text.strip() not in ("1", "2", "3", "4"):
        raise ValueError(f"--severities: {text!r} is not a severity level; use 1 (minor) to 4 (critical)")
    return int(text)


def _p(value: float) -> str:
    return "–" if value != value else f"{value:.0%}"
