"""Counterfactual pairs: does a judge catch a clinical error, and leave a harmless rewording alone?

From each parent case's original answer (the experts' better response on ``overall``, else
``response_1``; :func:`~medrewardbench.probes.pairs.original_answer`) the probe makes:

* **error pairs**: the answer vs a copy with one injected error (:data:`~.edits.ERROR_TYPES`, each
  with a severity 1-4). The better answer is known: the original is labelled better on
  :data:`LABELLED_DIMENSIONS` (accuracy and overall; the error says nothing about creativity).
* **harmless pairs**: the answer vs a variant with the same content (:data:`~.edits.HARMLESS_TYPES`,
  or an ``api:`` rewriter's paraphrase). No label: either answer is acceptable.

Where the original goes (response 1 or 2) is drawn from a hash of (seed, case, type); both orders
are judged. The figures, per judge, on one dimension (``overall`` unless asked), each with a
case-bootstrap interval over parent cases:

* **error-detection rate**: requests in which the judge prefers the original, over requests run
  (a failure counts as a miss, as failures count wrong for accuracy); per type, per severity, all.
* **severity-weighted critical-miss rate**: ``sum(s * miss) / sum(s * run)`` over error requests,
  where ``s`` is the severity level (1-4) and a miss is a request preferring the answer with the
  error: the share of the clinical weight of the errors that the judge let through.
* **over-penalisation rate**: harmless pairs in which the judge prefers the original in *both*
  orders (strongly), over pairs run in both orders; per type and by whether the variant is shorter,
  as long, or longer than the original. Beside it, the rate at which the judge strongly prefers
  the variant: a judge without a preference between equivalent answers has the two rates equal, so
  the **control fails** when the difference's interval lies above zero.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from medrewardbench.cases import Case
from medrewardbench.metrics import stats
from medrewardbench.metrics.stats import NOT_RUN
from medrewardbench.probes.edits import (
    ERROR_TYPES,
    HARMLESS_TYPES,
    SEVERITY_NAMES,
    Edit,
    EditContext,
    apply_edit,
)
from medrewardbench.probes.pairs import (
    ORIGINAL_KEY,
    SEVERITY_KEY,
    TYPE_KEY,
    ProbeData,
    ProbeFigures,
    Rate,
    SkipTally,
    derived_case,
    dimension_index,
    grouped_rates,
    original_answer,
    placement,
)

__all__ = [
    "ALL_TYPES",
    "LABELLED_DIMENSIONS",
    "PROBE",
    "CounterfactualFigures",
    "counterfactual_figures",
    "make_pairs",
    "original_texts",
]

PROBE = "counterfactual"
ALL_TYPES: tuple[str, ...] = (*ERROR_TYPES, *HARMLESS_TYPES)
LABELLED_DIMENSIONS: tuple[str, ...] = ("accuracy", "overall")
"""The dimensions an error pair is labelled on (the original is better)."""
CLASS_KEY = "probe_class"
"""``error`` or ``harmless``."""
EDIT_KEY = "probe_edit"
"""What the edit changed, in a few words."""
API_PARAPHRASE = "api_paraphrase"
"""The type of a harmless variant written by an ``api:`` rewriter."""

Rewriter = Callable[[str], str]
"""Text in, paraphrase out (an ``api:`` rewriter); an exception or an equal text skips the case."""


def make_pairs(
    cases: Iterable[Case],
    *,
    types: Sequence[str] = ALL_TYPES,
    severities: Sequence[int] | None = None,
    seed: int = 0,
    rewriter: Rewriter | None = None,
) -> tuple[list[Case], SkipTally]:
    """The derived cases of every parent, and what each type made and skipped (with the reason).

    Args:
        cases: the parent cases.
        types: the edit types to apply (error and harmless ones).
        severities: keep only errors of these levels (None: all); harmless variants are kept.
        seed: the seed of every choice (edit site, citation, placement).
        rewriter: an optional paraphraser (``api:``) adding an ``api_paraphrase`` variant.

    Returns:
        (derived cases in parent order then type order, the tally).

    Raises:
        ValueError: an unknown type or severity.
    """
    unknown = [t for t in types if t not in ALL_TYPES]
    if unknown:
        raise ValueError(f"unknown counterfactual type(s) {', '.join(unknown)}; choose from {', '.join(ALL_TYPES)}")
    bad = [s for s in severities or () if s not in SEVERITY_NAMES]
    if bad:
        raise ValueError(f"unknown severity {bad[0]}; levels are 1 (minor) to 4 (critical)")
    tally = SkipTally()
    out: list[Case] = []
    for case in cases:
        _, text = original_answer(case)
        context = EditContext(case.case_id, case.organ_system, case.modality)
        for kind in types:
            result = apply_edit(kind, text, context, seed)
            if not isinstance(result, Edit):
                tally.add_skip(kind, result.reason)
                continue
            if kind in ERROR_TYPES and severities and result.severity not in severities:
                tally.add_skip(kind, f"severity {result.severity} not selected")
                continue
            out.append(_pair(case, text, result, seed))
            tally.add_made(kind)
        if rewriter is not None:
            variant = _rewrite(rewriter, text, tally)
            if variant is not None:
                edit = Edit(API_PARAPHRASE, variant, 0, "rewritten by the api: rewriter")
                out.append(_pair(case, text, edit, seed))
                tally.add_made(API_PARAPHRASE)
    return out, tally


def original_texts(cases: Iterable[Case]) -> list[str]:
    """The original answer of every parent case (what the ``api:`` rewriter is sent).

    Args:
        cases: the parent cases.

    Returns:
        Their original answers, in order.
    """
    return [original_answer(case)[1] for case in cases]


def _rewrite(rewriter: Rewriter, text: str, tally: SkipTally) -> str | None:
    try:
        variant = rewriter(text).strip()
    except Exception as exc:  # the rewriter's failure skips one case; the probe goes on
        tally.add_skip(
            API_PARAPHRASE, f"rewriter failed: {str(exc).splitlines()[0][:80] if str(exc) else type(exc).__name__}"
        )
        return None
    if not variant or variant == text.strip():
        tally.add_skip(API_PARAPHRASE, "rewriter returned nothing new")
        return None
    return variant


def _pair(case: Case, original: str, edit: Edit, seed: int) -> Case:
    at = placement(seed, case.case_id, edit.kind)
    first, second = (original, edit.text) if at == 1 else (edit.text, original)
    is_error = edit.kind in ERROR_TYPES
    return derived_case(
        case,
        PROBE,
        edit.kind,
        first,
        second,
        probe_type=edit.kind,
        original=at,
        severity=edit.severity,
        labels=dict.fromkeys(LABELLED_DIMENSIONS, at) if is_error else None,
        extra={CLASS_KEY: "error" if is_error else "harmless", EDIT_KEY: edit.detail},
    )


@dataclass(frozen=True)
class JudgeCounterfactual:
    """One judge's counterfactual figures."""

    judge: str
    run_id: str
    detection: dict[str, Rate]
    """``all``, then each type, then ``severity 1``..``severity 4`` that occur."""
    critical_miss: Rate
    over_penalisation: dict[str, Rate]
    """``all``, each harmless type, then ``variant shorter`` / ``same length`` / ``variant longer``."""
    variant_preferred: dict[str, Rate]
    """The same cells: the judge strongly preferring the variant."""
    control_fails: bool
    """Over-penalisation exceeds the strong preference for the variant (interval of the difference above 0)."""
    asymmetry: Rate
    """over-penalisation minus variant preference on all harmless pairs, with its interval."""

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {
            "judge": self.judge,
            "run_id": self.run_id,
            "detection": {k: v.as_dict() for k, v in self.detection.items()},
            "critical_miss": self.critical_miss.as_dict(),
            "over_penalisation": {k: v.as_dict() for k, v in self.over_penalisation.items()},
            "variant_preferred": {k: v.as_dict() for k, v in self.variant_preferred.items()},
            "asymmetry": self.asymmetry.as_dict(),
            "control_fails": self.control_fails,
        }


@dataclass(frozen=True)
class CounterfactualFigures(ProbeFigures):
    """Every judge's figures on one derived data set."""

    PROBE: ClassVar[str] = PROBE

    counts: dict[str, int]
    """derived pairs per type"""
    judges: tuple[JudgeCounterfactual, ...]

    def body(self) -> dict[str, Any]:
        """JSON-ready: the pairs per type, the severity levels and each judge's figures."""
        return {
            "pairs_per_type": dict(self.counts),
            "severity_levels": {str(k): v for k, v in SEVERITY_NAMES.items()},
            "judges": [j.as_dict() for j in self.judges],
        }


def counterfactual_figures(
    data: ProbeData,
    *,
    dimension: str = "overall",
    confidence: float = 0.95,
    n_resamples: int = 2000,
    seed: int = 0,
) -> CounterfactualFigures:
    """The figures of every run on a counterfactual data set, from the store's arrays alone.

    Args:
        data: the derived data and its runs (:func:`~medrewardbench.probes.pairs.load_probe_data`).
        dimension: the dimension whose verdicts are read.
        confidence: interval coverage.
        n_resamples: bootstrap resamples (one matrix over parent cases, shared by every judge).
        seed: the bootstrap seed.

    Returns:
        The :class:`CounterfactualFigures`.
    """
    d = dimension_index(dimension)
    kinds = data.field(TYPE_KEY)
    original = data.field(ORIGINAL_KEY).astype(str)
    orig = np.where(original == "2", 2, 1).astype(np.int8)
    severity = np.array([int(s) if str(s).isdigit() else 0 for s in data.field(SEVERITY_KEY)], dtype=np.int64)
    is_error = np.isin(kinds, ERROR_TYPES)
    lengths = data.cases.lengths
    orig_len = np.where(orig == 1, lengths[:, 0], lengths[:, 1])
    variant_len = np.where(orig == 1, lengths[:, 1], lengths[:, 0])
    weights = stats.bootstrap_weights(len(data.parent_ids), n_resamples, seed)
    present = [t for t in (*ALL_TYPES, API_PARAPHRASE) if (kinds == t).any()]
    counts = {t: int((kinds == t).sum()) for t in present}
    judges = []
    for run in data.runs:
        v = run.verdicts[:, :, d]
        judges.append(
            _judge_figures(
                run.judge_spec,
                run.run_id,
                v,
                orig,
                kinds,
                severity,
                is_error,
                orig_len,
                variant_len,
                data,
                weights,
                confidence,
            )
        )
    return CounterfactualFigures(dimension, confidence, n_resamples, len(data.parent_ids), counts, tuple(judges))


def _columns(masks: dict[str, npt.NDArray[np.bool_]], values: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """(n_cases,) values spread into one column per named mask: (n_cases, n_masks)."""
    return np.stack([np.where(mask, values, 0) for mask in masks.values()], axis=1)


def _judge_figures(
    judge: str,
    run_id: str,
    v: npt.NDArray[np.int8],
    orig: npt.NDArray[np.int8],
    kinds: npt.NDArray[np.object_],
    severity: npt.NDArray[np.int64],
    is_error: npt.NDArray[np.bool_],
    orig_len: npt.NDArray[np.int64],
    variant_len: npt.NDArray[np.int64],
    data: ProbeData,
    weights: npt.NDArray[np.float64],
    confidence: float,
) -> JudgeCounterfactual:
    run = v != NOT_RUN
    detected = ((v == orig[:, None]) & run).sum(axis=1)
    missed = ((v == (3 - orig)[:, None]) & run).sum(axis=1)
    counted = run.sum(axis=1)
    error_masks = {"all": is_error}
    error_masks |= {t: kinds == t for t in ERROR_TYPES if (kinds == t).any()}
    error_masks |= {
        f"severity {s}": is_error & (severity == s) for s in SEVERITY_NAMES if (is_error & (severity == s)).any()
    }
    detection = grouped_rates(
        data.per_parent(_columns(error_masks, detected)),
        data.per_parent(_columns(error_masks, counted)),
        list(error_masks),
        weights,
        confidence=confidence,
    )
    weighted_miss = data.per_parent(np.where(is_error, missed * severity, 0)[:, None])
    weighted_run = data.per_parent(np.where(is_error, counted * severity, 0)[:, None])
    critical = grouped_rates(weighted_miss, weighted_run, ["weighted"], weights, confidence=confidence)["weighted"]
    critical = Rate(critical.point, critical.low, critical.high, int(counted[is_error].sum()), critical.successes)

    harmless = ~is_error
    both = run.all(axis=1)
    strong_original = (both & (v == orig[:, None]).all(axis=1)).astype(np.int64)
    strong_variant = (both & (v == (3 - orig)[:, None]).all(axis=1)).astype(np.int64)
    harmless_masks = {"all": harmless}
    harmless_masks |= {t: kinds == t for t in (*HARMLESS_TYPES, API_PARAPHRASE) if (kinds == t).any()}
    harmless_masks |= {
        "variant shorter": harmless & (variant_len < orig_len),
        "same length": harmless & (variant_len == orig_len),
        "variant longer": harmless & (variant_len > orig_len),
    }
    denominators = data.per_parent(_columns(harmless_masks, both.astype(np.int64)))
    names = list(harmless_masks)
    over = grouped_rates(
        data.per_parent(_columns(harmless_masks, strong_original)), denominators, names, weights, confidence=confidence
    )
    variant = grouped_rates(
        data.per_parent(_columns(harmless_masks, strong_variant)), denominators, names, weights, confidence=confidence
    )
    asymmetry = _difference(
        data.per_parent(np.where(harmless, strong_original, 0)),
        data.per_parent(np.where(harmless, strong_variant, 0)),
        data.per_parent(np.where(harmless, both, 0)),
        weights,
        confidence,
    )
    fails = bool(np.isfinite(asymmetry.low) and asymmetry.low > 0)
    return JudgeCounterfactual(judge, run_id, detection, critical, over, variant, fails, asymmetry)


def _difference(
    first: npt.NDArray[np.int64],
    second: npt.NDArray[np.int64],
    denominator: npt.NDArray[np.int64],
    weights: npt.NDArray[np.float64],
    confidence: float,
) -> Rate:
    """``(sum first - sum second) / sum denominator`` with its interval on the same resamples."""
    estimate = stats.ratio_ci(
        first - second, denominator, weights=weights, confidence=confidence, small_sample=True, bounds=(-1.0, 1.0)
    )
    return Rate(
        float(estimate.point),
        float(estimate.low),
        float(estimate.high),
        int(denominator.sum()),
        float((first - second).sum()),
    )
