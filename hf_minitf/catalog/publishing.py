"""What publishing declares once: the license a model card gets when nobody names one, the words of `--license`,
and the files a trainer leaves beside a model that `minitf push` leaves out. Light to import (no torch).
"""

from __future__ import annotations

import fnmatch
import re

DEFAULT_LICENSE = "mit"
"""The license of a model trained from scratch when none is given: the license of hf_minitf, whose model code
(`modeling_minitf*.py`) every saved folder carries beside its weights, so the whole repo is under one license.
An id of the Hub's license list (https://huggingface.co/docs/hub/repositories-licenses)."""

UNSTATED_LICENSE = "other"
"""The license of a converted model whose original project states none: the Hub's id for a license not on its
list; the card says why, and asks for the real one."""

TOKENIZER_LOADING_STATE = ("is_local", "local_files_only")
"""Keys transformers writes into `tokenizer_config.json` when the tokenizer it saves was loaded from a local folder:
how that one load went, not a tokenizer setting. A published folder carries none of them (with `local_files_only`
a loader would never look at the Hub)."""

LICENSE_LIST_URL = "https://huggingface.co/docs/hub/repositories-licenses"
LICENSE_HELP = (
    f"the model card's license, an id of the Hub's license list ({LICENSE_LIST_URL}) such as mit or apache-2.0"
)
"""`--license`'s help; each command adds its default, one of these:"""
TRAINED_LICENSE_DEFAULT = DEFAULT_LICENSE
CARRIED_LICENSE_DEFAULT = f"the source card's license, else {DEFAULT_LICENSE}"


def converted_license_default(project: str, stated: str | None) -> str:
    """What `minitf convert SOURCE --license` defaults to, for the original `project` stating license `stated`."""
    if stated is not None:
        return f"{stated}, the license {project} states"
    return f"{UNSTATED_LICENSE}: {project} states no license, and the card says so and asks for one"


# Hub license ids: lowercase letters, digits, dots, dashes and pluses (mit, apache-2.0, cc-by-nc-sa-4.0, gpl-3.0+).
_LICENSE_ID = re.compile(r"[a-z0-9][a-z0-9.+-]*")


def check_license(license: str) -> str:
    """`license` as the card stores it (lowercase, trimmed), or a ValueError saying what a license id looks like."""
    value = license.strip().lower()
    if not _LICENSE_ID.fullmatch(value):
        raise ValueError(
            f"license {license!r} is not a Hub license id; give one of {LICENSE_LIST_URL} such as mit, apache-2.0 "
            f"or cc-by-4.0 (or {UNSTATED_LICENSE!r} for one not on that list)"
        )
    return value


RUNTIME_REPO_SUFFIXES = {"gguf": "-GGUF", "onnx": "-ONNX", "ctranslate2": "-ct2"}
"""`minitf push --all-runtimes`: the repo of each runtime's files, named after REPO_ID as the Hub's exporters name
theirs (llama.cpp's GGUF repos `NAME-GGUF`, ONNX's `NAME-ONNX`, CTranslate2's `NAME-ct2`); the native folder goes
to REPO_ID itself and the web page to the static Space REPO_ID, as `--native` and `--space` put them."""
ALL_RUNTIMES_GGUF_DTYPES = ("q4_k_m", "q8_0")
"""The GGUF types `--all-runtimes` uploads unless `--gguf` names others: Ollama's default (written by llama.cpp's
quantizer, skipped with a line where the `llama` extra is not installed) and q8_0."""


TRAINING_BYPRODUCTS: dict[str, str] = {
    # transformers.trainer: TRAINING_ARGS_NAME, OPTIMIZER_NAME, OPTIMIZER_NAME_BIN, SCHEDULER_NAME, SCALER_NAME,
    # TRAINER_STATE_NAME, the rng_state files of `Trainer._save_rng_state`, and PREFIX_CHECKPOINT_DIR's folders
    "training_args.bin": "the trainer's TrainingArguments, a pickle",
    "optimizer.pt": "optimizer state, for resuming training",
    "optimizer.bin": "optimizer state, for resuming training",
    "scheduler.pt": "learning-rate scheduler state, for resuming training",
    "scaler.pt": "mixed-precision gradient scaler state, for resuming training",
    "trainer_state.json": "the trainer's step counter and logs, for resuming training",
    "rng_state*.pth": "random generator states, for resuming training",
    "checkpoint-*/": "a trainer checkpoint folder (weights with optimizer state), for resuming training",
}
"""The files (and, ending in `/`, folders) that transformers' Trainer (and TRL's trainers, which are Trainers) write
into an output folder beside the model, by name pattern at the folder's top level, with what each holds:
`minitf push` leaves them out, naming each. None is needed to load the model."""


def training_byproduct(relative: str, is_folder: bool) -> str | None:
    """What the top-level entry `relative` of a model folder holds when it is a trainer's by-product
    (`TRAINING_BYPRODUCTS`); None for anything else (nested paths included)."""
    if "/" in relative:
        return None
    for pattern, what in TRAINING_BYPRODUCTS.items():
        if pattern.endswith("/") == is_folder and fnmatch.fnmatchcase(relative, pattern.rstrip("/")):
            return what
    return None


__all__ = [
    "ALL_RUNTIMES_GGUF_DTYPES",
    "CARRIED_LICENSE_DEFAULT",
    "DEFAULT_LICENSE",
    "LICENSE_HELP",
    "LICENSE_LIST_URL",
    "RUNTIME_REPO_SUFFIXES",
    "TRAINED_LICENSE_DEFAULT",
    "TRAINING_BYPRODUCTS",
    "UNSTATED_LICENSE",
    "check_license",
    "converted_license_default",
    "training_byproduct",
]
