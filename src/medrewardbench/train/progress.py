"""Training progress: a small receiver interface, and its bridge from transformers' Trainer.

Library code reports progress to a :class:`TrainProgress`; the CLI implements it with rich
progress bars, tests with a list. The TRL trainers' own tqdm bars are switched off.
"""

from __future__ import annotations

from typing import Any

__all__ = ["RecordingProgress", "TrainProgress", "trainer_callback"]


class TrainProgress:
    """Receives training progress. The default implementation ignores everything."""

    def start(self, description: str, total_steps: int) -> None:
        """A training run begins with ``total_steps`` optimizer steps."""

    def step(self, step: int, loss: float | None) -> None:
        """Optimizer step ``step`` finished; ``loss`` is the latest logged loss (None if none yet).

        The same step may be reported twice (once when it ends, again when its loss is logged).
        """

    def finish(self, summary: dict[str, Any]) -> None:
        """The run ended (``summary`` holds final losses and timings)."""


class RecordingProgress(TrainProgress):
    """Keeps every event in a list (for tests and scripts)."""

    def __init__(self) -> None:
        self.events: list[tuple[str, Any]] = []

    def start(self, description: str, total_steps: int) -> None:
        """Record the start."""
        self.events.append(("start", (description, total_steps)))

    def step(self, step: int, loss: float | None) -> None:
        """Record the step and its loss."""
        self.events.append(("step", (step, loss)))

    def finish(self, summary: dict[str, Any]) -> None:
        """Record the summary."""
        self.events.append(("finish", summary))

    @property
    def steps(self) -> list[int]:
        """The steps reported so far, in order."""
        return [payload[0] for kind, payload in self.events if kind == "step"]


def trainer_callback(progress: TrainProgress, description: str) -> Any:
    """A ``transformers.TrainerCallback`` that forwards a Trainer's steps and losses to ``progress``."""
    import transformers

    class _ProgressCallback(transformers.TrainerCallback):
        def __init__(self) -> None:
            self.last_loss: float | None = None

        def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            progress.start(description, int(state.max_steps))

        def on_log(
            self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **kwargs: Any
        ) -> None:
            if logs and "loss" in logs:
                self.last_loss = float(logs["loss"])
                progress.step(int(state.global_step), self.last_loss)

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            progress.step(int(state.global_step), self.last_loss)

    return _ProgressCallback()
