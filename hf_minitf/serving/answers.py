"""The answers of `minitf serve`'s generation routes in OpenAI's shapes: one JSON object, or server-sent events as
the text comes (`answer`). The text is `TextAssembler`'s (decoded as the tokens come, cut before a stop string);
`finish_reason` is "stop" where a stop string or the end token ended it, "length" where the budget did; a stream's
last chunk (or `response.completed` event) carries the usage."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from fastapi.responses import JSONResponse, StreamingResponse

from hf_minitf.serving.errors import error_body
from hf_minitf.serving.fields import CHAT, COMPLETIONS
from hf_minitf.serving.generation import Generation
from hf_minitf.serving.requests import GenerationRequest
from hf_minitf.serving.stops import TextAssembler


@dataclass
class Outcome:
    """What a finished generation came to: its text, tokens and why it ended."""

    text: str
    completion_tokens: int
    finish_reason: str


async def _pieces(generation: Generation, assembler: TextAssembler, end_ids: set[int]) -> AsyncIterator[str]:
    """The text of a generation as it settles; the assembler knows the rest once this ends."""
    async for ids in generation.tokens():
        text = assembler.add(ids)
        if text:
            yield text
        if assembler.stopped or any(token in end_ids for token in ids):
            generation.cancel()  # a stop string ended the text: no more tokens are needed
    rest = assembler.finish()
    if rest:
        yield rest


def _finish_reason(request: GenerationRequest, assembler: TextAssembler, ended: bool) -> str:
    if assembler.stopped or ended:
        return "stop"
    return "length" if assembler.tokens >= request.max_new_tokens else "stop"


def _end_ids(request: GenerationRequest) -> set[int]:
    served = request.served
    if served.engine == "transformers":
        end = served.model.generation_config.eos_token_id
    else:
        end = sorted(getattr(served.model, "end_ids", ()) or ())
    return set() if end is None else {end} if isinstance(end, int) else set(end)


class _Run:
    """One generation read through to its outcome, piece by piece."""

    def __init__(self, generation: Generation) -> None:
        self.generation, self.request = generation, generation.request
        self.assembler = TextAssembler(self.request.served.tokenizer, self.request.stops)
        self.end_ids = _end_ids(self.request)
        self.outcome: Outcome | None = None

    async def pieces(self) -> AsyncIterator[str]:
        parts = []
        async for piece in _pieces(self.generation, self.assembler, self.end_ids):
            parts.append(piece)
            yield piece
        ended = any(token in self.end_ids for token in self.assembler.ids)
        self.outcome = Outcome(
            "".join(parts), self.assembler.tokens, _finish_reason(self.request, self.assembler, ended)
        )


def _usage(request: GenerationRequest, outcome: Outcome) -> dict:
    prompt = len(request.prompt_ids)
    return {
        "prompt_tokens": prompt,
        "completion_tokens": outcome.completion_tokens,
        "total_tokens": prompt + outcome.completion_tokens,
    }


# ------------------------------------------------------------------------------------------------ completions
def _completion(request: GenerationRequest, text: str, finish: str | None, usage: dict | None) -> dict:
    answer: dict[str, Any] = {
        "id": f"cmpl-{request.id}",
        "object": "text_completion",
        "created": int(time.time()),
        "model": request.served.name,
        "choices": [{"index": 0, "text": text, "finish_reason": finish, "logprobs": None}],
    }
    if usage is not None:
        answer["usage"] = usage
    return answer


def _chat(request: GenerationRequest, delta: dict | None, finish: str | None, usage: dict | None) -> dict:
    if delta is None:  # the whole answer
        return {
            "id": f"chatcmpl-{request.id}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": request.served.name,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": ""}, "finish_reason": finish}],
            "usage": usage,
        }
    chunk: dict[str, Any] = {
        "id": f"chatcmpl-{request.id}",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": request.served.name,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    if usage is not None:
        chunk["usage"] = usage
    return chunk


def _event(data: dict, name: str | None = None) -> str:
    head = f"event: {name}\n" if name else ""
    return f"{head}data: {json.dumps(data, ensure_ascii=False)}\n\n"


async def _with_error_event(events: AsyncIterator[str], done: str | None) -> AsyncIterator[str]:
    """The events, then `done`; an error after the answer has begun ends the stream with an error event."""
    try:
        async for event in events:
            yield event
    except Exception as error:
        yield _event(error_body(f"{type(error).__name__}: {error}", 500))
    if done:
        yield done


async def _streamed_completion(run: _Run, chat: bool) -> AsyncIterator[str]:
    request = run.request
    if chat:
        yield _event(_chat(request, {"role": "assistant", "content": ""}, None, None))
    async for piece in run.pieces():
        yield _event(
            _chat(request, {"content": piece}, None, None) if chat else _completion(request, piece, None, None)
        )
    assert run.outcome is not None
    usage = _usage(request, run.outcome)
    finish = run.outcome.finish_reason
    yield _event(_chat(request, {}, finish, usage) if chat else _completion(request, "", finish, usage))


# ------------------------------------------------------------------------------------------------ responses
def _response(request: GenerationRequest, status: str, text: str | None, usage: dict | None) -> dict:
    output = [] if text is None else [_message(request, text, "completed")]
    response: dict[str, Any] = {
        "id": f"resp_{request.id}",
        "object": "response",
        "created_at": int(time.time()),
        "model": request.served.name,
        "status": status,
        "output": output,
        "parallel_tool_calls": False,
        "tool_choice": "auto",
        "tools": [],
    }
    if usage is not None:
        response["usage"] = {
            "input_tokens": usage["prompt_tokens"],
            "output_tokens": usage["completion_tokens"],
            "total_tokens": usage["total_tokens"],
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens_details": {"reasoning_tokens": 0},
        }
    return response


def _message(request: GenerationRequest, text: str, status: str) -> dict:
    content = [] if status == "in_progress" else [{"type": "output_text", "text": text, "annotations": []}]
    return {"id": f"msg_{request.id}", "type": "message", "role": "assistant", "status": status, "content": content}


async def _streamed_response(run: _Run) -> AsyncIterator[str]:
    request, number = run.request, 0

    def event(kind: str, **fields: Any) -> str:
        nonlocal number
        number += 1
        return _event({"type": kind, "sequence_number": number - 1, **fields}, kind)

    item = {"output_index": 0, "item_id": f"msg_{request.id}"}
    yield event("response.created", response=_response(request, "in_progress", None, None))
    yield event("response.output_item.added", output_index=0, item=_message(request, "", "in_progress"))
    yield event("response.content_part.added", **item, content_index=0, part=_part(""))
    async for piece in run.pieces():
        yield event("response.output_text.delta", **item, content_index=0, delta=piece, logprobs=[])
    assert run.outcome is not None
    text = run.outcome.text
    yield event("response.output_text.done", **item, content_index=0, text=text, logprobs=[])
    yield event("response.content_part.done", **item, content_index=0, part=_part(text))
    yield event("response.output_item.done", output_index=0, item=_message(request, text, "completed"))
    completed = _response(request, "completed", text, _usage(request, run.outcome))
    yield event("response.completed", response=completed)


def _part(text: str) -> dict:
    return {"type": "output_text", "text": text, "annotations": []}


# ------------------------------------------------------------------------------------------------ the answer
async def answer(generation: Generation) -> JSONResponse | StreamingResponse:
    """The route's answer to a generation: one JSON object, or server-sent events as the text comes (the
    generation is cancelled when the client goes away)."""
    request, run = generation.request, _Run(generation)
    if request.stream:
        route = request.route
        events = (
            _streamed_completion(run, chat=route == CHAT) if route in (COMPLETIONS, CHAT) else _streamed_response(run)
        )
        done = "data: [DONE]\n\n" if route in (COMPLETIONS, CHAT) else None
        return StreamingResponse(
            _cancelled_when_closed(_with_error_event(events, done), generation.cancel),
            media_type="text/event-stream",
        )
    try:
        async for _ in run.pieces():
            pass
    finally:
        generation.cancel()
    assert run.outcome is not None
    outcome, usage = run.outcome, _usage(request, run.outcome)
    if request.route == COMPLETIONS:
        return JSONResponse(_completion(request, outcome.text, outcome.finish_reason, usage))
    if request.route == CHAT:
        body = _chat(request, None, outcome.finish_reason, usage)
        body["choices"][0]["message"]["content"] = outcome.text
        return JSONResponse(body)
    return JSONResponse(_response(request, "completed", outcome.text, usage))


async def _cancelled_when_closed(events: AsyncIterator[str], cancel: Callable[[], None]) -> AsyncIterator[str]:
    try:
        async for event in events:
            yield event
    finally:
        cancel()


__all__ = ["Outcome", "answer"]
