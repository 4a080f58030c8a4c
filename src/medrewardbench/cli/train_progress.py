"""A progress bar on stderr for training steps (train, cv)."""

from __future__ import annotations

from typing import Any

from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from medrewardbench.cli.support import err_console
from medrewardbench.train.progress import TrainProgress

__all__ = ["RichTrainProgress"]


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
