"""Checks of what a MiniTF model is given: a bad input is a ValueError saying what was wrong and what to do,
not an index error from inside torch.

Checks that read tensor values (a host sync, a graph break) are skipped inside a compiled graph. This file is copied
beside saved models with the modeling files, so it imports only torch.
"""

from __future__ import annotations

import torch


def checks_enabled() -> bool:
    """Input checks read tensor values (a host sync, a graph break): skip them inside a compiled graph."""
    return not torch.compiler.is_compiling()


def check_ids_tensor(input_ids: torch.Tensor, name: str = "input_ids") -> None:
    """Token ids must be a (batch, length) tensor of integers (their values are checked against a vocabulary apart)."""
    if not isinstance(input_ids, torch.Tensor):
        raise ValueError(
            f"{name} must be a torch tensor of token ids, got {type(input_ids).__name__}; "
            "call the tokenizer with return_tensors='pt'."
        )
    if input_ids.dim() != 2:
        raise ValueError(
            f"{name} must have shape (batch_size, sequence_length), got {tuple(input_ids.shape)}; "
            f"for one text, add a batch dimension ({name}[None])."
        )
    if input_ids.is_floating_point() or input_ids.is_complex() or input_ids.dtype == torch.bool:
        raise ValueError(
            f"{name} must hold integer token ids (torch.long), got dtype {input_ids.dtype}; "
            "pass the ids the tokenizer returned, not embeddings or scores."
        )


def first_token_outside(input_ids: torch.Tensor, vocab_size: int) -> int | None:
    """The first id outside `[0, vocab_size)`, or None (also when checks are off)."""
    if input_ids.numel() == 0 or not checks_enabled():
        return None
    bad = (input_ids < 0) | (input_ids >= vocab_size)
    return int(input_ids[bad][0].item()) if bad.any() else None


def check_token_ids(input_ids: torch.Tensor, vocab_size: int, name: str = "input_ids") -> None:
    """Raise a ValueError naming the first id outside `[0, vocab_size)` instead of an index error inside torch."""
    token_id = first_token_outside(input_ids, vocab_size)
    if token_id is not None:
        raise ValueError(
            f"{name} contains token id {token_id}, outside the vocabulary (vocab_size={vocab_size}); "
            "ids must lie in [0, vocab_size). Check that the tokenizer matches this model."
        )


def check_input_ids(input_ids: torch.Tensor, vocab_size: int, name: str = "input_ids") -> None:
    """Token ids must be a (batch, length) integer tensor of ids inside the vocabulary."""
    check_ids_tensor(input_ids, name)
    check_token_ids(input_ids, vocab_size, name)


def check_inputs_embeds(inputs_embeds: torch.Tensor, hidden_size: int, name: str = "inputs_embeds") -> None:
    """Embeddings given instead of ids must be (batch, length, hidden_size) floats."""
    if inputs_embeds.dim() != 3 or inputs_embeds.shape[-1] != hidden_size:
        raise ValueError(
            f"{name} must have shape (batch_size, sequence_length, hidden_size={hidden_size}), "
            f"got {tuple(inputs_embeds.shape)}."
        )
    if not inputs_embeds.is_floating_point():
        raise ValueError(
            f"{name} must be floating point, got dtype {inputs_embeds.dtype}; pass token ids as input_ids instead."
        )


def check_ids_or_embeds(
    input_ids: torch.Tensor | None, inputs_embeds: torch.Tensor | None, hidden_size: int, side: str | None = None
) -> None:
    """Exactly one of ids or embeddings (of the `side`, source or target, where a model has two), embeddings of the
    right shape (ids are checked against their vocabulary apart)."""
    if (input_ids is None) == (inputs_embeds is None):
        of = f"the {side} " if side else ""
        raise ValueError(f"Pass exactly one of {of}input_ids or inputs_embeds.")
    if inputs_embeds is not None:
        check_inputs_embeds(inputs_embeds, hidden_size)


def check_attention_mask(
    attention_mask: torch.Tensor | None, batch_size: int, length: int, name: str = "attention_mask"
) -> None:
    """A 2D padding mask must be (batch, length) exactly; 4D masks (built by transformers) pass through."""
    if attention_mask is None or isinstance(attention_mask, dict) or not checks_enabled():
        return
    if attention_mask.dim() == 4:
        return
    if attention_mask.dim() != 2 or tuple(attention_mask.shape) != (batch_size, length):
        raise ValueError(
            f"{name} must have the shape (batch_size, sequence_length) = ({batch_size}, {length}), covering the "
            f"cached and the new tokens, got {tuple(attention_mask.shape)}; pass the mask the tokenizer returned "
            "with these ids."
        )


def check_position_ids(position_ids: torch.Tensor, limit: int | None, what: str) -> None:
    """Position ids must be non-negative and, for a learned table of `limit` rows, below `limit`."""
    if position_ids.numel() == 0 or not checks_enabled():
        return
    lowest, highest = int(position_ids.min()), int(position_ids.max())
    if lowest < 0:
        raise ValueError(f"position_ids must be >= 0, got {lowest}.")
    if limit is not None and highest >= limit:
        raise ValueError(
            f"Position {highest} is past this model's max_position_embeddings={limit} ({what}): prompt plus "
            f"generated tokens must fit in {limit} tokens. Shorten the input or lower max_new_tokens."
        )


__all__ = [
    "check_attention_mask",
    "check_ids_or_embeds",
    "check_ids_tensor",
    "check_input_ids",
    "check_inputs_embeds",
    "check_position_ids",
    "check_token_ids",
    "checks_enabled",
    "first_token_outside",
]
