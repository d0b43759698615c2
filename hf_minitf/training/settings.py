"""What a training run takes and gives: `TrainSettings` (each number checked when set, as `minitf train` checks
its options), `TrainingResult`, and `TrainingError`, the one-line refusal of data or options that cannot be used."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from transformers import PreTrainedModel, PreTrainedTokenizerBase

from hf_minitf.catalog.limits import MAX_EPOCHS, MAX_STEPS, SEED_LIMIT
from hf_minitf.safety.model_configs import integer, number


class TrainingError(ValueError):
    """Training data or options that cannot be used, with what to change."""


@dataclass
class TrainSettings:
    """The trainer options `minitf train` exposes (everything else keeps the trainers' defaults)."""

    epochs: float = 1.0
    max_steps: int = -1
    batch_size: int = 32
    learning_rate: float = 1e-3
    warmup: float = 0.0
    weight_decay: float = 0.0
    seed: int = 0
    logging_steps: int = 10
    eval_steps: int | None = None
    save_steps: int = 500
    checkpoint_dir: str | Path | None = None
    resume: bool = False
    mixed_precision: str = "no"
    compile: bool = False
    report_to: str = "none"
    progress: bool = True
    logs_on_bar: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        """Each number finite and in its range (`minitf train` refuses the same values), else a TrainingError
        naming the option, its range and the value."""
        steps = integer(1, maximum=MAX_STEPS)
        checks = {
            "epochs": number(0, MAX_EPOCHS, above=True),
            "learning_rate": number(0, above=True),
            "warmup": number(0, MAX_STEPS),
            "weight_decay": number(0),
            "batch_size": steps,
            "logging_steps": steps,
            "save_steps": steps,
            "eval_steps": integer(1, True, MAX_STEPS),
            "seed": integer(0, maximum=SEED_LIMIT - 1),
        }
        if self.max_steps != -1:
            checks["max_steps"] = steps
        for name, check in checks.items():
            expected = check(getattr(self, name))
            if expected is not None:
                raise TrainingError(f"{name} must be {expected}, got {getattr(self, name)!r}")
        if self.max_steps != -1 and self.warmup > self.max_steps:
            raise TrainingError(
                f"warmup={self.warmup} steps is more than max_steps={self.max_steps}: the learning "
                "rate would never reach its peak; give fewer steps or a fraction below 1"
            )
        if self.mixed_precision not in ("no", "fp16", "bf16"):
            raise TrainingError(f"mixed_precision must be no, fp16 or bf16, got {self.mixed_precision!r}")
        if self.resume and self.checkpoint_dir is None:
            raise TrainingError("--resume needs --checkpoint-dir, the checkpoint folder of the earlier run")


@dataclass
class TrainingResult:
    """What a training run wrote and measured."""

    folder: Path | None
    model: PreTrainedModel
    tokenizer: PreTrainedTokenizerBase
    log_history: list[dict[str, Any]]
    eval_results: dict[str, float]

    @property
    def losses(self) -> list[tuple[int, float]]:
        """(step, training loss) as the trainer logged them."""
        return [(entry["step"], entry["loss"]) for entry in self.log_history if "loss" in entry]


__all__ = ["TrainSettings", "TrainingError", "TrainingResult"]
