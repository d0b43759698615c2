"""OpenAI's `frequency_penalty`, `presence_penalty` and `logit_bias` on the default engine: additive on the logits,
as OpenAI defines them, over the tokens generated so far (the prompt does not count):

    logits[t] -= frequency_penalty * count(t) + presence_penalty * (count(t) > 0);  logits[t] += logit_bias[t]

(transformers' own `repetition_penalty` is multiplicative and counts the prompt: another thing.) A request with
this processor is generated alone, never in a shared batch (`serving.generation`)."""

from __future__ import annotations

from typing import cast

import torch
from transformers import LogitsProcessor


class OpenAILogits(LogitsProcessor):
    """A request's penalties and logit bias. One generation each: its first call sees the prompt (or a decoder's
    start token), whose length it keeps, so that only the tokens after it count."""

    def __init__(self, frequency: float = 0.0, presence: float = 0.0, bias: dict[int, float] | None = None) -> None:
        self.frequency, self.presence, self.bias = frequency, presence, dict(bias or {})
        self.start: int | None = None

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        if self.start is None:
            self.start = input_ids.shape[1]
        generated = input_ids[:, self.start :]
        adjusted: torch.Tensor = scores
        if generated.shape[1] and (self.frequency or self.presence):
            ones = torch.ones_like(generated, dtype=scores.dtype)
            counts = torch.zeros_like(scores).scatter_add_(1, generated, ones)
            adjusted = adjusted - self.frequency * counts - self.presence * (counts > 0).to(scores.dtype)
        if self.bias:
            ids = torch.tensor(list(self.bias), device=scores.device)
            values = torch.tensor(list(self.bias.values()), dtype=scores.dtype, device=scores.device)
            adjusted = adjusted.index_add(1, ids, values.expand(scores.shape[0], -1))
        return cast(torch.FloatTensor, adjusted)


def openai_logits(body: dict) -> OpenAILogits | None:
    """The processor a request asks for (its fields checked by `serving.checks`), or None where it asks for none."""
    frequency = float(body.get("frequency_penalty") or 0)
    presence = float(body.get("presence_penalty") or 0)
    bias = {int(key): float(value) for key, value in (body.get("logit_bias") or {}).items()}
    if not (frequency or presence or bias):
        return None
    return OpenAILogits(frequency, presence, bias)


__all__ = ["OpenAILogits", "openai_logits"]
