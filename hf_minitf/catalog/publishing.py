"""What publishing declares once: the license a model card gets when nobody names one, the words of `--license`,
and the files a trainer leaves beside a model that `minitf push` leaves out. Light to import (no torch).
"""

from __future__ import annotations

import fnmatch
import re

PACKAGE_LICENSE = "mit"
"""hf_minitf's license: that of the model code (`modeling_minitf*.py`) every saved folder carries, and of the tasks
`minitf quickstart` generates (the license of the quickstart's models)."""

UNSTATED_LICENSE = "other"
"""The Hub's id for a license not on its list: the license of weights whose terms nobody stated (a converted model
whose original project states none, a model trained on data whose license was not given); the card says why, and
asks for the real one."""

UNSTATED_LICENSE_NAME = "not-stated"
"""The `license_name` beside `license: other` (the Hub asks for one) where nobody stated the terms."""

DEFAULT_LICENSE = UNSTATED_LICENSE
"""The license of a card when nobody names one: weights take the terms of the data they were trained on, which the
package does not know (a model trained on GPL text is not MIT because its code is), so `other` with a section
asking for the license. An id of the Hub's license list (https://huggingface.co/docs/hub/repositories-licenses)."""

TOKENIZER_LOADING_STATE = ("is_local", "local_files_only")
"""Keys transformers writes into `tokenizer_config.json` when the tokenizer it saves was loaded from a local folder:
how that one load went, not a tokenizer setting. A published folder carries none of them (with `local_files_only`
a loader would never look at the Hub)."""

LICENSE_LIST_URL = "https://huggingface.co/docs/hub/repositories-licenses"
LICENSE_HELP = (
    f"the model card's license, an id of the Hub's license list ({LICENSE_LIST_URL}) such as mit or apache-2.0"
)
"""`--license`'s help; each command adds its default, one of these:"""
TRAINED_LICENSE_DEFAULT = (
    f"{DEFAULT_LICENSE}, with a warning: the license of your data is not known here, so name the one it allows"
)
QUICKSTART_LICENSE_DEFAULT = f"{PACKAGE_LICENSE}, hf_minitf's license, which its generated tasks are under"
CARRIED_LICENSE_DEFAULT = f"the source card's license, else {DEFAULT_LICENSE}"
NO_LICENSE_WARNING = (
    f"no license given: the card's license is {DEFAULT_LICENSE!r} (the terms of the training data are not known "
    "here); pass --license ID (license= in Python) with the license your data allows, e.g. mit, apache-2.0 or "
    "gpl-3.0"
)
"""The warning of a model trained from scratch without `--license` (its card's section says the same)."""


def converted_license_default(project: str, stated: str | None) -> str:
    """What `minitf convert SOURCE --license` defaults to, for the original `project` stating license `stated`."""
    if stated is not None:
        return f"{stated}, the license {project} states"
    return f"{UNSTATED_LICENSE}: {project} states no license, and the card says so and asks for one"


# ISO 639 language codes: two letters (639-1) or three (639-2/3), as the Hub's `language:` metadata takes them.
_LANGUAGE_CODE = re.compile(r"[a-z]{2,3}")


def check_language(code: str, option: str = "language") -> str:
    """`code` as a card's `language:` stores it (lowercase, trimmed), or a ValueError naming `option` and what a
    language code looks like."""
    value = code.strip().lower()
    if not _LANGUAGE_CODE.fullmatch(value):
        raise ValueError(
            f"{option} {code!r} is not an ISO 639 language code; give two or three letters such as en, it, de or fra"
        )
    return value


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


def license_fields(license: str, license_name: str | None = None) -> dict[str, str | None]:
    """A card's license metadata: `license`, and beside `other` a `license_name` (the one given, else
    `UNSTATED_LICENSE_NAME`); None for `license_name` beside a license of the Hub's list."""
    if license != UNSTATED_LICENSE:
        return {"license": license, "license_name": None}
    return {"license": license, "license_name": license_name or UNSTATED_LICENSE_NAME}


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
    "NO_LICENSE_WARNING",
    "PACKAGE_LICENSE",
    "QUICKSTART_LICENSE_DEFAULT",
    "RUNTIME_REPO_SUFFIXES",
    "TRAINED_LICENSE_DEFAULT",
    "TRAINING_BYPRODUCTS",
    "UNSTATED_LICENSE",
    "UNSTATED_LICENSE_NAME",
    "check_language",
    "check_license",
    "converted_license_default",
    "license_fields",
    "training_byproduct",
]
