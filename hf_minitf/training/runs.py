"""A training run's record and folders: what a run was started with (`RUN_RECORD`, written into each checkpoint)
so that `--resume` refuses a run started otherwise, naming what differs; the output and checkpoint folders checked
before training (writable, room for the weights); and the folder named when a write into it fails."""

from __future__ import annotations

import errno
import hashlib
import json
import logging
import os
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from transformers import PreTrainedModel, PreTrainedTokenizerBase, TrainerCallback
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

from hf_minitf.safety.files import write_files_together
from hf_minitf.safety.json_files import read_json
from hf_minitf.safety.output_folders import (
    DiskFull,
    OutputFolder,
    disk_full,
    space_refusal,
    weights_bytes,
    working_folder_refusal,
)
from hf_minitf.training.settings import TrainingError, TrainSettings

logger = logging.getLogger(__name__)

RUN_RECORD = "minitf_run.json"
"""The file in each checkpoint folder saying what the run was started with (its corpus's sha256, its tokenizer's
vocabulary, its model config), which `--resume` compares with the run that resumes."""
CHECKPOINT_COPIES = 3
"""A checkpoint holds at least this many copies of the weights' size: the weights and AdamW's two moments."""


class TextsDigest:
    """The sha256 of a sequence of texts, each hashed alone first (so ["ab", "c"] and ["a", "bc"] differ), fed
    text by text or, for a text read in chunks, chunk by chunk as they pass."""

    def __init__(self) -> None:
        self._all = hashlib.sha256()

    def text(self, chunks: Iterable[str]) -> Iterator[str]:
        """The chunks of one text, passed on; the text counts once they are all consumed."""
        one = hashlib.sha256()
        for chunk in chunks:
            one.update(chunk.encode("utf-8", "surrogatepass"))
            yield chunk
        self._all.update(one.digest())

    def add(self, texts: Iterable[str]) -> TextsDigest:
        for text in texts:
            for _ in self.text([text]):
                pass
        return self

    def hexdigest(self) -> str:
        return self._all.hexdigest()


def _run_record(corpus: str, dataset_name: str | None, tokenizer: PreTrainedTokenizerBase, model) -> dict[str, Any]:
    """What a run is started with, as `RUN_RECORD` keeps it: the corpus's sha256 (`corpus`) and name, the
    tokenizer's size and vocabulary's sha256 (the source side of a seq2seq pair: the corpus fixes the rest), and
    the model config without the fields that name the library or the code rather than the model."""
    vocabulary = json.dumps(sorted(tokenizer.get_vocab().items()), ensure_ascii=False)
    config = json.loads(model.config.to_json_string(use_diff=False))
    for name in ("transformers_version", "auto_map", "_name_or_path"):
        config.pop(name, None)
    return {
        "corpus": {"name": dataset_name, "sha256": corpus},
        "tokenizer": {"tokens": len(tokenizer), "sha256": hashlib.sha256(vocabulary.encode("utf-8")).hexdigest()},
        "config": config,
    }


class RecordRun(TrainerCallback):
    """Writes the run's record (`RUN_RECORD`) into each checkpoint folder the trainer saves, for `--resume`."""

    def __init__(self, record: dict[str, Any]) -> None:
        self.record = record

    def on_save(self, args, state, control, **kwargs):
        folder = Path(args.output_dir) / f"{PREFIX_CHECKPOINT_DIR}-{state.global_step}"
        if state.is_world_process_zero and folder.is_dir():
            write_files_together(folder, {RUN_RECORD: json.dumps(self.record, indent=2, ensure_ascii=False) + "\n"})


def _corpus_text(corpus: dict[str, Any]) -> str:
    """A corpus of a run's record as a message names it: `NAME with sha256 0123456789ab`."""
    name, digest = corpus.get("name"), f"sha256 {str(corpus.get('sha256'))[:12]}"
    return f"{name} with {digest}" if name else digest


def _resume_refusal(checkpoint: Path, saved: dict[str, Any], now: dict[str, Any]) -> str | None:
    """Why the run `now` must not resume from `checkpoint`, started as `saved` says: the corpora, the tokenizers or
    fields of the configs differ (each named, with both values); None when they agree."""

    def part(name: str) -> dict[str, Any]:
        value = saved.get(name)
        return value if isinstance(value, dict) else {}

    kinds, details = [], []
    corpus = part("corpus")
    if corpus.get("sha256") != now["corpus"]["sha256"]:
        kinds.append("corpus")
        details.append(f"the corpus ({_corpus_text(corpus)} then, {_corpus_text(now['corpus'])} now)")
    tokenizer = part("tokenizer")
    if tokenizer.get("sha256") != now["tokenizer"]["sha256"]:
        kinds.append("tokenizer")
        details.append(
            f"the tokenizer ({tokenizer.get('tokens')} tokens, vocabulary sha256 {str(tokenizer.get('sha256'))[:12]} "
            f"then; {now['tokenizer']['tokens']} tokens, {now['tokenizer']['sha256'][:12]} now)"
        )
    config = part("config")
    absent = "(absent)"
    fields = [
        f"{name} ({config.get(name, absent)!r} then, {now['config'].get(name, absent)!r} now)"
        for name in sorted(set(config) | set(now["config"]))
        if config.get(name, absent) != now["config"].get(name, absent)
    ]
    if fields:
        kinds.append("config")
        more = f" and {len(fields) - 3} more" if len(fields) > 3 else ""
        details.append(f"config field{'s' if len(fields) > 1 else ''} {', '.join(fields[:3])}{more}")
    if not kinds:
        return None
    return (
        f"--resume: {checkpoint} was trained with another {' and '.join(kinds)}: {'; '.join(details)}; resume with "
        "the data and options that run started with, or train from scratch into a new --checkpoint-dir"
    )


def check_resume(checkpoint: Path, record: dict[str, Any] | None) -> None:
    """Refuse resuming from `checkpoint` a run started with another corpus, tokenizer or config (`RUN_RECORD`); a
    checkpoint without a record (an earlier hf_minitf's, another program's) is resumed with a warning."""
    if record is None:
        return
    path = checkpoint / RUN_RECORD
    if not path.is_file():
        logger.warning(
            "--resume: %s has no %s (written by an earlier hf_minitf or another program), so its corpus, "
            "tokenizer and config cannot be compared with this run's",
            checkpoint,
            RUN_RECORD,
        )
        return
    saved = read_json(
        path, dict, "a record of the run", "resume from an earlier checkpoint-* or start again", TrainingError
    )
    refusal = _resume_refusal(checkpoint, saved, record)
    if refusal is not None:
        raise TrainingError(refusal)


def check_checkpoint_dir(settings: TrainSettings) -> None:
    """Refuse, before any work, a `--checkpoint-dir` that cannot be a folder or where nothing can be written."""
    refusal = working_folder_refusal(settings.checkpoint_dir) if settings.checkpoint_dir is not None else None
    if refusal is not None:
        raise TrainingError(refusal.format(out=f"--checkpoint-dir {settings.checkpoint_dir}"))


def _check_space(model: PreTrainedModel, target: OutputFolder | None, settings: TrainSettings) -> None:
    """Refuse, before training, an output or checkpoint folder whose disk cannot take the weights (a checkpoint:
    `CHECKPOINT_COPIES` times their size), lower bounds of what will be written there."""
    weights = weights_bytes(model.parameters())
    if target is not None:
        target.check_space(weights, "the weights")
    if settings.checkpoint_dir is not None:
        refusal = space_refusal(
            settings.checkpoint_dir, CHECKPOINT_COPIES * weights, "a checkpoint (the weights and AdamW's two moments)"
        )
        if refusal is not None:
            raise TrainingError(refusal.format(out=f"--checkpoint-dir {settings.checkpoint_dir}"))


TEMPORARY_ADVICE = "free some space there or set TMPDIR to a folder on a disk with more room"


@contextmanager
def writing_into(folder: Path, name: str, advice: str) -> Iterator[None]:
    """Name `folder` (as `name`: `--checkpoint-dir DIR`, a temporary folder) in the errors of the block's writes into
    it: a full disk becomes a DiskFull ending with `advice`, the folder deleted meanwhile a TrainingError. A full
    disk another folder's writer named already is left as it is."""
    try:
        yield
    except Exception as error:
        ours = not isinstance(error, DiskFull) or error.path == folder
        if ours and disk_full(error, folder):
            raise DiskFull(
                f"the disk holding {name} is full ({os.strerror(errno.ENOSPC)}), so the run stopped before writing "
                f"the model; {advice}",
                folder,
            ) from error
        if isinstance(error, FileNotFoundError) and not folder.exists():
            raise TrainingError(
                f"{name} was deleted while the run used it (a cleaner of old files?), so the run stopped before "
                "writing the model; run again and leave it in place"
            ) from error
        raise


def checkpoint_folder_name(settings: TrainSettings, work_dir: Path) -> tuple[str, str]:
    """How errors name the trainer's folder, and what to do when its disk is full."""
    if settings.checkpoint_dir is not None:
        return f"--checkpoint-dir {work_dir}", "free some space there or choose another --checkpoint-dir"
    return f"the temporary folder {work_dir}", TEMPORARY_ADVICE


def prepare_run(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    target: OutputFolder | None,
    settings: TrainSettings,
    corpus: str,
    dataset_name: str | None,
) -> dict[str, Any] | None:
    """Before the trainer is made (it makes the checkpoint folder): refuse folders whose disks cannot take the
    weights (`_check_space`); returns the run's record (`_run_record`, of the `corpus` sha256) when it keeps
    checkpoints."""
    _check_space(model, target, settings)
    return _run_record(corpus, dataset_name, tokenizer, model) if settings.checkpoint_dir is not None else None


__all__ = [
    "CHECKPOINT_COPIES",
    "RUN_RECORD",
    "TEMPORARY_ADVICE",
    "RecordRun",
    "TextsDigest",
    "check_checkpoint_dir",
    "check_resume",
    "checkpoint_folder_name",
    "prepare_run",
    "writing_into",
]
