"""Sampling as each request asks: its own temperature, top_p and `seed`, whatever runs before or beside it.

Seeding torch's global generator would not do: a request queued behind others, or running beside them (another
served model's thread), draws from a generator they draw from too, so the same `seed` would give different texts.

Here a sampled request draws from a generator of its own (`RequestSampler`: a logits processor that samples with
transformers' warpers, then leaves only its choice, which generate's greedy step takes), seeded with the request's
`seed`, else a random one. Such a request has a processor of its own, so it is generated alone, never in a shared
batch (`serving.generation`). With the same seed, a request gives the tokens
`torch.manual_seed(seed); model.generate(do_sample=True, ...)` gives alone.
"""

from __future__ import annotations

import secrets
from typing import Any, cast

import torch
from transformers import (
    LogitsProcessor,
    LogitsProcessorList,
    MinPLogitsWarper,
    TemperatureLogitsWarper,
    TopKLogitsWarper,
    TopPLogitsWarper,
    TypicalLogitsWarper,
)

from hf_minitf.catalog.limits import GREEDY_BELOW_TEMPERATURE

# transformers' values for the sampling fields a generation config leaves unset (GenerationConfig's global defaults).
SAMPLING_DEFAULTS = {"temperature": 1.0, "top_k": 50, "top_p": 1.0}


def asks_to_sample(body: dict | None, model_samples: bool) -> bool:
    """Whether a request samples: `temperature` > 0 (at least GREEDY_BELOW_TEMPERATURE) or `top_p` < 1 do, a lower
    temperature decodes greedily; without either field the model's generation config decides (`model_samples`)."""
    temperature, top_p = (body or {}).get("temperature"), (body or {}).get("top_p")
    if temperature is not None:
        return temperature >= GREEDY_BELOW_TEMPERATURE
    if top_p is not None and top_p < 1:
        return True
    return model_samples


class RequestSampler(LogitsProcessor):
    """Samples the next token with transformers' warpers of a generation config and a generator of this request's
    own, and leaves only that token (every other score -inf), so that greedy decoding takes it."""

    def __init__(self, config: Any, seed: int) -> None:
        def value(name: str) -> Any:
            found = getattr(config, name, None)
            return SAMPLING_DEFAULTS.get(name) if found is None else found

        temperature, top_k, top_p = value("temperature"), value("top_k"), value("top_p")
        min_p, typical_p = value("min_p"), value("typical_p")
        warpers: list[LogitsProcessor] = []  # in transformers' order (`GenerationMixin._get_logits_processor`)
        if temperature != 1.0:
            warpers.append(TemperatureLogitsWarper(temperature))
        if top_k:
            warpers.append(TopKLogitsWarper(top_k))
        if top_p < 1.0:
            warpers.append(TopPLogitsWarper(top_p))
        if min_p is not None:
            warpers.append(MinPLogitsWarper(min_p))
        if typical_p is not None and typical_p < 1.0:
            warpers.append(TypicalLogitsWarper(typical_p))
        self.warpers = LogitsProcessorList(warpers)
        self.seed = seed
        self.generator: torch.Generator | None = None  # made on the scores' device at the first step

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        if self.generator is None:
            self.generator = torch.Generator(device=scores.device).manual_seed(self.seed)
        probabilities = torch.softmax(self.warpers(input_ids, scores), dim=-1)
        chosen = torch.multinomial(probabilities, num_samples=1, generator=self.generator)
        only = torch.full_like(scores, float("-inf")).scatter_(1, chosen, 0.0)
        return cast(torch.FloatTensor, only)


def sample_for_request(config: Any, seed: int | None) -> RequestSampler | None:
    """For a request whose config samples: its sampler (seeded with `seed`, else a random one), with the config
    turned greedy so that generate takes the sampler's choice; None for a greedy request."""
    if not config.do_sample:
        return None
    sampler = RequestSampler(config, secrets.randbits(63) if seed is None else seed)
    config.do_sample = False
    for name in ("temperature", "top_k", "top_p", "min_p", "typical_p"):  # read by the sampler, not by generate
        setattr(config, name, None)
    return sampler


__all__ = [
    "RequestSampler",
    "asks_to_sample",
    "sample_for_request",
]
