"""What a training run says while it trains, all of it on stderr (stdout is left to a command's result lines): one
readable line per log of the trainer (`LogLines`: "step 20/300: loss 4.539, learning rate 3.0e-04, grad norm
1.21"), the latest loss on the progress bar (`LossOnBar`), and, for a long run, one line after its first steps with
the measured time per step and the time left (`TimeEstimate`)."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any

from tqdm import tqdm
from transformers import ProgressCallback, TrainerCallback

ESTIMATE_STEPS = 5
"""Optimizer steps the estimate times, after the run's first one (which also pays for warm-up: the first batches,
allocations), so the estimate comes after 1 + ESTIMATE_STEPS steps."""
ESTIMATE_ABOVE_SECONDS = 60.0
"""A run expected to take longer than this (its steps at the measured time per step) gets the estimate line; a
shorter one is nearly over when the line could come."""

HIDDEN_LOG_KEYS = ("total_flos",)
"""Figures of the trainer's logs no reader acts on (the floating point operations of the whole run)."""


def write_line(line: str) -> None:
    """One line on stderr, above the progress bars when they are drawn (tqdm clears and redraws them)."""
    tqdm.write(line, file=sys.stderr)


def _number(key: str, value: float) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, int):
        return f"{value}"
    if key.endswith("learning_rate"):
        return f"{value:.1e}"
    if key.endswith("runtime"):
        return f"{value:.3g} s"
    if key == "epoch":
        return f"{value:.2f}"
    return f"{value:.4g}"


def log_line(logs: dict[str, Any], step: int, max_steps: int) -> str:
    """A log of the trainer as one line: `step N/M: loss 4.539, learning rate 3.0e-04, grad norm 1.21`; the
    held-out figures (`eval_*`) named `held-out ...`, numbers formatted as numbers."""
    parts = []
    for key, value in logs.items():
        if key in HIDDEN_LOG_KEYS:
            continue
        name = f"held-out {key.removeprefix('eval_')}" if key.startswith("eval_") else key
        parts.append(f"{name.replace('_', ' ')} {_number(key, value)}")
    return f"step {step}/{max_steps}: " + ", ".join(parts)


class LogLines(TrainerCallback):
    """Each log of the trainer (loss, learning rate, held-out figures, the run's summary) as one `log_line` on
    stderr, written by the main process; in place of the trainer's own printers, which write Python dicts of
    strings to stdout."""

    def __init__(self, write: Callable[[str], None] = write_line) -> None:
        self.write = write

    def on_log(self, args, state, control, logs=None, **kwargs):
        if state.is_world_process_zero and logs:
            self.write(log_line(logs, state.global_step, state.max_steps))


class LossOnBar(ProgressCallback):
    """The trainer's own progress bars (on stderr), showing the latest loss on the bar instead of printing each log
    (`LogLines` writes them)."""

    def on_log(self, args, state, control, logs=None, **kwargs):
        if state.is_world_process_zero and self.training_bar is not None and logs and "loss" in logs:
            self.training_bar.set_postfix(loss=f"{logs['loss']:.3f}", refresh=False)


def duration(seconds: float) -> str:
    """A duration as a person reads it: `45 s`, `17 min`, `2.5 h`."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


class TimeEstimate(TrainerCallback):
    """After the run's first step and `ESTIMATE_STEPS` more, one line on stderr with the run's steps, the measured
    seconds per step and the time left, when the run is expected to take longer than `ESTIMATE_ABOVE_SECONDS`;
    `after_line` is what Ctrl-C does (empty: nothing said)."""

    def __init__(self, after_line: str = "", write: Callable[[str], None] = write_line) -> None:
        self.after_line, self.write = after_line, write
        self.first_step: int | None = None
        self.started: float | None = None

    def on_step_end(self, args, state, control, **kwargs):
        if not state.is_world_process_zero:
            return
        if self.first_step is None:  # the first step of this run (a resumed run starts later): timing starts here
            self.first_step, self.started = state.global_step, time.monotonic()
            return
        if state.global_step - self.first_step != ESTIMATE_STEPS or self.started is None:
            return
        per_step = (time.monotonic() - self.started) / ESTIMATE_STEPS
        left = (state.max_steps - state.global_step) * per_step
        if (state.max_steps - self.first_step + 1) * per_step <= ESTIMATE_ABOVE_SECONDS:
            return
        self.write(
            f"{state.max_steps} steps at {per_step:.2g} s per step: about {duration(left)} left"
            + (f"; {self.after_line}" if self.after_line else "")
        )


__all__ = [
    "ESTIMATE_ABOVE_SECONDS",
    "ESTIMATE_STEPS",
    "HIDDEN_LOG_KEYS",
    "LogLines",
    "LossOnBar",
    "TimeEstimate",
    "duration",
    "log_line",
    "write_line",
]
