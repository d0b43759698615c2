"""The handlers of transformers' server that `minitf serve` answers with: each runs the request checks
(`serving.fields`' table of request fields, `serving.checks`, and the model name, chat messages for a tokenizer
without a chat template) before generating, answering HTTP 4xx instead of a 500 from inside `generate()`, and
samples as asked, with OpenAI's penalties and logit bias (`serving.penalties`)."""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any, Literal

from fastapi.responses import JSONResponse, StreamingResponse
from openai.types import Completion, CompletionChoice, CompletionUsage

from hf_minitf.serving.api import TranscriptionHandler
from hf_minitf.serving.api import chat_completion as _chat_completion
from hf_minitf.serving.api import completion as _completion
from hf_minitf.serving.api import response as _response
from hf_minitf.serving.api import utils as _utils
from hf_minitf.serving.checks import (
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
from hf_minitf.serving.models import ServedModel
from hf_minitf.serving.penalties import REQUEST_LOGITS, openai_logits
from hf_minitf.serving.sampling import (
    REQUEST_SAMPLER,
    REQUEST_SAMPLING,
    asks_to_sample,
    request_processors,
    sample_for_request,
)
from hf_minitf.serving.stops import REQUEST_HAS_STOP, first_stop, stop_list
from hf_minitf.serving.templates import render_ahead

if TYPE_CHECKING:
    from transformers import GenerationConfig

    class _HandlerBase:
        """For the type checker: the method the mixin extends, defined by the transformers handler after it in
        each handler's MRO (at run time the mixin's base is `object`)."""

        def _build_generation_config(
            self, body: dict, model_generation_config: GenerationConfig, use_cb: bool = False
        ) -> GenerationConfig: ...

else:
    _HandlerBase = object


class _SamplingAsAsked(_HandlerBase):
    """What a request asks of decoding holds: `temperature` > 0 (or `top_p` < 1) samples, 0 (or a temperature
    below GREEDY_BELOW_TEMPERATURE) decodes greedily.
    transformers' server sets the temperature but keeps the model's `do_sample` (False for MiniTF folders), so a
    request asking for sampling would silently be answered greedily. Without either field the model's
    generation config decides. The penalties and logit bias transformers' server maps to its own multiplicative
    `repetition_penalty` and `sequence_bias` are the model's again: `serving.penalties` applies OpenAI's. A sampled
    request draws from a generator of its own, seeded with its `seed` (`serving.sampling`)."""

    def _build_generation_config(self, body: dict, model_generation_config, use_cb: bool = False):
        unseeded = {name: value for name, value in body.items() if name != "seed"}  # seeded per request, not globally
        config = super()._build_generation_config(unseeded, model_generation_config, use_cb=use_cb)
        config.repetition_penalty = model_generation_config.repetition_penalty
        config.sequence_bias = model_generation_config.sequence_bias
        config.do_sample = asks_to_sample(body, bool(model_generation_config.do_sample))
        REQUEST_SAMPLER.set(sample_for_request(config, body))
        return config


def _check_request(handler: Any, body: dict, route: str) -> None:
    """The checks of every generation route before the model is looked at: each field is one the route takes, with
    a value this server answers (`serving.fields`; named in a 400, where transformers answers a 422 with a set of
    names or ignores the field), then text, field types and sampling numbers. A field set to null is not set:
    it is dropped (transformers' handlers read `chat_template_kwargs: null` or `parallel_tool_calls: null` as values,
    a 500)."""
    check_fields(body, route)
    for name in [name for name, value in body.items() if value is None]:
        del body[name]
    handler._validate_request(body)
    check_unicode(body)
    check_field_types(body)
    check_sampling(body)
    REQUEST_HAS_STOP.set(body.get("stop") is not None)
    REQUEST_LOGITS.set(None)
    REQUEST_SAMPLING.set({name: body.get(name) for name in ("temperature", "top_p")})
    REQUEST_SAMPLER.set(None)


async def _render_chat(handler: Any, served: ServedModel, messages: list, tools: Any, body: dict, param: str):
    """Render the messages with the model's chat template on a worker thread, within its limits, after refusing
    messages too long to fit its context; a context manager in which transformers' handler (which renders them
    again with the same arguments) gets this result, and which gives the prompt's tokens (`serving.templates`)."""
    check_text_length(
        text_chars(messages), served.context_limit, served.chars_per_token, served.name, param, f"The {param}' text"
    )
    try:
        conversation = handler.get_processor_inputs_from_messages(messages, _utils.Modality.LLM)
    except (KeyError, TypeError, ValueError) as error:  # a part or tool call without a field it needs
        raise RequestError(400, f"The {param} are not OpenAI chat messages: {error!r}", param=param) from error
    options = dict(
        add_generation_prompt=True, tools=tools, return_dict=True, tokenize=True, load_audio_from_video=False
    )
    options.update({**handler.chat_template_kwargs, **(body.get("chat_template_kwargs") or {})})
    return await render_ahead(served.tokenizer, served.name, conversation, options, param)


class ChatCompletions(_SamplingAsAsked, _chat_completion.ChatCompletionHandler):
    """transformers' /v1/chat/completions after the served model's checks: it has a chat template, the messages
    make a prompt (rendered off the event loop, within the template limits), and the token budget fits its context."""

    async def handle_request(self, body: dict, request_id: str):
        _check_request(self, body, CHAT)
        served = self.model_manager.find_for(body, ("gpt",), CHAT)
        check_logit_bias(body, served.config.vocab_size)
        check_chat_template(served.tokenizer, served.name, CHAT)
        check_tools(body, served.tokenizer.chat_template, served.name)
        check_messages(body.get("messages"))
        REQUEST_LOGITS.set(openai_logits(body))
        with await _render_chat(self, served, body["messages"], body.get("tools"), body, "messages") as prompt:
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
    """transformers' /v1/responses for the served GPTs that have a chat template; one JSON answer unless the request
    asks for a stream (OpenAI's default; transformers' server streams by default)."""

    async def handle_request(self, body: dict, request_id: str):
        _check_request(self, body, RESPONSES)
        body["stream"] = bool(body.get("stream"))
        served = self.model_manager.find_for(body, ("gpt",), RESPONSES)
        check_chat_template(served.tokenizer, served.name, RESPONSES)
        check_tools(body, served.tokenizer.chat_template, served.name)
        positive_int(body, "max_output_tokens")
        text = body.get("input")
        if not (isinstance(text, str) and text) and not (
            isinstance(text, list) and text and all(isinstance(item, dict) for item in text)
        ):
            raise RequestError(400, "input must be a non-empty text or a list of input items (objects).", param="input")
        try:
            messages = self._normalize_input(body)
            check_messages(messages, "input")
        except (KeyError, TypeError, ValueError) as error:
            raise RequestError(
                400, f"input is not a list of Responses input items: {error!r}", param="input"
            ) from error
        tools = self._normalize_tools(body.get("tools"))
        with await _render_chat(self, served, messages, tools, body, "input") as prompt:
            check_new_tokens(
                body, ("max_output_tokens",), len(prompt["input_ids"]), served.context_limit, served.name, "input"
            )
            return await super().handle_request(body, request_id)


class Completions(_SamplingAsAsked, _completion.CompletionHandler):
    """transformers' /v1/completions after the served model's checks; for a translation model the prompt is the
    source text and the completion its translation."""

    async def handle_request(self, body: dict, request_id: str):
        _check_request(self, body, COMPLETIONS)
        served = self.model_manager.find_for(body, ("gpt", "seq2seq"), COMPLETIONS)
        check_logit_bias(body, served.config.vocab_size)
        REQUEST_LOGITS.set(openai_logits(body))
        prompt = text_prompt(body)
        if served.family == "seq2seq":
            return await self._translate(body, request_id, served, prompt)
        check_text_length(
            len(prompt), served.context_limit, served.chars_per_token, served.name, "prompt", "The prompt"
        )
        prompt_length = len((await asyncio.to_thread(served.tokenizer, prompt))["input_ids"])
        check_new_tokens(body, ("max_tokens",), prompt_length, served.context_limit, served.name, "prompt")
        return await super().handle_request(body, request_id)

    async def _translate(self, body: dict, request_id: str, served: ServedModel, prompt: str):
        """Translate the prompt with `generate()` on the model's inference thread (as transformers runs a GPT's)."""
        model, tokenizer = served.model, served.tokenizer
        limit = model.config.max_position_embeddings
        check_text_length(len(prompt), limit, served.chars_per_token, served.name, "prompt", "The text to translate")
        inputs = (await asyncio.to_thread(tokenizer, prompt, return_tensors="pt")).to(model.device)
        length = inputs["input_ids"].shape[1]
        if length > limit:
            raise RequestError(
                400,
                f"The text to translate is {length} tokens; {served.name!r} reads at most {limit}. Split it.",
                param="prompt",
                code="context_length_exceeded",
            )
        room = limit - 1  # the decoder's positions, its start token included
        requested = positive_int(body, "max_tokens")
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
        processors = request_processors()
        if processors is not None:
            inputs["logits_processor"] = processors
        sequences = await manager.async_submit(model.generate, **inputs, generation_config=config, tokenizer=tokenizer)
        generated = sequences[0, 1:].tolist()  # after the decoder start token
        eos = model.generation_config.eos_token_id
        stopped = eos in generated
        generated = generated[: generated.index(eos) + 1] if stopped else generated
        text = await asyncio.to_thread(tokenizer.decode, generated, skip_special_tokens=True)
        cut = first_stop(text, stop_list(body.get("stop")))
        if cut is not None:
            text, stopped = text[:cut], True
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


class Transcriptions(TranscriptionHandler):
    """/v1/audio/transcriptions: no MiniTF family reads audio, so the route refuses every request (transformers'
    handler would first parse the upload, a 500 where python-multipart is not installed)."""

    async def handle_request(self, request: Any, *args: Any, **kwargs: Any):
        raise RequestError(
            400,
            "No model served here transcribes audio: minitf serve serves text models (GPTs, encoders, translation "
            "models). Send text to /v1/completions, /v1/chat/completions or /v1/embeddings.",
            param="model",
        )
