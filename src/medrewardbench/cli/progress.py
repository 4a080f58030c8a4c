"""Progress bars on stderr for requests judged (eval, cv, build, probes).

The training bar lives in :mod:`medrewardbench.cli.train_progress`: importing ``medrewardbench.train``
here would cost every eval its start-up time.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from medrewardbench.cli.support import err_console
from medrewardbench.evaluation.job import ProgressSink
from medrewardbench.evaluation.runner import RunSummary

if TYPE_CHECKING:
    from rich.progress import Progress, TaskID

__all__ = ["RichProgress"]


def _bars() -> Progress:
    """The bars: requests done of all, rate, time taken and left (rich is imported here, not by --quiet)."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        Task,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )
    from rich.text import Text

    class RateColumn(TextColumn):
        def __init__(self) -> None:
            super().__init__("")

        def render(self, task: Task) -> Text:
            speed = task.finished_speed or task.speed
            return Text("-- req/s" if speed is None else f"{speed:,.1f} req/s", style="progress.data.speed")

    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        RateColumn(),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
        console=err_console,
        transient=False,
    )


class RichProgress(ProgressSink):
    """Progress bars on stderr: requests judged, rate and ETA.

    Args:
        enabled: False shows nothing (no bars, no stage lines).
    """

    def __init__(self, enabled: bool = True):
        self.enabled = enabled
        self.progress: Progress | None = _bars() if enabled else None
        self.task: TaskID | None = None

    def start(self, judge_spec: str, total: int, already_done: int) -> None:
        """Add a bar for the run; the stored part counts as done but not in the rate."""
        if self.progress is None:
            return
        if not self.progress.live.is_started:
            self.progress.start()
        self.task = self.progress.add_task(judge_spec, total=total, completed=already_done)
        # the rate must reflect new work only: restart the speed estimate after the stored part
        self.progress.reset(self.task, total=total, completed=already_done)

    def advance(self, n: int) -> None:
        """Move the bar on by ``n`` requests."""
        if self.progress is not None and self.task is not None:
            self.progress.advance(self.task, n)

    def finish(self, summary: RunSummary) -> None:
        """Write how many requests were judged and how many came from the store into the bar's label."""
        self.label(f"{summary.run.judge_spec} ({summary.judged} judged, {summary.reused} from store)")

    def label(self, text: str) -> None:
        """Write ``text`` into the current bar's label (when there is a bar)."""
        if self.progress is not None and self.task is not None:
            self.progress.update(self.task, description=text)

    def stage(self, text: str) -> None:
        """Print the stage on stderr (when progress is enabled)."""
        if self.enabled:
            err_console.print(f"{text} ...", highlight=False, markup=False)

    def close(self) -> None:
        """Stop the live display, if it started."""
        if self.progress is not None and self.progress.live.is_started:
            self.progress.stop()
