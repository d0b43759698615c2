"""Write a MiniTF encoder as a sentence-transformers folder: Transformer -> Pooling(mean) -> Normalize.

The folder uses only sentence-transformers' own module types, in the long-standing layout that Hub embedding
models ship (`modules.json`, `sentence_bert_config.json`, `1_Pooling/`, `2_Normalize/`, the Hugging Face model
and tokenizer at the root), so `SentenceTransformer(folder)` needs no trust beyond the model's own code: none
when hf_minitf is imported, `trust_remote_code=True` otherwise. `AutoModel.from_pretrained(folder)` and
`pipeline("feature-extraction", folder)` load the same folder. sentence-transformers is not needed to write it.
"""

from __future__ import annotations

import copy
import json
import os

from transformers import PreTrainedTokenizerBase

from .modeling_minitf_encoder import MiniTFEncoderModel

POOLING_FOLDER = "1_Pooling"
NORMALIZE_FOLDER = "2_Normalize"


def _write_json(path: str, data) -> None:
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(data, handle, indent=2)
        handle.write("\n")


def save_sentence_transformer(
    model: MiniTFEncoderModel,
    tokenizer: PreTrainedTokenizerBase,
    folder: str | os.PathLike,
    max_seq_length: int | None = None,
) -> str:
    """Save `model` and `tokenizer` to `folder` as a SentenceTransformer whose `encode` is the model's
    `pooler_output` (masked mean of `last_hidden_state`, then L2 normalization); returns the folder.

    `max_seq_length` (default: the smaller of the tokenizer's `model_max_length` and the model's
    `max_position_embeddings`) is where sentence-transformers truncates. The tokenizer is saved without the
    padding or truncation state a previous call may have left in it, padding on the right (the model numbers
    positions from the first slot, so left padding would shift the real tokens).
    """
    if not isinstance(model, MiniTFEncoderModel):
        raise ValueError(
            f"save_sentence_transformer needs a MiniTFEncoderModel, got {type(model).__name__}; for a "
            "classification model pass its encoder (`model.model`)."
        )
    limit = model.config.max_position_embeddings
    if max_seq_length is None:
        max_seq_length = min(tokenizer.model_max_length, limit)
    if not 0 < max_seq_length <= limit:
        raise ValueError(
            f"max_seq_length must lie in [1, max_position_embeddings={limit}], got {max_seq_length}."
        )
    folder = os.fspath(folder)
    os.makedirs(os.path.join(folder, POOLING_FOLDER), exist_ok=True)
    os.makedirs(os.path.join(folder, NORMALIZE_FOLDER), exist_ok=True)

    model.save_pretrained(folder)
    tokenizer = copy.deepcopy(tokenizer)
    tokenizer.padding_side = "right"
    if tokenizer.is_fast:
        tokenizer.backend_tokenizer.no_padding()
        tokenizer.backend_tokenizer.no_truncation()
    tokenizer.save_pretrained(folder)

    _write_json(
        os.path.join(folder, "modules.json"),
        [
            {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
            {"idx": 1, "name": "1", "path": POOLING_FOLDER, "type": "sentence_transformers.models.Pooling"},
            {"idx": 2, "name": "2", "path": NORMALIZE_FOLDER, "type": "sentence_transformers.models.Normalize"},
        ],
    )
    _write_json(
        os.path.join(folder, "sentence_bert_config.json"), {"max_seq_length": max_seq_length, "do_lower_case": False}
    )
    _write_json(
        os.path.join(folder, POOLING_FOLDER, "config.json"),
        {
            "word_embedding_dimension": model.config.hidden_size,
            "pooling_mode_cls_token": False,
            "pooling_mode_mean_tokens": True,
            "pooling_mode_max_tokens": False,
            "pooling_mode_mean_sqrt_len_tokens": False,
            "pooling_mode_weightedmean_tokens": False,
            "pooling_mode_lasttoken": False,
            "include_prompt": True,
        },
    )
    _write_json(
        os.path.join(folder, "config_sentence_transformers.json"),
        {"prompts": {}, "default_prompt_name": None, "similarity_fn_name": "cosine"},
    )
    return folder


__all__ = ["save_sentence_transformer"]
