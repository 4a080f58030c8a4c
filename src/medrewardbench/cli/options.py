"""The options several commands share, declared once: the same flag, the same help, the same checks.

A command whose option only shares a flag's name with another's (``--seed`` of the bootstrap vs
``--seed`` of sampling, ``--out`` of a file vs a directory) declares its own beside the command.
Options that differ only in their help text here take it as an argument (:func:`ci_option`,
:func:`bootstrap_option`), so that their names, bounds and value names cannot drift apart.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

__all__ = [
    "BootstrapOpt",
    "CiOpt",
    "DataOpt",
    "ExternalImagesOpt",
    "ForceReplaceOpt",
    "OrgansOpt",
    "OutDirOpt",
    "QuietOpt",
    "RecalibrateOpt",
    "RiskDeltaOpt",
    "RiskOpt",
    "VerboseOpt",
    "bootstrap_option",
    "ci_option",
]

DATA_HELP = (
    "demo | DIR in the reference layout | hf:[OWNER/NAME[@REV]] | canonical .jsonl/.json/.parquet file or directory"
    " | Hub dataset folder (build export --format hub)"
)
"""What ``--data`` accepts: every source :func:`medrewardbench.data.load_benchmark` reads."""
EXTERNAL_IMAGES_HELP = (
    "accept image paths outside the data's directory (or list directories in MEDREWARDBENCH_IMAGE_ROOTS)"
)
ORGANS_HELP = "organ systems to keep (repeat or comma-separate)"

DataOpt = Annotated[str, typer.Option("--data", "-d", metavar="SOURCE", help=DATA_HELP)]
"""The labelled data a command reads (eval, train, cv)."""
OrgansOpt = Annotated[list[str] | None, typer.Option("--organs", help=ORGANS_HELP)]
ExternalImagesOpt = Annotated[bool, typer.Option("--allow-external-images", help=EXTERNAL_IMAGES_HELP)]
OutDirOpt = Annotated[Path, typer.Option("--out", "-o", help="output directory")]
ForceReplaceOpt = Annotated[
    bool, typer.Option("--force", help="replace the files (data and dataset.json) of an earlier export")
]
QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", help="no progress bars or tables")]
VerboseOpt = Annotated[bool, typer.Option("--verbose", "-v")]


def ci_option(help: str = "interval coverage") -> Any:
    """``--ci LEVEL``: the coverage of every interval (0.5 to 0.999).

    Args:
        help: the help text (cv says that it is report's option).

    Returns:
        The typer option.
    """
    return typer.Option("--ci", min=0.5, max=0.999, metavar="LEVEL", help=help)


def bootstrap_option(help: str = "bootstrap resamples") -> Any:
    """``--bootstrap N``: how many bootstrap resamples (at least 100).

    Args:
        help: the help text (cv says that it is report's option).

    Returns:
        The typer option.
    """
    return typer.Option("--bootstrap", min=100, metavar="N", help=help)


CiOpt = Annotated[float, ci_option()]
BootstrapOpt = Annotated[int, bootstrap_option()]


RiskOpt = Annotated[
    float,
    typer.Option(
        "--risk",
        min=0.001,
        max=0.5,
        metavar="ALPHA",
        help="selective judging: the largest error rate among accepted verdicts (coverage at risk ALPHA)",
    ),
]
"""alpha of the abstention threshold (:mod:`medrewardbench.metrics.selective`)."""
RiskDeltaOpt = Annotated[
    float,
    typer.Option(
        "--risk-delta",
        min=0.001,
        max=0.5,
        metavar="DELTA",
        help="selective judging: the chance that the accepted verdicts' error rate exceeds ALPHA",
    ),
]
RecalibrateOpt = Annotated[
    str,
    typer.Option(
        "--recalibrate",
        metavar="none|isotonic|temperature",
        help="also show calibration after a cross-fitted recalibration (fitted on other folds of cases)",
    ),
]
