"""The ``train`` group (``sft``, ``dpo``, ``rm``) and the ``cv`` command; :func:`register_commands` adds them to an app.

    medrewardbench train sft --base Qwen/Qwen2-VL-2B-Instruct --data demo --out runs/sft
    medrewardbench train dpo --base ... --folds 5 --fold 0 --config train.yaml --out runs/dpo-0
    medrewardbench train rm  --base ... --heads multi --out runs/rm
    medrewardbench cv --method sft --base ... --folds 5 --data demo --out runs/cv-sft

Like every command module, this one is thin: it parses flags, calls :mod:`medrewardbench.train`, and prints.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from medrewardbench.cli.cv_report import cv_headline, cv_tables, format_loss
from medrewardbench.cli.options import (
    DataOpt,
    OrgansOpt,
    OutDirOpt,
    QuietOpt,
    VerboseOpt,
    bootstrap_option,
    ci_option,
)
from medrewardbench.cli.progress import RichProgress
from medrewardbench.cli.support import console, err_console, terminal_safe
from medrewardbench.cli.support import fail as _fail
from medrewardbench.cli.support import setup_logging as _setup_logging
from medrewardbench.cli.support import split_option as _split_option
from medrewardbench.cli.train_progress import RichTrainProgress
from medrewardbench.errors import MedRewardBenchError
from medrewardbench.train.config import METHODS, TrainConfig

__all__ = [
    "cv_command",
    "dpo_command",
    "register_commands",
    "rm_command",
    "sft_command",
    "train_app",
]


# ---------------------------------------------------------------------------- shared options

BaseOpt = Annotated[str, typer.Option("--base", "-b", help="base vision-language model: Hub id or directory")]
LimitOpt = Annotated[int | None, typer.Option("--limit", min=1, help="first N cases of the data only")]
ConfigOpt = Annotated[Path | None, typer.Option("--config", "-c", help="YAML file of training settings")]
SeedOpt = Annotated[int | None, typer.Option("--seed", help="seed of training (and, for cv, of the split)")]
LrOpt = Annotated[float | None, typer.Option("--learning-rate", "--lr", help="peak learning rate")]
EpochsOpt = Annotated[float | None, typer.Option("--epochs", help="passes over the training examples")]
MaxStepsOpt = Annotated[int | None, typer.Option("--max-steps", help="optimizer steps (overrides --epochs)")]
BatchOpt = Annotated[int | None, typer.Option("--batch-size", min=1, help="examples per micro-batch")]
AccumOpt = Annotated[int | None, typer.Option("--grad-accum", min=1, help="micro-batches per optimizer step")]
WarmupOpt = Annotated[float | None, typer.Option("--warmup-ratio", help="share of steps with linear warm-up")]
LoraROpt = Annotated[int | None, typer.Option("--lora-r", min=1, help="LoRA rank")]
LoraAlphaOpt = Annotated[int | None, typer.Option("--lora-alpha", help="LoRA alpha")]
LoraDropoutOpt = Annotated[float | None, typer.Option("--lora-dropout", help="LoRA dropout")]
LoraTargetsOpt = Annotated[
    str | None, typer.Option("--lora-targets", help="language-model | all-linear | names,comma,separated | REGEX")
]
PrecisionOpt = Annotated[str | None, typer.Option("--precision", help="auto | bf16 | fp16 | fp32")]
DeviceOpt = Annotated[str | None, typer.Option("--device", help="auto | cpu | cuda | cuda:N")]
CheckpointingOpt = Annotated[
    str | None,
    typer.Option(
        "--gradient-checkpointing",
        metavar="on|off",
        help="recompute activations to save memory",
        show_default="off, or the config file's",
    ),
]
OrdersOpt = Annotated[str | None, typer.Option("--orders", help="both (order augmentation) | original | swapped")]
TemplateOpt = Annotated[str | None, typer.Option("--template", help="pairwise | pairwise-cot | FILE (SFT/DPO)")]
SaveStepsOpt = Annotated[int | None, typer.Option("--save-steps", help="checkpoint every N steps (0: final only)")]
MaxCasesOpt = Annotated[int | None, typer.Option("--max-cases", help="train on at most N cases (0: all)")]
BetaOpt = Annotated[float | None, typer.Option("--beta", help="DPO beta")]
HeadsOpt = Annotated[str | None, typer.Option("--heads", help="reward heads: multi (one per dimension) | single")]
HeadDimOpt = Annotated[str | None, typer.Option("--head-dimension", help="dimension that trains a single head")]
BackboneOpt = Annotated[str | None, typer.Option("--backbone", help="reward backbone: lora | frozen | full")]
HeadLrOpt = Annotated[float | None, typer.Option("--head-learning-rate", help="reward head learning rate")]


_SWITCH = {"on": True, "true": True, "yes": True, "1": True, "off": False, "false": False, "no": False, "0": False}


def build_config(method: str | None, config_file: Path | None, **flags: Any) -> TrainConfig:
    """Defaults, then the YAML file (with its ``method`` section), then the flags that were given.

    Raises:
        ValueError: ``--gradient-checkpointing`` is neither on nor off.
    """
    switch = flags.get("gradient_checkpointing")
    if isinstance(switch, str):
        if switch.strip().lower() not in _SWITCH:
            raise ValueError(f"--gradient-checkpointing takes on or off, got {switch!r}")
        flags["gradient_checkpointing"] = _SWITCH[switch.strip().lower()]
    config = TrainConfig.from_yaml(config_file, method) if config_file is not None else TrainConfig()
    return config.with_overrides(**flags)


def _load(data: str, organs: list[str] | None, limit: int | None) -> Any:
    from medrewardbench.data import load_benchmark

    return load_benchmark(data, organs=_split_option(organs, "--organs"), limit=limit)


def _run_train(
    method: str,
    *,
    base: str,
    data: str,
    out: Path,
    organs: list[str] | None,
    limit: int | None,
    folds: int | None,
    fold: int | None,
    fold_seed: int | None,
    config_file: Path | None,
    quiet: bool,
    verbose: bool,
    flags: dict[str, Any],
) -> None:
    from medrewardbench.train.api import train
    from medrewardbench.train.folds import split_fold

    _setup_logging(verbose)
    if (folds is None) != (fold is None):
        raise _fail("--folds and --fold go together (for example --folds 5 --fold 0)")
    try:
        config = build_config(method, config_file, **flags)
        benchmark = _load(data, organs, limit)
        split = None
        if folds is not None and fold is not None:
            split = split_fold(benchmark.labeled(), folds, fold, config.seed if fold_seed is None else fold_seed)
    except (MedRewardBenchError, ValueError) as exc:
        raise _fail(str(exc)) from exc
    if not quiet:
        scope = (
            f"fold {fold} of {folds}: {len(split.train)} training cases"
            if split
            else f"{len(benchmark.labeled())} labelled cases"
        )
        name = escape(terminal_safe(benchmark.name))
        err_console.print(f"[bold]{method}[/] on {escape(base)}: {name}, {scope}", highlight=False)
    progress = RichTrainProgress(enabled=not quiet)
    try:
        result = train(method, base, benchmark, out, config, fold=split, progress=progress)
    except MedRewardBenchError as exc:
        raise _fail(str(exc)) from exc
    finally:
        progress.close()
    if quiet:
        return
    card = result.card
    losses = card.losses
    perf = card.performance
    console.print(
        f"[green]trained[/] {method}: loss {format_loss(losses.get('first'))} -> {format_loss(losses.get('final'))} in "
        f"{perf.get('steps')} steps, {perf.get('examples_per_s')} examples/s; model and training_card.json in "
        f"{result.output_dir}",
        highlight=False,
    )
    adapter = f" --adapter {result.judge_adapter}" if result.judge_adapter else ""
    heldout = card.data.get("heldout_cases_file")
    if heldout:
        console.print(
            f"evaluate it on its held-out cases: medrewardbench eval --data {heldout} --judge {result.judge_spec}"
            f"{adapter} --out {result.output_dir}/eval",
            highlight=False,
            soft_wrap=True,
        )
    else:
        console.print(
            f"it was trained on every labelled case of {data}: evaluating it there measures what it was trained on. "
            f"Evaluate it on other data (medrewardbench eval --data OTHER --judge {result.judge_spec}{adapter}), "
            "or hold cases out: train with --folds K --fold I and evaluate on the heldout_cases.jsonl it writes "
            "(or run medrewardbench cv, which does every fold)",
            highlight=False,
            soft_wrap=True,
        )


#: TrainConfig fields that the train and cv commands take as flags
_CONFIG_FLAGS: tuple[str, ...] = (
    "backbone",
    "batch_size",
    "beta",
    "device",
    "epochs",
    "grad_accum",
    "gradient_checkpointing",
    "head_learning_rate",
    "heads",
    "learning_rate",
    "lora_alpha",
    "lora_dropout",
    "lora_r",
    "lora_targets",
    "max_cases",
    "max_steps",
    "orders",
    "precision",
    "save_steps",
    "seed",
    "template",
    "warmup_ratio",
)


def _config_flags(values: dict[str, Any], renamed: dict[str, str] | None = None) -> dict[str, Any]:
    """The TrainConfig fields among a command's parameters.

    Typer needs the parameters spelled out, so each command passes ``locals()`` here instead of
    repeating the list.

    Args:
        values: the command's parameters.
        renamed: parameter name -> TrainConfig field, where the flag is named differently.

    Returns:
        field -> value for every field the command has (None means "not given").
    """
    out = {name: values[name] for name in _CONFIG_FLAGS if name in values}
    for parameter, field in (renamed or {}).items():
        out[field] = values[parameter]
    return out


train_app = typer.Typer(
    name="train",
    help="Train a judge (SFT, DPO with LoRA) or an image+text reward model on labelled cases.",
    no_args_is_help=True,
)


@train_app.command("sft")
def sft_command(
    base: BaseOpt,
    data: DataOpt = "demo",
    out: OutDirOpt = Path("runs/sft"),
    organs: OrgansOpt = None,
    limit: LimitOpt = None,
    folds: Annotated[int | None, typer.Option("--folds", min=2, help="K: split into K folds")] = None,
    fold: Annotated[int | None, typer.Option("--fold", min=0, help="hold out fold I (train on the rest)")] = None,
    fold_seed: Annotated[int | None, typer.Option("--fold-seed", help="seed of the split (default --seed)")] = None,
    config: ConfigOpt = None,
    seed: SeedOpt = None,
    learning_rate: LrOpt = None,
    epochs: EpochsOpt = None,
    max_steps: MaxStepsOpt = None,
    batch_size: BatchOpt = None,
    grad_accum: AccumOpt = None,
    warmup_ratio: WarmupOpt = None,
    lora_r: LoraROpt = None,
    lora_alpha: LoraAlphaOpt = None,
    lora_dropout: LoraDropoutOpt = None,
    lora_targets: LoraTargetsOpt = None,
    precision: PrecisionOpt = None,
    device: DeviceOpt = None,
    gradient_checkpointing: CheckpointingOpt = None,
    orders: OrdersOpt = None,
    template: TemplateOpt = None,
    save_steps: SaveStepsOpt = None,
    max_cases: MaxCasesOpt = None,
    quiet: QuietOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    """Supervised fine-tuning: LoRA on the verdict JSON of the evaluation template (both orders)."""
    flags = _config_flags(locals())
    _run_train(
        "sft",
        base=base,
        data=data,
        out=out,
        organs=organs,
        limit=limit,
        folds=folds,
        fold=fold,
        fold_seed=fold_seed,
        config_file=config,
        quiet=quiet,
        verbose=verbose,
        flags=flags,
    )


@train_app.command("dpo")
def dpo_command(
    base: BaseOpt,
    data: DataOpt = "demo",
    out: OutDirOpt = Path("runs/dpo"),
    organs: OrgansOpt = None,
    limit: LimitOpt = None,
    folds: Annotated[int | None, typer.Option("--folds", min=2, help="K: split into K folds")] = None,
    fold: Annotated[int | None, typer.Option("--fold", min=0, help="hold out fold I (train on the rest)")] = None,
    fold_seed: Annotated[int | None, typer.Option("--fold-seed", help="seed of the split (default --seed)")] = None,
    config: ConfigOpt = None,
    seed: SeedOpt = None,
    learning_rate: LrOpt = None,
    epochs: EpochsOpt = None,
    max_steps: MaxStepsOpt = None,
    batch_size: BatchOpt = None,
    grad_accum: AccumOpt = None,
    warmup_ratio: WarmupOpt = None,
    lora_r: LoraROpt = None,
    lora_alpha: LoraAlphaOpt = None,
    lora_dropout: LoraDropoutOpt = None,
    lora_targets: LoraTargetsOpt = None,
    precision: PrecisionOpt = None,
    device: DeviceOpt = None,
    gradient_checkpointing: CheckpointingOpt = None,
    orders: OrdersOpt = None,
    template: TemplateOpt = None,
    save_steps: SaveStepsOpt = None,
    max_cases: MaxCasesOpt = None,
    beta: BetaOpt = None,
    quiet: QuietOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    """DPO: LoRA preferring the correct verdict JSON over the flipped one (both orders)."""
    flags = _config_flags(locals())
    _run_train(
        "dpo",
        base=base,
        data=data,
        out=out,
        organs=organs,
        limit=limit,
        folds=folds,
        fold=fold,
        fold_seed=fold_seed,
        config_file=config,
        quiet=quiet,
        verbose=verbose,
        flags=flags,
    )


@train_app.command("rm")
def rm_command(
    base: BaseOpt,
    data: DataOpt = "demo",
    out: OutDirOpt = Path("runs/rm"),
    organs: OrgansOpt = None,
    limit: LimitOpt = None,
    folds: Annotated[int | None, typer.Option("--folds", min=2, help="K: split into K folds")] = None,
    fold: Annotated[int | None, typer.Option("--fold", min=0, help="hold out fold I (train on the rest)")] = None,
    fold_seed: Annotated[int | None, typer.Option("--fold-seed", help="seed of the split (default --seed)")] = None,
    config: ConfigOpt = None,
    seed: SeedOpt = None,
    learning_rate: LrOpt = None,
    epochs: EpochsOpt = None,
    max_steps: MaxStepsOpt = None,
    batch_size: BatchOpt = None,
    grad_accum: AccumOpt = None,
    warmup_ratio: WarmupOpt = None,
    lora_r: LoraROpt = None,
    lora_alpha: LoraAlphaOpt = None,
    lora_dropout: LoraDropoutOpt = None,
    lora_targets: LoraTargetsOpt = None,
    precision: PrecisionOpt = None,
    device: DeviceOpt = None,
    gradient_checkpointing: CheckpointingOpt = None,
    save_steps: SaveStepsOpt = None,
    max_cases: MaxCasesOpt = None,
    heads: HeadsOpt = None,
    head_dimension: HeadDimOpt = None,
    backbone: BackboneOpt = None,
    head_learning_rate: HeadLrOpt = None,
    quiet: QuietOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    """Bradley-Terry image+text reward model: backbone + linear head(s) on the last token."""
    flags = _config_flags(locals(), renamed={"head_dimension": "single_head_dimension"})
    _run_train(
        "rm",
        base=base,
        data=data,
        out=out,
        organs=organs,
        limit=limit,
        folds=folds,
        fold=fold,
        fold_seed=fold_seed,
        config_file=config,
        quiet=quiet,
        verbose=verbose,
        flags=flags,
    )


def cv_command(
    method: Annotated[str, typer.Option("--method", "-m", help="sft | dpo | rm")],
    base: BaseOpt,
    folds: Annotated[int, typer.Option("--folds", "-k", min=2, help="K folds")] = 5,
    data: DataOpt = "demo",
    out: Annotated[Path | None, typer.Option("--out", "-o", help="output directory (default runs/cv-METHOD)")] = None,
    organs: OrgansOpt = None,
    limit: LimitOpt = None,
    only_fold: Annotated[
        list[int] | None, typer.Option("--only-fold", help="run only this fold (repeatable); pools those")
    ] = None,
    config: ConfigOpt = None,
    seed: Annotated[
        int | None, typer.Option("--seed", help="seed of the split, the training and the bootstrap (default 0)")
    ] = None,
    learning_rate: LrOpt = None,
    epochs: EpochsOpt = None,
    max_steps: MaxStepsOpt = None,
    batch_size: BatchOpt = None,
    grad_accum: AccumOpt = None,
    warmup_ratio: WarmupOpt = None,
    lora_r: LoraROpt = None,
    lora_alpha: LoraAlphaOpt = None,
    lora_targets: LoraTargetsOpt = None,
    precision: PrecisionOpt = None,
    device: DeviceOpt = None,
    gradient_checkpointing: CheckpointingOpt = None,
    max_cases: MaxCasesOpt = None,
    beta: BetaOpt = None,
    heads: HeadsOpt = None,
    backbone: BackboneOpt = None,
    baseline: Annotated[
        str, typer.Option("--baseline", help="untuned judge to compare with: default (hf:BASE) | SPEC | none")
    ] = "default",
    constrained: Annotated[
        bool, typer.Option("--constrained", help="hf: judges decode only the verdict JSON skeleton")
    ] = False,
    eval_batch_size: Annotated[int | None, typer.Option("--eval-batch-size", min=1)] = None,
    max_tokens: Annotated[int | None, typer.Option("--max-tokens", help="generation limit of hf: judges")] = None,
    dtype: Annotated[str, typer.Option("--dtype", help="evaluation dtype")] = "auto",
    ci: Annotated[float, ci_option("interval coverage (as in report)")] = 0.95,
    bootstrap: Annotated[int, bootstrap_option("bootstrap resamples (as in report)")] = 2000,
    reuse: Annotated[
        bool, typer.Option("--reuse", help="reuse fold models trained with identical settings in OUT")
    ] = False,
    quiet: QuietOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    """Cross-validate: train each fold, judge its held-out cases, compare with the base model and the floor."""
    from medrewardbench.models.options import JudgeOptions, LocalSettings
    from medrewardbench.train.cv import cross_validate

    _setup_logging(verbose)
    if method not in METHODS:
        raise _fail(f"--method must be one of {', '.join(METHODS)}, got {method!r}")
    flags = _config_flags(locals())
    try:
        train_config = build_config(method, config, **flags)
        benchmark = _load(data, organs, limit)
    except (MedRewardBenchError, ValueError) as exc:
        raise _fail(str(exc)) from exc
    split_seed = train_config.seed
    try:
        options = JudgeOptions(
            seed=split_seed,
            batch_size=eval_batch_size,
            max_tokens=max_tokens,
            local=LocalSettings(device=train_config.device, dtype=dtype, constrained=constrained),
        )
    except MedRewardBenchError as exc:
        raise _fail(str(exc)) from exc
    out_dir = out or Path(f"runs/cv-{method}")
    baseline_spec = None if baseline.strip().lower() == "none" else baseline
    if not quiet:
        err_console.print(
            f"[bold]cv {method}[/] on {base}: {benchmark.name}, {len(benchmark.labeled())} labelled cases, "
            f"{folds} folds stratified by organ system",
            highlight=False,
        )
    train_progress = RichTrainProgress(enabled=not quiet)
    eval_progress = RichProgress(enabled=not quiet)
    try:
        result = cross_validate(
            method,
            base,
            benchmark,
            out_dir,
            train_config,
            k=folds,
            seed=split_seed,
            folds=only_fold or None,
            judge_options=options,
            baseline_spec=baseline_spec,
            confidence=ci,
            n_resamples=bootstrap,
            reuse_models=reuse,
            train_progress=train_progress,
            eval_progress=eval_progress,
        )
    except (MedRewardBenchError, ValueError) as exc:
        raise _fail(str(exc)) from exc
    finally:
        train_progress.close()
        eval_progress.close()
    _print_cv(result.report, result.report_path, result.out_dir, quiet=quiet)


def _print_cv(report: Mapping[str, Any], report_path: Path, out_dir: Path, *, quiet: bool) -> None:
    """The warnings of a cross-validation (always), then its tables and headline (unless --quiet)."""
    from medrewardbench.data.provenance import LabelProvenance
    from medrewardbench.report.terminal import labels_banner

    for warning in report.get("warnings", []):
        err_console.print(f"warning: {terminal_safe(warning)}", highlight=False, markup=False, style="yellow")
    if quiet:
        return
    console.print(labels_banner(LabelProvenance.from_json(report.get("labels"))))
    from medrewardbench.report.terminal import fit_table

    # what may be left out to fit the terminal, least needed first (the dimension, tuned and the
    # comparisons' differences stay)
    drop_order = ("train s", "eval s", "loss", "n", "chance", "p case", "train", "held out")
    for table in cv_tables(report):
        console.print(fit_table(table, console.width, drop_order))
    console.print(cv_headline(report), highlight=False, markup=False, style="bold")
    console.print(
        f"Report: {report_path} ({report['timings']['total_s']:.1f} s in all); the pooled held-out "
        f"report with the cases judged wrong: medrewardbench report {out_dir}",
        highlight=False,
        soft_wrap=True,
    )


def register_commands(app: typer.Typer) -> None:
    """Add ``train`` (with ``sft``, ``dpo``, ``rm``) and ``cv`` to a typer app."""
    app.add_typer(train_app, name="train")
    app.command("cv")(cv_command)
