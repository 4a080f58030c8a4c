"""``medrewardbench probe ...``: derived data sets whose labels are true by construction.

``probe grounding`` judges every case again with its image taken away or replaced and writes
``probe-grounding.json`` and ``probe-grounding.html`` beside the results store
(:mod:`medrewardbench.probes.grounding`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

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
    VerboseOpt,
    with_judge_flags,
)
from medrewardbench.cli.probe_pairs import bias_command, counterfactual_command
from medrewardbench.cli.progress import RichProgress
from medrewardbench.cli.support import console, err_console, terminal_safe
from medrewardbench.cli.support import fail as _fail
from medrewardbench.cli.support import setup_logging as _setup_logging
from medrewardbench.cli.support import split_option as _split_option
from medrewardbench.dimensions import Order
from medrewardbench.report.files import json_text

__all__ = ["app", "grounding_command"]

app = typer.Typer(
    help="Probes: judge derived data sets whose labels are true by construction (no doctors needed).",
    no_args_is_help=True,
)

_OutOpt = Annotated[
    Path, typer.Option("--out", "-o", metavar="DIR", help="output directory (the results store, shared with eval)")
]
_ControlsOpt = Annotated[
    str,
    typer.Option(
        "--controls",
        metavar="LIST",
        help="comma-separated controls: no-image, blank, wrong-patient, dicom-window",
    ),
]
_OrdersOpt = Annotated[str, typer.Option("--orders", metavar="ORDERS", help="both | original | swapped")]
_LimitOpt = Annotated[int | None, typer.Option("--limit", min=1, metavar="N", help="the first N cases only")]
_OrgansOpt = Annotated[list[str] | None, typer.Option("--organs", metavar="LIST", help="organ systems to keep")]
_SeedOpt = Annotated[
    int, typer.Option("--seed", metavar="N", help="seed of the wrong-patient draw, the judges and the bootstrap")
]
_ThresholdOpt = Annotated[
    float,
    typer.Option(
        "--threshold",
        min=0.0,
        max=1.0,
        metavar="RATE",
        help="flag a judge as not using the image when every control's flip-rate interval stays below this",
    ),
]


@app.command("grounding")
@with_judge_flags
def grounding_command(
    data: DataOpt = "demo",
    judge: JudgeSpecsOpt = None,
    out: _OutOpt = Path("results"),
    controls: _ControlsOpt = "no-image,blank,wrong-patient,dicom-window",
    orders: _OrdersOpt = "both",
    organs: _OrgansOpt = None,
    limit: _LimitOpt = None,
    seed: _SeedOpt = 0,
    bootstrap: BootstrapOpt = 2000,
    ci: CiOpt = 0.95,
    threshold: _ThresholdOpt = 0.05,
    allow_external_images: ExternalImagesOpt = False,
    judge_flags: JudgeFlags = DEFAULT_JUDGE_FLAGS,
    quiet: QuietOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    """Does the verdict depend on the image? Judge every case again with its image taken away or replaced.

    Controls: no image, a blank image, another patient's image, and for DICOM images a wrong window
    (a lung window on a bone image, ...). Writes probe-grounding.json and probe-grounding.html in
    --out; the runs go to the same results store as eval's (resumed when run again). Exit status:
    0 when done, 2 for bad input.
    """
    from medrewardbench.data import load_benchmark
    from medrewardbench.evaluation.store import Store
    from medrewardbench.judges.registry import BASELINE_SPECS
    from medrewardbench.probes.derive import run_probe
    from medrewardbench.probes.grounding import CONTROLS, control_benchmarks, grounding_document
    from medrewardbench.probes.grounding_page import write_grounding_html

    _setup_logging(verbose)
    specs = _split_option(judge, "--judge") or list(BASELINE_SPECS)
    wanted = [c.strip() for c in controls.split(",") if c.strip()]
    unknown = [c for c in wanted if c not in CONTROLS]
    if not wanted or unknown:
        raise _fail(f"--controls: unknown {', '.join(unknown) or 'nothing given'}; choose from {', '.join(CONTROLS)}")
    with command_errors("interrupted while preparing the controls: nothing was judged"):
        selected_orders = Order.parse_selection(orders)
        if not quiet:
            err_console.print(f"loading {terminal_safe(data)} ...", highlight=False, markup=False)
        parent = load_benchmark(
            data, organs=_split_option(organs, "--organs"), limit=limit, allow_external_images=allow_external_images
        )
        variants, sets = control_benchmarks(parent, wanted, seed)
        options = judge_flags.options(seed)
    sink = RichProgress(enabled=not quiet)
    with command_errors(sink=sink, value_errors=False):
        runs = run_probe(parent, variants, specs, out, orders=selected_orders, options=options, progress=sink)
    with command_errors(None, write_errors=True, out=out):
        with Store.in_dir(out) as store:
            document = grounding_document(
                store, runs, sets, n_resamples=bootstrap, seed=seed, confidence=ci, threshold=threshold
            )
        json_path = out / "probe-grounding.json"
        json_path.write_text(json_text(document, indent=2, ensure_ascii=False), encoding="utf-8")
        html_path = write_grounding_html(document, out / "probe-grounding.html")
    if not quiet:
        _print_summary(document)
    console.print(f"Wrote {json_path} and {html_path}", highlight=False, markup=False, soft_wrap=True)


def _print_summary(document: dict[str, Any]) -> None:
    """One line per judge: its flag and its pooled flip rate under each control."""
    from rich.table import Table

    from medrewardbench.report.terminal import fit_table

    controls = list(document["settings"]["controls"])
    table = Table(title=f"Grounding: {document['data']['name']}")
    table.add_column("judge")
    table.add_column("flag")
    for control in controls:
        table.add_column(f"{control} flip %", justify="right")
    for judge in document["judges"]:
        cells = []
        for control in controls:
            figures = judge["controls"].get(control)
            flip = figures["flip_rate"] if figures else None
            cells.append(
                "–"
                if not flip or flip["point"] is None
                else f"{100 * flip['point']:.1f} [{100 * (flip['low'] or 0):.1f}, {100 * (flip['high'] or 0):.1f}]"
            )
        table.add_row(terminal_safe(judge["judge"]), judge["flag"], *cells)
    console.print(fit_table(table, console.width))
    console.print(document["settings"]["flag_rule"], highlight=False, markup=False, soft_wrap=True)


@app.command("harm")
@with_judge_flags
def harm_command(
    data: DataOpt = "demo",
    judge: JudgeSpecsOpt = None,
    out: _OutOpt = Path("results"),
    orders: _OrdersOpt = "both",
    seed: _SeedOpt = 0,
    ci: CiOpt = 0.95,
    allow_external_images: ExternalImagesOpt = False,
    judge_flags: JudgeFlags = DEFAULT_JUDGE_FLAGS,
    quiet: QuietOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    """How often does a judge prefer an answer a doctor flagged as severely harmful?

    Needs data whose annotations carry harm flags (the annotation app's export). Judges the data
    (resuming from the store in --out, as eval does) and writes probe-harm.json: each judge's
    critical-miss rate on the doctor-flagged pairs, with exact (Clopper-Pearson) intervals over the
    pairs, so it takes no --bootstrap. Exit status: 0 when done, 2 for
    bad input or data without a pair flagged severe or critical.
    """
    from medrewardbench.data import load_benchmark
    from medrewardbench.evaluation.job import evaluate
    from medrewardbench.evaluation.store import Store
    from medrewardbench.judges.registry import BASELINE_SPECS
    from medrewardbench.probes.harm import doctor_harm_document, flagged_pairs

    _setup_logging(verbose)
    specs = _split_option(judge, "--judge") or list(BASELINE_SPECS)
    with command_errors("interrupted while loading the data: nothing was judged"):
        selected_orders = Order.parse_selection(orders)
        benchmark = load_benchmark(data, allow_external_images=allow_external_images)
        pairs, _both = flagged_pairs(benchmark.cases)
        if not pairs:
            raise _fail(
                f"{data}: no pair has an answer a doctor flagged severe or critical (annotations[].harm); "
                "flag answers in the annotation app and export the project"
            )
        options = judge_flags.options(seed)
    sink = RichProgress(enabled=not quiet)
    with command_errors(sink=sink, value_errors=False):
        result = evaluate(benchmark, specs, out, orders=selected_orders, options=options, progress=sink)
    with command_errors(None, write_errors=True, out=out):
        with Store.in_dir(out) as store:
            runs = {run.judge_spec: run for run in result.runs}
            document = doctor_harm_document(store, runs, benchmark.cases, confidence=ci)
        document["data"] = {
            "name": benchmark.name,
            "source": benchmark.source,
            "data_hash": benchmark.data_hash(),
            "n_cases": len(benchmark),
        }
        json_path = out / "probe-harm.json"
        json_path.write_text(json_text(document, indent=2, ensure_ascii=False), encoding="utf-8")
    if not quiet:
        for entry in document["judges"]:
            rate = entry.get("critical_miss_rate") or {}
            shown = (
                "–"
                if rate.get("point") is None
                else f"{100 * rate['point']:.1f} % [{100 * (rate['low'] or 0):.1f}, {100 * (rate['high'] or 0):.1f}]"
            )
            console.print(
                f"{terminal_safe(entry['judge'])}: critical-miss rate {shown} on {entry['pairs']} doctor-flagged pairs",
                highlight=False,
                markup=False,
            )
    console.print(f"Wrote {json_path}", highlight=False, markup=False, soft_wrap=True)


# the pair probes (counterfactual pairs and the bias card) live in their own module
app.command("counterfactual")(counterfactual_command)
app.command("bias")(bias_command)
