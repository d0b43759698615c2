"""The handlers of transformers' server that `minitf serve` answers with: each runs the request checks
(`serving.checks`, and the model name, chat messages for a tokenizer without a chat template) before generating,
answering HTTP 4xx instead of a 500 from inside `generate()`, and samples as asked."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Literal

import jinja2
from fastapi.responses import JSONResponse, StreamingResponse
from openai.types import Completion, CompletionChoice, CompletionUsage

from hf_minitf.catalog.limits import GREEDY_BELOW_TEMPERATURE
from hf_minitf.serving.api import chat_completion as _chat_completion
from hf_minitf.serving.api import completion as _completion
from hf_minitf.serving.api import response as _response
from hf_minitf.serving.api import utils as _utils
from hf_minitf.serving.checks import (
    check_logit_bias,
    check_new_tokens,
    check_sampling,
    positive_int,
    text_prompt,
)
from hf_minitf.serving.errors import RequestError
from hf_minitf.serving.models import ServedModel

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
    generation config decides."""

    def _build_generation_config(self, body: dict, model_generation_config, use_cb: bool = False):
        config = super()._build_generation_config(body, model_generation_config, use_cb=use_cb)
        temperature, top_p = body.get("temperature"), body.get("top_p")
        if temperature is not None:
            config.do_sample = temperature >= GREEDY_BELOW_TEMPERATURE
        elif top_p is not None and top_p < 1:
            config.do_sample = True
        return config


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
        positive_int(body, "max_output_tokens")
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
        prompt = text_prompt(body)
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
