"""How a copy of a model with rounded weights (a GGUF file's, dequantized) agrees with the model: the greedy tokens
each generates after the same prompts, and the perplexity of each on held-out text (`language_modeling`'s windows).

`export gguf` and `export ollama` report it and put it in the card; the exporter hands in the two models (the
MiniTF folder's in float32, and the same with the file's weights, `load_weights`) and the tokenizer, and measures
nothing itself.
"""

from __future__ import annotations

import copy
import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from hf_minitf.evaluation.language_modeling import causal_lm_scorer, perplexity


@dataclass
class GGUFAgreement:
    """How the GGUF file's rounded weights, run in MiniTF (float32), agree with the MiniTF folder: greedy tokens
    after `prompts` prompts (`new_tokens` each), and perplexity on held-out text."""

    prompts: int
    new_tokens: int
    first_differences: list[int | None]
    """Per prompt, the first generated position whose token differs (None: all equal)."""
    perplexity: float
    float32_perplexity: float
    text_tokens: int

    @property
    def equal_prompts(self) -> int:
        return sum(position is None for position in self.first_differences)

    @property
    def equal_tokens(self) -> int:
        """Generated tokens equal before each prompt's first difference, summed over the prompts."""
        return sum(self.new_tokens if position is None else position for position in self.first_differences)

    @property
    def first_difference(self) -> int | None:
        return min((position for position in self.first_differences if position is not None), default=None)

    def summary(self) -> str:
        differs = "" if self.first_difference is None else f"; first difference at token {self.first_difference}"
        return (
            f"greedy tokens equal for {self.equal_prompts} of {self.prompts} prompts x {self.new_tokens} new tokens "
            f"({self.equal_tokens} of {self.prompts * self.new_tokens} before the first difference{differs}); "
            f"perplexity {self.perplexity:.4f} (float32: {self.float32_perplexity:.4f}) on {self.text_tokens} "
            "held-out tokens"
        )


def read_gguf_weights(path: str | os.PathLike) -> dict[str, np.ndarray]:
    """Every tensor of a GGUF file as float32, dequantized by the gguf package, rows first (torch's shape)."""
    from gguf import quants

    from hf_minitf.safety.gguf_files import read_gguf

    arrays = {}
    for tensor in read_gguf(path).tensors:
        shape = tuple(reversed([int(size) for size in tensor.shape]))
        arrays[tensor.name] = quants.dequantize(tensor.data, tensor.tensor_type).astype(np.float32).reshape(shape)
    return arrays


def load_weights(model: Any, weights: dict[str, Any]) -> Any:
    """`model` (a MiniTF GPT in float32) with `weights` (MiniTF names -> tensors) copied into its parameters. A tied
    head is untied when `weights` hold the head apart (a file that stores the embedding and the head each in its own
    type); a weight without a parameter (the zero biases of a model without attention biases) is left out."""
    import torch

    if "lm_head.weight" in weights and model.lm_head.weight is model.model.embed_tokens.weight:
        model.lm_head.weight = torch.nn.Parameter(model.lm_head.weight.detach().clone())
    parameters = dict(model.named_parameters())
    with torch.no_grad():
        for name, tensor in weights.items():
            if name in parameters:
                parameters[name].copy_(tensor.reshape(parameters[name].shape))
    return model


def agreement_prompts(tokenizer, text: str, count: int, length: int) -> list[list[int]]:
    """The first `length` tokens of each of the first `count` lines of `text` that have that many."""
    prompts = []
    for line in text.splitlines():
        ids = tokenizer(line, add_special_tokens=False).input_ids
        if len(ids) >= length:
            prompts.append(ids[:length])
        if len(prompts) == count:
            break
    if not prompts:
        raise ValueError(
            f"the agreement text has no line of {length} tokens or more; give text with one prompt per line."
        )
    return prompts


def greedy_tokens(model: Any, prompts: list[list[int]], new_tokens: int) -> list[list[int]]:
    """Each prompt's greedy continuation (no stop at an end token), the prompts as one batch of equal lengths."""
    import torch

    generation_config = copy.deepcopy(model.generation_config)
    generation_config.eos_token_id = None
    with torch.no_grad():
        output = model.generate(
            torch.tensor(prompts),
            attention_mask=torch.ones(len(prompts), len(prompts[0]), dtype=torch.long),
            generation_config=generation_config,
            max_new_tokens=new_tokens,
            do_sample=False,
            pad_token_id=model.config.pad_token_id or 0,
        )
    return output[:, len(prompts[0]) :].tolist()


def measure_agreement(
    reference: Any, rounded: Any, tokenizer, text: str, prompts: int, prompt_tokens: int, new_tokens: int
) -> GGUFAgreement:
    """How `rounded` agrees with `reference` (see `GGUFAgreement`): prompts are the first `prompt_tokens` tokens of
    the text's first `prompts` lines, each continued greedily by `new_tokens` tokens (fewer where the context ends
    first); the perplexity's held-out text is the whole text, in windows of the context length."""
    from hf_minitf.catalog.exports import context_limit

    prompt_ids = agreement_prompts(tokenizer, text, prompts, prompt_tokens)
    limit = context_limit(reference.config)
    if limit is not None:
        new_tokens = min(new_tokens, limit - prompt_tokens)
    ids = tokenizer(text, add_special_tokens=False, verbose=False).input_ids  # longer than a context: read in pieces
    window = reference.config.max_position_embeddings
    expected = greedy_tokens(reference, prompt_ids, new_tokens)
    generated = greedy_tokens(rounded, prompt_ids, new_tokens)
    first_differences = [
        next((position for position, (a, b) in enumerate(zip(want, got)) if a != b), None)
        for want, got in zip(expected, generated)
    ]
    measured = [perplexity(causal_lm_scorer(model), [ids], None, window, window) for model in (rounded, reference)]
    return GGUFAgreement(
        len(prompt_ids), new_tokens, first_differences, measured[0].perplexity, measured[1].perplexity, len(ids)
    )


__all__ = [
    "GGUFAgreement",
    "agreement_prompts",
    "greedy_tokens",
    "load_weights",
    "measure_agreement",
    "read_gguf_weights",
]
