"""The checks `minitf serve` makes of a request before generating, on either engine: the token budget against the
model's context, an empty prompt, sampling numbers in OpenAI's ranges, fields the server would silently ignore.
Each failure is a `RequestError` (HTTP 4xx in OpenAI's shape) naming the field and what is allowed. Imports
nothing of transformers' serving code, so vLLM's front (`serving.vllm`) runs them too."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hf_minitf.serving.errors import RequestError

# transformers' `generate` default for a request without max_tokens (serving.utils.BaseHandler).
SERVER_DEFAULT_NEW_TOKENS = 1024


def positive_int(body: dict, field: str) -> int | None:
    value = body.get(field)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise RequestError(400, f"{field} must be a positive integer, got {value!r}.", param=field)
    return value


def check_new_tokens(
    body: dict, fields: Sequence[str], prompt_length: int, limit: int | None, name: str, prompt_field: str
) -> int | None:
    """Check the request's token budget (the first of `fields` it sets) against the model's context; without one,
    set `max_tokens` to the room left where transformers' default would pass the context. Returns the budget."""
    field = next((field for field in fields if body.get(field) is not None), None)
    requested = positive_int(body, field) if field else None
    if limit is None:
        return requested
    room = limit - prompt_length
    if room < 1:
        raise RequestError(
            400,
            f"The prompt is {prompt_length} tokens; {name!r} reads at most {limit} tokens, which "
            "leaves no room to generate. Shorten the prompt.",
            param=prompt_field,
            code="context_length_exceeded",
        )
    if requested is not None and requested > room:
        raise RequestError(
            400,
            f"{field}={requested} new tokens after the prompt's {prompt_length} pass the context of "
            f"{name!r} ({limit} tokens); ask for at most {room}.",
            param=field,
            code="context_length_exceeded",
        )
    if requested is None:
        body["max_tokens"] = min(room, SERVER_DEFAULT_NEW_TOKENS)
        return body["max_tokens"]
    return requested


# OpenAI's ranges for the numbers a request may set; the bounds are included, except top_p's 0.
SAMPLING_RANGES = {"temperature": (0.0, 2.0), "top_p": (0.0, 1.0), "frequency_penalty": (-2.0, 2.0)}
# Fields of OpenAI's schemas that transformers' server accepts and then ignores, by the value that asks for
# nothing: any other value would be answered as if it had not been sent.
IGNORED_FIELDS = {"n": 1, "best_of": 1, "logprobs": None, "top_logprobs": None, "echo": False, "presence_penalty": 0}
STOP_STRINGS = 4  # OpenAI's limit


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def check_sampling(body: dict) -> None:
    """Refuse sampling fields that are out of OpenAI's ranges, not finite, of the wrong type, or that the server
    would silently ignore, and transformers' free-form `generation_config` (any generate() argument, beam counts
    included). Each error names the field, its value and what is allowed."""
    if body.get("generation_config") is not None:
        raise RequestError(
            400,
            "generation_config is not accepted: set temperature, top_p, frequency_penalty, "
            "max_tokens, stop and seed instead.",
            param="generation_config",
        )
    for field, (low, high) in SAMPLING_RANGES.items():
        value = body.get(field)
        if value is None:
            continue
        if not _is_number(value) or not ((value > low if field == "top_p" else value >= low) and value <= high):
            interval = f"({low:g}, {high:g}]" if field == "top_p" else f"[{low:g}, {high:g}]"
            raise RequestError(400, f"{field} must be a number in {interval}, got {value!r}.", param=field)
    seed = body.get("seed")
    if seed is not None and (not isinstance(seed, int) or isinstance(seed, bool) or not 0 <= seed < 2**64):
        raise RequestError(400, f"seed must be an integer in [0, 2**64), got {seed!r}.", param="seed")
    for field, default in IGNORED_FIELDS.items():
        value = body.get(field)
        if value is not None and value != default and not (default is None and value is False):
            raise RequestError(
                400,
                f"{field}={value!r} is not supported by this server (it answers as if "
                f"{field}={default!r}); leave it out.",
                param=field,
            )
    stop = body.get("stop")
    stops = [stop] if isinstance(stop, str) else stop
    if stop is not None and (
        not isinstance(stops, list)
        or not 1 <= len(stops) <= STOP_STRINGS
        or not all(isinstance(text, str) and text for text in stops)
    ):
        raise RequestError(
            400, f"stop must be a non-empty text or a list of 1 to {STOP_STRINGS} of them, got {stop!r}.", param="stop"
        )


def check_logit_bias(body: dict, vocab_size: int) -> None:
    """`logit_bias` must map token ids of the model's vocabulary to finite biases in [-100, 100] (OpenAI's)."""
    bias = body.get("logit_bias")
    if bias is None:
        return
    if not isinstance(bias, dict):
        raise RequestError(400, f"logit_bias must be an object of token id -> bias, got {bias!r}.", param="logit_bias")
    for key, value in bias.items():
        if not (isinstance(key, str) and key.isdigit() and int(key) < vocab_size):
            raise RequestError(
                400,
                f"logit_bias key {key!r} is not a token id of the model (0 to {vocab_size - 1}).",
                param="logit_bias",
            )
        if not _is_number(value) or not -100 <= value <= 100:
            raise RequestError(
                400, f"logit_bias[{key!r}] must be a number in [-100, 100], got {value!r}.", param="logit_bias"
            )


def text_prompt(body: dict) -> str:
    """The request's `prompt`: one non-empty text (a list of one text is taken as that text)."""
    prompt = body.get("prompt")
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
        prompt = body["prompt"] = prompt[0]
    if not isinstance(prompt, str):
        raise RequestError(400, "prompt must be one text (a string).", param="prompt")
    if not prompt:
        raise RequestError(400, "prompt is empty; give the text to continue (or to translate).", param="prompt")
    return prompt


__all__ = [
    "IGNORED_FIELDS",
    "SAMPLING_RANGES",
    "SERVER_DEFAULT_NEW_TOKENS",
    "check_logit_bias",
    "check_new_tokens",
    "check_sampling",
    "positive_int",
    "text_prompt",
]
