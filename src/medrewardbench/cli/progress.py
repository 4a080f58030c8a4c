"""Progress bars on stderr for requests judged (eval, cv, build, probes).

The training bar lives in :mod:`medrewardbench.cli.train_progress`: importing ``medrewardbench.train``
here would cost every eval its start-up time.
"""

from __future__ import annotations

from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    Task,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.text import Text

from medrewardbench.cli.support import err_console
from medrewardbench.evaluation.job import ProgressSink
from medrewardbench.evaluation.runner import RunSummary

__all__ = ["RichProgress"]


class _RateColumn(TextColumn):
    def __init__(self) -> None:
        super().__init__("")

    def render(self, task: Task) -> Text:

        speed = task.finished_speed or task.speed
        return Text("-- req/s" if speed is None else f"{speed:,.1f} req/s", style="progress.data.speed")


class RichProgress(ProgressSink):
    """Progress bars on stderr: requests judged, rate and ETA.

    Args:
        enabled: False shows nothing (no bars, no stage lines).
    """

    def __init__(self, enabled: bool = True):
        self.enabled = enabled
        self.progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            _RateColumn(),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            console=err_console,
            disable=not enabled,
            transient=False,
        )
        self.task: TaskID | None = None

    def start(self, judge_spec: str, total: int, already_done: int) -> None:
        """Add a bar for the run; the stored part counts as done but not in the rate."""
        if not self.progress.live.is_started:
            self.progress.start()
        self.task = self.progress.add_task(judge_spec, total=total, completed=already_done)
        # the rate must reflect new work only: restart the speed estimate after the stored part
        self.progress.reset(self.task, total=total, completed=already_done)

    def advance(self, n: int) -> None:
        """Move the bar on by ``n`` requests."""
        if self.task is not None:
            self.progress.advance(self.task, n)

    def finish(self, summary: RunSummary) -> None:
        """Write how many requests were judged and how many came from the store into the bar's label."""
        if self.task is not None:
            self.progress.update(
                self.task,
                description=f"{summary.run.judge_spec} ({summary.judged} judged, {summary.reused} from store)",
            )

    def stage(self, text: str) -> None:
        """Print the stage on stderr (when progress is enabled)."""
        if self.enabled:
            err_console.print(f"{text} ...", highlight=False, markup=False)

    def close(self) -> None:
        """Stop the live display, if it started."""
        if self.progress.live.is_started:
            self.progress.stop()
