"""What hf_minitf checks of a model's inputs before it runs a MiniTF model on them (its commands call these): the
values the model's `forward` never reads, since each read is a host sync on every decoding step.

A MiniTF forward pass checks shapes and dtypes, and turns torch's CPU IndexError for an id or a learned position
outside its table into a ValueError; on an accelerator an id outside the table is a device-side assert instead, and
values that no lookup refuses (a negative sinusoidal position, a source row that is all padding) pass through. These
checks refuse them first, with the same words.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any


def _values(ids: Any) -> list[int]:
    """The ids of a tensor, a list of ids or a list of rows, flattened."""
    rows = ids.tolist() if hasattr(ids, "tolist") else list(ids)
    flat: list[int] = []
    for row in rows:
        flat.extend(row if isinstance(row, Iterable) else [row])
    return flat


def first_outside(ids: Any, size: int) -> int | None:
    """The first id outside `[0, size)`, or None."""
    return next((value for value in _values(ids) if not 0 <= value < size), None)


def check_token_ids(ids: Any, vocab_size: int, name: str = "input_ids") -> None:
    """A ValueError naming the first id outside `[0, vocab_size)` and the vocabulary size."""
    token_id = first_outside(ids, vocab_size)
    if token_id is not None:
        raise ValueError(
            f"{name} contains token id {token_id}, outside the vocabulary (vocab_size={vocab_size}); "
            "ids must lie in [0, vocab_size). Check that the tokenizer matches this model."
        )


def check_model_inputs(model: Any, input_ids: Any = None, attention_mask: Any = None, position_ids: Any = None) -> None:
    """Refuse, before `model` runs, ids outside its (source) vocabulary, positions outside [0,
    max_position_embeddings) and, for a translator, a source row that is all padding."""
    config = model.config
    if input_ids is not None:
        if getattr(config, "is_encoder_decoder", False):
            token_id = first_outside(input_ids, config.src_vocab_size)
            if token_id is not None:  # the words the model's own lookup uses: a target id named as such
                raise ValueError(model.get_encoder().id_refusal(token_id))
        else:
            check_token_ids(input_ids, config.vocab_size)
    if position_ids is not None:
        limit = config.max_position_embeddings
        position = first_outside(position_ids, limit)
        if position is not None and position < 0:
            raise ValueError(f"position_ids must be >= 0, got {position}.")
        if position is not None:
            raise ValueError(f"Position {position} is past this model's max_position_embeddings={limit}.")
    if attention_mask is not None and getattr(config, "is_encoder_decoder", False):
        empty = [index for index, row in enumerate(_rows(attention_mask)) if not any(row)]
        if empty:
            raise ValueError(f"Source rows {empty} are all padding: every source needs a real token.")


def _rows(mask: Any) -> Sequence[Sequence[int]]:
    return mask.tolist() if hasattr(mask, "tolist") else mask


__all__ = ["check_model_inputs", "check_token_ids", "first_outside"]
