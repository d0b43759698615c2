"""SIGINT (Ctrl-C) and SIGTERM (`kill`, `timeout`, job schedulers) during training: the run stops at the end of the
current step, through the trainer's own control, saving a resumable checkpoint there first when it keeps
checkpoints (`--checkpoint-dir`), then raises `TrainingInterrupted` naming the step and the checkpoint.

Only in a run of one process: the processes of a multi-process run (torchrun) would each stop at the step their
signal reached, and wait for each other forever; they keep the default behaviour (the process ends)."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any

from transformers import TrainerCallback
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

STOPPING_SIGNALS = (signal.SIGINT, signal.SIGTERM)
"""The signals that stop a run at the end of its step instead of at once."""


class TrainingInterrupted(KeyboardInterrupt):
    """A run stopped by a signal (`signal_number`) at the end of step `step` of `max_steps`; `checkpoint` is the
    checkpoint folder saved at that step, None when the run keeps none. A KeyboardInterrupt, so a script's Ctrl-C
    handling sees it as before."""

    def __init__(self, signal_number: int, step: int, max_steps: int, checkpoint: Path | None) -> None:
        super().__init__(f"interrupted at step {step} of {max_steps}")
        self.signal_number, self.step, self.max_steps, self.checkpoint = signal_number, step, max_steps, checkpoint

    @property
    def exit_status(self) -> int:
        """The status a shell expects of a process ended by the signal: 130 (SIGINT), 143 (SIGTERM)."""
        return 128 + self.signal_number

    def pass_on(self) -> None:
        """Raise the signal again, now that the run's handlers are gone, for a caller that keeps nothing to resume:
        the handler from before the run acts on it as it would have (Python's raises KeyboardInterrupt, `minitf`'s
        SIGTERM handler exits 143, the default ends the process); returns only when that handler ignores it."""
        signal.raise_signal(self.signal_number)


def what_ctrl_c_does(keeps_checkpoints: bool) -> str:
    """What Ctrl-C does to a run, as the time estimate says it."""
    if keeps_checkpoints:
        return "Ctrl-C stops it after the current step and saves a checkpoint to resume from"
    return "Ctrl-C stops it and keeps nothing (no checkpoint folder was given)"


def stops_on_signals() -> bool:
    """Whether a run here can stop on a signal at the end of a step: in the main thread (where Python's signal
    handlers are set) of a run of one process."""
    return threading.current_thread() is threading.main_thread() and int(os.environ.get("WORLD_SIZE", "1")) == 1


class StopOnSignal(TrainerCallback):
    """While `installed`, SIGINT and SIGTERM only note the signal; at the end of the step under way the trainer is
    told to save a checkpoint (`control.should_save`, when `keeps_checkpoints`) and to stop
    (`control.should_training_stop`). A second signal does at once what it did before (ends the process)."""

    def __init__(self, keeps_checkpoints: bool) -> None:
        self.keeps_checkpoints = keeps_checkpoints
        self.received: int | None = None
        self._previous: dict[int, Any] = {}

    def _note(self, signal_number: int, frame: FrameType | None) -> None:
        if self.received is not None:  # asked twice: the previous handler, now
            self._restore()
            signal.raise_signal(signal_number)
            return
        self.received = signal_number

    def _restore(self) -> None:
        for number, handler in self._previous.items():
            signal.signal(number, handler)
        self._previous = {}

    @contextmanager
    def installed(self) -> Iterator[StopOnSignal]:
        """The handlers set for the block (when `stops_on_signals`), the previous ones restored after it."""
        if stops_on_signals():
            self._previous = {number: signal.signal(number, self._note) for number in STOPPING_SIGNALS}
        try:
            yield self
        finally:
            self._restore()

    def on_step_end(self, args, state, control, **kwargs):
        if self.received is not None:
            control.should_save = self.keeps_checkpoints
            control.should_training_stop = True

    def interruption(self, output_dir: str | Path, step: int, max_steps: int) -> TrainingInterrupted | None:
        """The `TrainingInterrupted` of a run that stopped at `step` on a signal, None when it received none."""
        if self.received is None:
            return None
        checkpoint = Path(output_dir) / f"{PREFIX_CHECKPOINT_DIR}-{step}"
        saved = self.keeps_checkpoints and checkpoint.is_dir()  # not when the signal came after the last step
        return TrainingInterrupted(self.received, step, max_steps, checkpoint if saved else None)


__all__ = ["STOPPING_SIGNALS", "StopOnSignal", "TrainingInterrupted", "stops_on_signals", "what_ctrl_c_does"]
