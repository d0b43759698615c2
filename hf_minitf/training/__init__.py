"""Training: each family's trainer (`trainers`), the data it reads (`data`), the built-in tasks and the quickstart.

`train_gpt`, `train_encoder`, `train_seq2seq`, `TrainSettings` and `TrainingResult` are public names of `hf_minitf`.
Imported from here, where they were before the package's layers were drawn, they still work for this release, with
a DeprecationWarning naming the new import.
"""

from __future__ import annotations

import warnings
from typing import Any

MOVED_TO_TOP = ("TrainSettings", "TrainingResult", "train_gpt", "train_encoder", "train_seq2seq")


def __getattr__(name: str) -> Any:
    if name not in MOVED_TO_TOP:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    warnings.warn(
        f"`from hf_minitf.training import {name}` is deprecated and goes in the next release: use "
        f"`from hf_minitf import {name}`",
        DeprecationWarning,
        stacklevel=2,
    )
    from hf_minitf.training import trainers

    return getattr(trainers, name)
