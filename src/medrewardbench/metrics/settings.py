"""How calibration and abstention are computed: the settings and their defaults, without numpy.

The commands parse these before any figure is computed (``eval`` takes them at start-up), so this
module imports nothing heavy; :mod:`medrewardbench.metrics.selective_section` applies them.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["DEFAULT_DELTA", "DEFAULT_RISK", "RECALIBRATIONS", "SelectiveSettings"]

DEFAULT_RISK = 0.10
"""alpha: the largest error rate among accepted verdicts."""
DEFAULT_DELTA = 0.10
"""delta: the chance that the chosen threshold's risk exceeds alpha."""
RECALIBRATIONS: tuple[str, ...] = ("none", "isotonic", "temperature")
"""The recalibrations :func:`medrewardbench.metrics.recalibration.cross_fitted` knows."""


@dataclass(frozen=True)
class SelectiveSettings:
    """How calibration and abstention are computed (``report --risk --risk-delta --recalibrate``).

    Attributes:
        alpha: the largest error rate among accepted verdicts.
        delta: the chance the guarantee fails.
        recalibration: ``none``, ``isotonic`` or ``temperature`` (cross-fitted over ``folds``).
        calibration_fraction: share of cases the threshold is chosen on (the rest measure it).
        folds: folds of the cross-fitted recalibration.
        bins: bins of the ECE and the reliability diagram.
    """

    alpha: float = DEFAULT_RISK
    delta: float = DEFAULT_DELTA
    recalibration: str = "none"
    calibration_fraction: float = 0.5
    folds: int = 5
    bins: int = 10

    def __post_init__(self) -> None:
        if not (0.0 < self.alpha < 1.0 and 0.0 < self.delta < 1.0):
            raise ValueError(f"--risk and --risk-delta must be in (0, 1), got {self.alpha} and {self.delta}")
        if self.recalibration not in RECALIBRATIONS:
            raise ValueError(f"--recalibrate {self.recalibration!r}: expected one of {', '.join(RECALIBRATIONS)}")
