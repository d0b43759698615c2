"""A generation request of `minitf serve`, parsed once from its JSON body into a `GenerationRequest`: the model it
names, the prompt's token ids (a chat rendered by the model's chat template), the token budget within the model's
context, and how to decode. Every check runs here, before anything generates (the request fields by
`serving.fields`' table, the rest by `serving.checks`), each failure an HTTP 4xx naming the field;
`GenerationRequest.generation_arguments()` then gives what `generate()` takes for it, passed down explicitly."""

from __future__ import annotations

import asyncio
import copy
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from hf_minitf.safety.model_inputs import first_outside
from hf_minitf.serving.checks import (
    SERVER_DEFAULT_NEW_TOKENS,
    check_chat_template,
    check_field_types,
    check_logit_bias,
    check_messages,
    check_new_tokens,
    check_sampling,
    check_text_length,
    check_tools,
    check_unicode,
    positive_int,
    text_chars,
    text_prompt,
)
from hf_minitf.serving.errors import RequestError
from hf_minitf.serving.fields import CHAT, COMPLETIONS, RESPONSES, check_fields
from hf_minitf.serving.models import ServedModel, ServedModels
from hf_minitf.serving.penalties import openai_logits
from hf_minitf.serving.sampling import asks_to_sample, sample_for_request
from hf_minitf.serving.stops import stop_list
from hf_minitf.serving.templates import render_chat, template_messages

# What the engine of an export folder cannot do per request (it decodes greedily, or samples with a temperature):
# each field, and whether its value asks for it.
ENGINE_REFUSES: dict[str, Callable[[Any], bool]] = {
    "top_p": lambda value: value < 1,
    "frequency_penalty": bool,
    "presence_penalty": bool,
    "logit_bias": bool,
}


@dataclass
class GenerationRequest:
    """One generation: what to continue (`prompt_ids`: a GPT's prompt, a translator's source), how far, and how to
    decode, as a completions, chat or responses request asked it."""

    served: ServedModel
    route: str
    prompt_ids: list[int]
    max_new_tokens: int
    stream: bool = False
    stops: list[str] = field(default_factory=list)
    temperature: float | None = None
    top_p: float | None = None
    seed: int | None = None
    frequency_penalty: float = 0.0
    presence_penalty: float = 0.0
    logit_bias: dict[str, float] = field(default_factory=dict)
    id: str = field(default_factory=lambda: uuid.uuid4().hex)

    @property
    def samples(self) -> bool:
        """Whether it samples (`serving.sampling.asks_to_sample`: the request's fields, else the model's config)."""
        model_samples = self.served.engine == "transformers" and bool(self.served.model.generation_config.do_sample)
        return asks_to_sample({"temperature": self.temperature, "top_p": self.top_p}, model_samples)

    @property
    def adjusts_logits(self) -> bool:
        return bool(self.frequency_penalty or self.presence_penalty or self.logit_bias)

    @property
    def shareable(self) -> bool:
        """Whether it may share a batch with other requests: greedy, with no processor or stop of its own."""
        return not (self.stops or self.adjusts_logits or self.samples)

    def generation_arguments(self) -> dict[str, Any]:
        """The arguments of transformers' `generate()` for this request: its generation config (the model's, with
        the request's budget and sampling), its logits processors (OpenAI's penalties and logit bias, then a sampler
        with a generator of its own, seeded with `seed`) and its stopping criteria (the stop strings). Fresh
        processors each call: they keep state over one generation."""
        from transformers import LogitsProcessorList, StoppingCriteriaList

        from hf_minitf.modeling.layers import DecodedStopStringCriteria

        config = copy.deepcopy(self.served.model.generation_config)
        config.max_new_tokens = self.max_new_tokens
        config.do_sample = self.samples
        if config.do_sample:
            config.temperature = self.temperature if self.temperature is not None else config.temperature
            config.top_p = self.top_p if self.top_p is not None else config.top_p
        sampler = sample_for_request(config, self.seed)
        penalties = openai_logits(
            {
                "frequency_penalty": self.frequency_penalty,
                "presence_penalty": self.presence_penalty,
                "logit_bias": self.logit_bias,
            }
        )
        processors = [processor for processor in (penalties, sampler) if processor is not None]
        criteria = [DecodedStopStringCriteria(self.stops, self.served.tokenizer)] if self.stops else []
        return {
            "generation_config": config,
            "logits_processor": LogitsProcessorList(processors),
            "stopping_criteria": StoppingCriteriaList(criteria),
        }

    def engine_arguments(self) -> dict[str, Any]:
        """The arguments of an export engine's `generate()` (greedy, or sampling with a temperature and a seed)."""
        if not self.samples:
            return {"sample": False}
        temperature = 1.0 if self.temperature is None else self.temperature
        return {"sample": True, "temperature": temperature, "seed": 0 if self.seed is None else self.seed}


def check_body(body: dict, route: str) -> None:
    """The checks of every generation route before the model is looked at: each field is one the route takes, with
    a value this server answers (`serving.fields`); a field set to null is not set (it is dropped); then text, field
    types and sampling numbers."""
    check_fields(body, route)
    for name in [name for name, value in body.items() if value is None]:
        del body[name]
    check_unicode(body)
    check_field_types(body)
    check_sampling(body)


def _generation_request(
    body: dict, served: ServedModel, route: str, prompt_ids: list[int], max_new_tokens: int
) -> GenerationRequest:
    if served.engine != "transformers":
        asked = next(
            (name for name, asks in ENGINE_REFUSES.items() if body.get(name) is not None and asks(body[name])), None
        )
        if asked is not None:
            raise RequestError(
                400,
                f"{asked} is not supported by the {served.engine} engine that runs {served.name!r} (it decodes "
                "greedily or samples with a temperature); leave it out, or serve the MiniTF folder it was exported from.",
                param=asked,
            )
    else:
        _check_prompt_ids(served, prompt_ids)
    return GenerationRequest(
        served=served,
        route=route,
        prompt_ids=prompt_ids,
        max_new_tokens=max_new_tokens,
        stream=bool(body.get("stream")),
        stops=stop_list(body.get("stop")),
        temperature=body.get("temperature"),
        top_p=body.get("top_p"),
        seed=body.get("seed"),
        frequency_penalty=float(body.get("frequency_penalty") or 0),
        presence_penalty=float(body.get("presence_penalty") or 0),
        logit_bias=dict(body.get("logit_bias") or {}),
    )


def _check_prompt_ids(served: ServedModel, prompt_ids: list[int]) -> None:
    """Ids the served tokenizer gives but the model's embedding table lacks (a folder whose tokenizer does not match
    its model): refused here, since the model's forward pass reads no id (on a GPU it would be a device-side assert)."""
    config = served.config
    size = getattr(config, "src_vocab_size", None) or getattr(config, "vocab_size", None)
    token_id = first_outside(prompt_ids, size) if size else None
    if token_id is not None:
        raise RequestError(
            500,
            f"{served.name!r}'s tokenizer gave token id {token_id}, outside its model's vocabulary (vocab_size={size}): "
            "the folder's tokenizer does not match its model. Serve a folder whose tokenizer was saved with the model.",
        )


async def completion_request(body: dict, models: ServedModels) -> GenerationRequest:
    """`POST /v1/completions`: a GPT continues the prompt; a translator translates it."""
    check_body(body, COMPLETIONS)
    served = models.find_for(body, ("gpt", "seq2seq"), COMPLETIONS)
    check_logit_bias(body, served.vocab_size)
    prompt = text_prompt(body)
    if served.family == "seq2seq":
        return await _translation_request(body, served, prompt)
    limit = served.context_limit
    check_text_length(len(prompt), limit, served.chars_per_token, served.name, "prompt", "The prompt")
    ids = (await asyncio.to_thread(served.tokenizer, prompt))["input_ids"]
    if not ids:
        raise RequestError(400, f"None of the prompt's characters are in {served.name!r}'s vocabulary.", param="prompt")
    budget = check_new_tokens(body, ("max_tokens",), len(ids), limit, served.name, "prompt")
    return _generation_request(body, served, COMPLETIONS, ids, budget or SERVER_DEFAULT_NEW_TOKENS)


async def _translation_request(body: dict, served: ServedModel, prompt: str) -> GenerationRequest:
    """A translator's completion: the source within its positions, the budget within the decoder's."""
    limit = served.context_limit
    check_text_length(len(prompt), limit, served.chars_per_token, served.name, "prompt", "The text to translate")
    ids = (await asyncio.to_thread(served.tokenizer, prompt))["input_ids"]
    if limit is not None and len(ids) > limit:
        raise RequestError(
            400,
            f"The text to translate is {len(ids)} tokens; {served.name!r} reads at most {limit}. Split it.",
            param="prompt",
            code="context_length_exceeded",
        )
    room = (limit or SERVER_DEFAULT_NEW_TOKENS + 1) - 1  # the decoder's positions, its start token included
    requested = positive_int(body, "max_tokens")
    if requested is not None and requested > room:
        raise RequestError(
            400,
            f"max_tokens={requested} passes {served.name!r}'s {limit} decoder positions; ask for at most {room} tokens.",
            param="max_tokens",
            code="context_length_exceeded",
        )
    return _generation_request(body, served, COMPLETIONS, ids, requested or room)


async def chat_request(body: dict, models: ServedModels) -> GenerationRequest:
    """`POST /v1/chat/completions`: the messages rendered by the GPT's chat template."""
    check_body(body, CHAT)
    served = models.find_for(body, ("gpt",), CHAT)
    check_logit_bias(body, served.vocab_size)
    check_chat_template(served.tokenizer, served.name, CHAT)
    check_tools(body, served.tokenizer.chat_template, served.name)
    check_messages(body.get("messages"))
    ids = await _rendered(served, body["messages"], body.get("tools"), body, "messages")
    budget = check_new_tokens(
        body, ("max_completion_tokens", "max_tokens"), len(ids), served.context_limit, served.name, "messages"
    )
    return _generation_request(body, served, CHAT, ids, budget or SERVER_DEFAULT_NEW_TOKENS)


async def responses_request(body: dict, models: ServedModels) -> GenerationRequest:
    """`POST /v1/responses`: the input items (and instructions) rendered by the GPT's chat template."""
    check_body(body, RESPONSES)
    served = models.find_for(body, ("gpt",), RESPONSES)
    check_chat_template(served.tokenizer, served.name, RESPONSES)
    check_tools(body, served.tokenizer.chat_template, served.name)
    positive_int(body, "max_output_tokens")
    messages = response_messages(body)
    check_messages(messages, "input")
    tools = [
        tool if "function" in tool else {"type": "function", "function": _without_type(tool)}
        for tool in body.get("tools") or []
    ]
    ids = await _rendered(served, messages, tools or None, body, "input")
    budget = check_new_tokens(body, ("max_output_tokens",), len(ids), served.context_limit, served.name, "input")
    return _generation_request(body, served, RESPONSES, ids, budget or SERVER_DEFAULT_NEW_TOKENS)


def _without_type(tool: dict) -> dict:
    return {key: value for key, value in tool.items() if key != "type"}


async def _rendered(served: ServedModel, messages: list, tools: Any, body: dict, param: str) -> list[int]:
    """The prompt's ids: OpenAI's messages as the chat template reads them, rendered off the event loop within the
    template limits, after refusing messages too long to fit the context."""
    check_text_length(
        text_chars(messages), served.context_limit, served.chars_per_token, served.name, param, f"The {param}' text"
    )
    try:
        conversation = template_messages(messages)
    except (KeyError, TypeError, ValueError) as error:  # a part or tool call without a field it needs
        raise RequestError(400, f"The {param} are not OpenAI chat messages: {error!r}", param=param) from error
    variables = body.get("chat_template_kwargs") or {}
    return await render_chat(served.tokenizer, served.name, conversation, tools, variables, param)


def response_messages(body: dict) -> list[dict]:
    """The Responses API's `input` (a text, a list of content parts, or a list of items: messages, function calls
    and their outputs) and `instructions` as chat messages."""
    given = body.get("input")
    if not (isinstance(given, str) and given) and not (
        isinstance(given, list) and given and all(isinstance(item, dict) for item in given)
    ):
        raise RequestError(400, "input must be a non-empty text or a list of input items (objects).", param="input")
    messages: list[dict[str, Any]]
    try:
        if isinstance(given, str):
            messages = [{"role": "user", "content": given}]
        elif "role" not in given[0] and given[0].get("type") not in (
            "message",
            "function_call",
            "function_call_output",
        ):
            messages = [{"role": "user", "content": given}]  # the content parts of one user message
        else:
            messages = [_response_item(item) for item in given]
    except (KeyError, TypeError, ValueError) as error:
        raise RequestError(400, f"input is not a list of Responses input items: {error!r}", param="input") from error
    instructions = body.get("instructions")
    if instructions:
        messages.insert(0, {"role": "system", "content": instructions})
    return messages


def _response_item(item: dict) -> dict:
    kind = item.get("type")
    if "role" in item:
        return {"role": item["role"], "content": item.get("content", "")}
    if kind == "function_call":
        call = {"id": item["call_id"], "function": {"name": item["name"], "arguments": item["arguments"]}}
        return {"role": "assistant", "content": None, "tool_calls": [call]}
    if kind == "function_call_output":
        return {"role": "tool", "tool_call_id": item["call_id"], "content": item["output"]}
    raise ValueError(f"unsupported input item type {kind!r}: send messages, function_call or function_call_output")


__all__ = [
    "GenerationRequest",
    "chat_request",
    "check_body",
    "completion_request",
    "response_messages",
    "responses_request",
]
