"""The progress bars of ``build``'s generation steps, imported by those commands only.

It subclasses a class of :mod:`medrewardbench.curation.generation`; kept out of
:mod:`medrewardbench.cli.build`, so that starting any other command does not import ``curation/``.
"""

from __future__ import annotations

from medrewardbench.cli.progress import RichProgress
from medrewardbench.curation.generation import GenerationProgress, GenerationSummary

__all__ = ["BuildProgress"]


class BuildProgress(RichProgress, GenerationProgress):
    """The eval progress bars, told about generators."""

    def finish_generation(self, summary: GenerationSummary) -> None:
        """Write how many answers were generated and how many came from the store into the bar's label."""
        self.label(f"{summary.spec} ({summary.generated} answered, {summary.reused} from store)")
