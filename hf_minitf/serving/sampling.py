"""Sampling as each request asks: its own temperature, top_p and `seed`, whatever runs before or beside it.

transformers' server seeds torch's global generator when it builds a request's config (`set_torch_seed`), not when
the request generates: a request queued behind others, or running beside them (another served model's thread, the
continuous batch), draws from a generator they draw from too, so the same `seed` gives different texts. And its
continuous batch samples every request with the settings of the first one it was started with.

Here a sampled request draws from a generator of its own (`RequestSampler`: a logits processor that samples with
transformers' warpers, then leaves only its choice, which generate's greedy step takes), seeded with the request's
`seed`, else a random one. Such a request has a processor of its own, so it is generated outside the continuous
batch (`stops.GenerationState`), which then holds greedy requests only. With the same seed, a request gives the
tokens `torch.manual_seed(seed); model.generate(do_sample=True, ...)` gives alone.
"""

from __future__ import annotations

import contextvars
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
from hf_minitf.serving.penalties import REQUEST_LOGITS

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


def sample_for_request(config: Any, body: dict) -> RequestSampler | None:
    """For a request whose config samples: its sampler (seeded with its `seed`, else a random one), with the config
    turned greedy so that generate takes the sampler's choice; None for a greedy request."""
    if not config.do_sample:
        return None
    seed = body.get("seed")
    sampler = RequestSampler(config, secrets.randbits(63) if seed is None else seed)
    config.do_sample = False
    for name in ("temperature", "top_k", "top_p", "min_p", "typical_p"):  # read by the sampler, not by generate
        setattr(config, name, None)
    return sampler


# The sampler of the request being handled (on this task), set when its config is built, read where it generates;
# and whether it samples, set by the request checks (the continuous batch is chosen before its config is built).
REQUEST_SAMPLER: contextvars.ContextVar[RequestSampler | None] = contextvars.ContextVar("REQUEST_SAMPLER", default=None)
REQUEST_SAMPLING: contextvars.ContextVar[dict | None] = contextvars.ContextVar("REQUEST_SAMPLING", default=None)


def request_processors() -> LogitsProcessorList | None:
    """The logits processors of the request being handled: its penalties and logit bias, then its sampler (last:
    it leaves one token); None when it has neither."""
    processors = [processor for processor in (REQUEST_LOGITS.get(), REQUEST_SAMPLER.get()) if processor is not None]
    return LogitsProcessorList(processors) if processors else None


__all__ = [
    "REQUEST_SAMPLER",
    "REQUEST_SAMPLING",
    "RequestSampler",
    "asks_to_sample",
    "request_processors",
    "sample_for_request",
]
