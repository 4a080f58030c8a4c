"""Judge backends behind one interface; see :mod:`medrewardbench.judges.base`."""

from medrewardbench.judges.base import Judge, JudgeRequest, JudgeResult
from medrewardbench.judges.registry import BASELINE_SPECS, build_judge, register
from medrewardbench.models.options import ApiSettings, JudgeOptions, LocalSettings

__all__ = [
    "BASELINE_SPECS",
    "ApiSettings",
    "Judge",
    "JudgeOptions",
    "JudgeRequest",
    "JudgeResult",
    "LocalSettings",
    "build_judge",
    "register",
]
