"""Progress bars on stderr: requests judged (eval, cv) and training steps (train, cv)."""

from __future__ import annotations

from typing import Any

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
from medrewardbench.train.progress import TrainProgress

__all__ = ["RichProgress", "RichTrainProgress"]


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


class RichTrainProgress(TrainProgress):
    """A rich progress bar per training run on stderr: steps, latest loss, elapsed time and ETA.

    Args:
        enabled: False shows nothing.
    """

    def __init__(self, enabled: bool = True):
        self.progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("steps  loss {task.fields[loss]}"),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            console=err_console,
            disable=not enabled,
        )
        self.task: TaskID | None = None

    def start(self, description: str, total_steps: int) -> None:
        """Add a bar for the training run."""
        if not self.progress.live.is_started:
            self.progress.start()
        self.task = self.progress.add_task(description, total=total_steps, loss="-")

    def step(self, step: int, loss: float | None) -> None:
        """Move the bar to ``step`` and show the latest loss."""
        if self.task is not None:
            self.progress.update(self.task, completed=step, loss="-" if loss is None else f"{loss:.4f}")

    def finish(self, summary: dict[str, Any]) -> None:
        """Show the final loss and let the next run add its own bar."""
        if self.task is not None:
            final = summary.get("losses", {}).get("final")
            self.progress.update(self.task, loss="-" if final is None else f"{final:.4f}")
            self.task = None

    def close(self) -> None:
        """Stop the live display, if it started."""
        if self.progress.live.is_started:
            self.progress.stop()
