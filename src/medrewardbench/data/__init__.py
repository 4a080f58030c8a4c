"""Data loaders: demo set, official Med-RewardBench layout, Hub, canonical files; validation.

The loaders turn a source (``"demo"``, ``"hf:OWNER/NAME"``, a reference-layout directory, canonical
files; see :mod:`medrewardbench.data.sources`) into a :class:`Benchmark` of cases. This package
holds loaders only: image decoding is :mod:`medrewardbench.images`. The names below are re-exported
from the modules that define them.
"""

from medrewardbench.data.benchmark import (
    Benchmark,
    CaseLocation,
    LoadResult,
    nothing_to_measure,
    summarize_warnings,
)
from medrewardbench.data.canonical import read_canonical, write_canonical
from medrewardbench.data.demo import DEMO_NOTICE, load_demo
from medrewardbench.data.image_policy import IMAGE_ROOTS_ENV, ImagePolicy
from medrewardbench.data.sources import collect_source, load_benchmark
from medrewardbench.data.validate import validate_source

__all__ = [
    "DEMO_NOTICE",
    "IMAGE_ROOTS_ENV",
    "Benchmark",
    "CaseLocation",
    "ImagePolicy",
    "LoadResult",
    "collect_source",
    "load_benchmark",
    "load_demo",
    "nothing_to_measure",
    "read_canonical",
    "summarize_warnings",
    "validate_source",
    "write_canonical",
]
