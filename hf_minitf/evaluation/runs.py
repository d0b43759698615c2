"""One evaluation of a model on data, for each family: a GPT's perplexity and bits (`evaluate_gpt`), an encoder's
retrieval figures (`evaluate_encoder`), a translator's BLEU, chrF and exact match (`evaluate_translator`), each
returning an `Evaluation` that says what was measured, on which data, how; `evaluate_folder` runs the one a
transformers folder needs (a MiniTF folder or its native export). The engine exports (CTranslate2, ONNX) sit above
this package: `minitf eval` hands their runners in as the same functions (a scorer, an encode, a translate).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hf_minitf.catalog.families import FAMILIES, family_of_config
from hf_minitf.evaluation.data import EvalData, load_pairs, load_texts
from hf_minitf.evaluation.language_modeling import (
    Scorer,
    causal_lm_scorer,
    model_context,
    perplexity,
    tokenize_documents,
    unknown_tokens,
)
from hf_minitf.evaluation.retrieval import Encode, retrieval_figures
from hf_minitf.evaluation.translation import Translate, require_sacrebleu, seq2seq_translate, translation_figures
from hf_minitf.safety.json_files import read_json

# The Hub's task type of each family's evaluation (the model-index's `task.type`).
TASK_TYPES = {"gpt": "text-generation", "encoder": "sentence-similarity", "seq2seq": "translation"}


@dataclass
class Evaluation:
    """Figures of one model on one data set, with how they were measured."""

    family: str
    figures: dict[str, float]
    data: EvalData
    measured_by: str
    """What computed the figures (`transformers`, `CTranslate2 score_batch`, ...)."""
    details: dict[str, Any] = field(default_factory=dict)
    """Counts and settings (tokens, window, stride, pairs)."""
    unknown: tuple[int, int] = (0, 0)
    """(the data's tokens that are the unknown token, the data's tokens): a GPT's (`unknown_share`)."""
    notes: dict[str, str] = field(default_factory=dict)
    """A sentence on a figure measured in a way that needs saying, by figure name (BLEU's effective order)."""

    @property
    def unknown_share(self) -> float:
        """The share of the data's tokens that the tokenizer read as its unknown token."""
        unknown, total = self.unknown
        return unknown / total if total else 0.0

    @property
    def task_type(self) -> str:
        return TASK_TYPES[self.family]

    def as_dict(self) -> dict[str, Any]:
        """What `minitf eval --json` prints."""
        return {
            "family": self.family,
            "task": self.task_type,
            "data": {"name": self.data.name, "sha256": self.data.sha256, "split": self.data.split},
            "measured_by": self.measured_by,
            "figures": self.figures,
            **({"notes": self.notes} if self.notes else {}),
            **self.details,
        }


def evaluate_gpt(
    score: Scorer,
    tokenizer,
    data: EvalData,
    window: int,
    stride: int | None = None,
    progress: bool = False,
    measured_by: str = "transformers",
) -> Evaluation:
    """Perplexity, bits per token and per character of the `score`d GPT on `data`'s texts."""
    documents, characters = tokenize_documents(tokenizer, data.texts or [])
    result = perplexity(score, documents, characters, window, stride, progress)
    details = result.as_dict()
    for name in result.figures():
        details.pop(name)
    unknown, total = unknown_tokens(tokenizer, documents)
    if unknown:  # named on the card beside the figures, and by `minitf eval`
        details["unknown_tokens"] = unknown
    return Evaluation("gpt", result.figures(), data, measured_by, details, unknown=(unknown, total))


def evaluate_encoder(
    data: EvalData,
    model=None,
    encode: Encode | None = None,
    progress: bool = False,
    measured_by: str = "sentence-transformers",
) -> Evaluation:
    """Retrieval figures of a SentenceTransformer `model` (or an `encode` function) on `data`'s pairs."""
    pairs = data.pairs or []
    figures = retrieval_figures(pairs, model=model, encode=encode, progress=progress)
    details = {"pairs": len(pairs), "corpus": len({positive for _, positive in pairs})}
    return Evaluation("encoder", figures, data, measured_by, details)


def evaluate_translator(
    data: EvalData, translate: Translate, progress: bool = False, measured_by: str = "transformers"
) -> Evaluation:
    """BLEU, chrF and exact match of `translate`'s greedy translations of `data`'s pairs (BLEU's note where the
    segments are too short for plain BLEU)."""
    pairs = data.pairs or []
    figures, _, notes = translation_figures(pairs, translate, progress)
    details = {"pairs": len(pairs), "decoding": "greedy"}
    return Evaluation("seq2seq", figures, data, measured_by, details, notes=notes)


def folder_family(folder: Path) -> str:
    """The family a transformers model folder's evaluation is (a MiniTF folder or its native export)."""
    config_path = folder / "config.json"
    config = (
        read_json(config_path, dict, "an object", "save or export the model again") if config_path.is_file() else {}
    )
    family = family_of_config(config, folder)
    if family is None:
        raise ValueError(
            f"{folder} holds no model minitf eval measures (a GPT, a SentenceTransformer encoder or a translator, as "
            "a MiniTF folder, its native export or an engine export)"
        )
    return family


def load_data(family: str, path: str | os.PathLike, columns: Sequence[str] | None, split: str | None) -> EvalData:
    """The evaluation data of a `family` model: texts (gpt) or pairs, in `columns` (default: the family's); for a
    translator, sacrebleu is checked first."""
    names = list(columns) if columns else FAMILIES[family].default_columns.split(",")
    if family == "gpt":
        return load_texts(path, names[0], split)
    if family == "seq2seq":
        require_sacrebleu()
    return load_pairs(path, names, split)


def evaluate_folder(
    folder: str | os.PathLike,
    data_path: str | os.PathLike,
    *,
    columns: Sequence[str] | None = None,
    split: str | None = None,
    stride: int | None = None,
    progress: bool = False,
) -> Evaluation:
    """Evaluate the transformers model folder `folder` (MiniTF or a native export) on the data at `data_path`:
    the data is read and checked before the model is loaded."""
    folder = Path(folder)
    family = folder_family(folder)
    data = load_data(family, data_path, columns, split)
    if family == "encoder":
        from sentence_transformers import SentenceTransformer

        return evaluate_encoder(data, model=SentenceTransformer(str(folder)), progress=progress)
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(folder)
    if family == "gpt":
        from transformers import AutoModelForCausalLM

        model = AutoModelForCausalLM.from_pretrained(folder).eval()
        return evaluate_gpt(causal_lm_scorer(model), tokenizer, data, model_context(model.config), stride, progress)
    from transformers import AutoModelForSeq2SeqLM

    model = AutoModelForSeq2SeqLM.from_pretrained(folder).eval()
    return evaluate_translator(data, seq2seq_translate(model, tokenizer), progress)


__all__ = [
    "TASK_TYPES",
    "Evaluation",
    "evaluate_encoder",
    "evaluate_folder",
    "evaluate_gpt",
    "evaluate_translator",
    "folder_family",
    "load_data",
]
