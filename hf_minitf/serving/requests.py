"""What `minitf serve` checks in a request before generating (the model name, `max_tokens` against the context, an
empty prompt, chat messages for a tokenizer without a chat template, sampling numbers in OpenAI's ranges, fields
the server would silently ignore), answered with HTTP 4xx instead of a 500 from inside `generate()`; and the
handlers of transformers' server that run those checks and sample as asked."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any, Literal

import jinja2
from fastapi.responses import JSONResponse, StreamingResponse
from openai.types import Completion, CompletionChoice, CompletionUsage

from hf_minitf.catalog.limits import GREEDY_BELOW_TEMPERATURE
from hf_minitf.serving.api import chat_completion as _chat_completion
from hf_minitf.serving.api import completion as _completion
from hf_minitf.serving.api import response as _response
from hf_minitf.serving.api import utils as _utils
from hf_minitf.serving.errors import RequestError
from hf_minitf.serving.models import ServedModel

# transformers' `generate` default for a request without max_tokens (serving.utils.BaseHandler).
SERVER_DEFAULT_NEW_TOKENS = 1024


def _positive_int(body: dict, field: str) -> int | None:
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
    requested = _positive_int(body, field) if field else None
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


class _SamplingAsAsked:
    """What a request asks of decoding holds: `temperature` > 0 (or `top_p` < 1) samples, 0 (or a temperature
    below GREEDY_BELOW_TEMPERATURE) decodes greedily.
    transformers' server sets the temperature but keeps the model's `do_sample` (False for MiniTF folders), so a
    request asking for sampling would silently be answered greedily. Without either field the model's
    generation config decides."""

    def _build_generation_config(self, body: dict, model_generation_config, use_cb: bool = False):
        config = super()._build_generation_config(body, model_generation_config, use_cb=use_cb)  # type: ignore[misc]  # a mixin before transformers' handler
        temperature, top_p = body.get("temperature"), body.get("top_p")
        if temperature is not None:
            config.do_sample = temperature >= GREEDY_BELOW_TEMPERATURE
        elif top_p is not None and top_p < 1:
            config.do_sample = True
        return config


def _text_prompt(body: dict) -> str:
    prompt = body.get("prompt")
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
        prompt = body["prompt"] = prompt[0]
    if not isinstance(prompt, str):
        raise RequestError(400, "prompt must be one text (a string).", param="prompt")
    if not prompt:
        raise RequestError(400, "prompt is empty; give the text to continue (or to translate).", param="prompt")
    return prompt


def _check_chat_template(served: ServedModel, route: str) -> None:
    if getattr(served.tokenizer, "chat_template", None) is None:
        raise RequestError(
            400,
            f"{served.name!r} has no chat template (its tokenizer defines no chat format), so "
            f"{route} cannot turn messages into a prompt. Send the text to continue to POST "
            "/v1/completions instead.",
            param="messages",
            code="no_chat_template",
        )


class ChatCompletions(_SamplingAsAsked, _chat_completion.ChatCompletionHandler):
    """transformers' /v1/chat/completions after the served model's checks: it has a chat template, the messages
    make a prompt, and the token budget fits its context."""

    async def handle_request(self, body: dict, request_id: str):
        self._validate_request(body)
        check_sampling(body)
        served = self.model_manager.find_for(body, ("gpt",), "/v1/chat/completions")
        check_logit_bias(body, served.config.vocab_size)
        _check_chat_template(served, "/v1/chat/completions")
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages or not all(isinstance(m, dict) for m in messages):
            raise RequestError(400, "messages must be a non-empty list of {role, content} objects.", param="messages")
        try:
            prompt = served.tokenizer.apply_chat_template(
                self.get_processor_inputs_from_messages(messages, _utils.Modality.LLM),
                add_generation_prompt=True,
                tokenize=True,
                return_dict=True,
                **{**self.chat_template_kwargs, **body.get("chat_template_kwargs", {})},
            )
        except (KeyError, TypeError, ValueError, jinja2.TemplateError) as error:
            raise RequestError(
                400, f"The messages do not fit {served.name!r}'s chat template: {error}", param="messages"
            ) from error
        check_new_tokens(
            body,
            ("max_completion_tokens", "max_tokens"),
            len(prompt["input_ids"]),
            served.context_limit,
            served.name,
            "messages",
        )
        return await super().handle_request(body, request_id)


class Responses(_SamplingAsAsked, _response.ResponseHandler):
    """transformers' /v1/responses for the served GPTs that have a chat template."""

    async def handle_request(self, body: dict, request_id: str):
        self._validate_request(body)
        check_sampling(body)
        served = self.model_manager.find_for(body, ("gpt",), "/v1/responses")
        _check_chat_template(served, "/v1/responses")
        _positive_int(body, "max_output_tokens")
        return await super().handle_request(body, request_id)


class Completions(_SamplingAsAsked, _completion.CompletionHandler):
    """transformers' /v1/completions after the served model's checks; for a translation model the prompt is the
    source text and the completion its translation."""

    async def handle_request(self, body: dict, request_id: str):
        self._validate_request(body)
        check_sampling(body)
        if body.get("logit_bias"):
            raise RequestError(
                400,
                "logit_bias is not supported on /v1/completions (it would be ignored); use "
                "/v1/chat/completions or leave it out.",
                param="logit_bias",
            )
        served = self.model_manager.find_for(body, ("gpt", "seq2seq"), "/v1/completions")
        prompt = _text_prompt(body)
        if served.family == "seq2seq":
            return await self._translate(body, request_id, served, prompt)
        prompt_length = len(served.tokenizer(prompt)["input_ids"])
        check_new_tokens(body, ("max_tokens",), prompt_length, served.context_limit, served.name, "prompt")
        return await super().handle_request(body, request_id)

    async def _translate(self, body: dict, request_id: str, served: ServedModel, prompt: str):
        """Translate the prompt with `generate()` on the model's inference thread (as transformers runs a GPT's)."""
        model, tokenizer = served.model, served.tokenizer
        inputs = tokenizer(prompt, return_tensors="pt").to(model.device)
        length, limit = inputs["input_ids"].shape[1], model.config.max_position_embeddings
        if length > limit:
            raise RequestError(
                400,
                f"The text to translate is {length} tokens; {served.name!r} reads at most {limit}. Split it.",
                param="prompt",
                code="context_length_exceeded",
            )
        room = limit - 1  # the decoder's positions, its start token included
        requested = _positive_int(body, "max_tokens")
        if requested is not None and requested > room:
            raise RequestError(
                400,
                f"max_tokens={requested} passes {served.name!r}'s {limit} decoder positions; ask "
                f"for at most {room} tokens.",
                param="max_tokens",
                code="context_length_exceeded",
            )
        config = self._build_generation_config(body, model.generation_config)
        config.max_new_tokens = requested or room
        manager = self.generation_state.get_manager(served.key)
        sequences = await manager.async_submit(model.generate, **inputs, generation_config=config, tokenizer=tokenizer)
        generated = sequences[0, 1:].tolist()  # after the decoder start token
        eos = model.generation_config.eos_token_id
        stopped = eos in generated
        generated = generated[: generated.index(eos) + 1] if stopped else generated
        text = tokenizer.decode(generated, skip_special_tokens=True)
        usage = CompletionUsage(
            prompt_tokens=length, completion_tokens=len(generated), total_tokens=length + len(generated)
        )
        finish_reason: Literal["stop", "length"] = "stop" if stopped else "length"
        if body.get("stream"):

            async def chunks():
                yield self._build_chunk_sse(request_id, served.name, text=text)
                yield self._build_chunk_sse(request_id, served.name, finish_reason=finish_reason, usage=usage)

            return StreamingResponse(chunks(), media_type="text/event-stream")
        completion = Completion(
            id=request_id,
            created=int(time.time()),
            model=served.name,
            object="text_completion",
            usage=usage,
            choices=[CompletionChoice(text=text, index=0, logprobs=None, finish_reason=finish_reason)],
        )
        return JSONResponse(completion.model_dump(exclude_none=True))
