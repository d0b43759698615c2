"""Chat templates rendered for `minitf serve` off the event loop, within a time and a size limit.

A chat template is code from the model folder, run by jinja2 in transformers' sandbox, which stops escapes but not
loops: nested `range(99999)` loops held the whole server for over a minute. Here each request's messages are
rendered (and tokenized) on a worker thread, under `template_limits` (`render_chat`).

A thread cannot be killed, so the limits are checked from inside the rendering: jinja2 compiles a template into
Python generators (code objects named `<template>`), whose every line and every piece of output a trace function of
the rendering thread sees. A line past the deadline, or output past the size limit, raises `TemplateLimitExceeded`
there, which ends the rendering. Work done in one call from the template (a huge string repetition) is not cut.
Meanwhile the rendering thread often releases the GIL, so the other requests are answered as it runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import inspect
import json
import sys
import time
from collections.abc import Iterator
from typing import Any

import jinja2

from hf_minitf.catalog.limits import CHAT_TEMPLATE_MAX_CHARS, CHAT_TEMPLATE_SECONDS
from hf_minitf.serving.checks import TEXT_PARTS
from hf_minitf.serving.errors import RequestError

# The file name jinja2 gives the code it compiles a template string to (`Environment.from_string`).
TEMPLATE_CODE_FILE = "<template>"
# A long rendering releases the GIL this often: a thread looping in Python otherwise holds it for the interpreter's
# switch interval (5 ms) each time another thread (the event loop, torch between its operations) asks for it.
YIELD_EVERY_SECONDS = 0.001


class TemplateLimitExceeded(Exception):
    """A chat template ran past its time or wrote past its size limit."""


@contextlib.contextmanager
def template_limits(seconds: float = CHAT_TEMPLATE_SECONDS, max_chars: int = CHAT_TEMPLATE_MAX_CHARS) -> Iterator[None]:
    """Within the block, jinja2 templates rendered on this thread stop with TemplateLimitExceeded after `seconds`,
    or once they have written more than `max_chars` characters (counted as their generators yield them)."""
    deadline = time.monotonic() + seconds
    written, yielded_at = 0, time.monotonic()

    def trace_template_line(frame, event: str, arg: Any):
        nonlocal written, yielded_at
        if event == "return" and type(arg) is str and frame.f_code.co_flags & inspect.CO_GENERATOR:
            written += len(arg)
            if written > max_chars:
                raise TemplateLimitExceeded(f"wrote more than {max_chars:,} characters")
        now = time.monotonic()
        if now > deadline:
            raise TemplateLimitExceeded(f"ran longer than {seconds:g} s")
        if now - yielded_at > YIELD_EVERY_SECONDS:  # hand the GIL to the event loop and generation threads
            time.sleep(0)
            yielded_at = now
        return trace_template_line

    def trace_call(frame, _event: str, _arg: Any):
        return trace_template_line if frame.f_code.co_filename == TEMPLATE_CODE_FILE else None

    previous = sys.gettrace()
    sys.settrace(trace_call)
    try:
        yield
    finally:
        sys.settrace(previous)


def _limit_error(name: str, error: BaseException) -> RequestError:
    return RequestError(
        400,
        f"{name!r}'s chat template {error} rendering these messages, past this server's limits "
        f"({CHAT_TEMPLATE_SECONDS:g} s, {CHAT_TEMPLATE_MAX_CHARS:,} characters): the template (chat_template in the "
        "model folder's tokenizer files) loops or writes too much; send fewer or shorter messages, or fix the template.",
        param="messages",
        code="chat_template_limit",
    )


def template_messages(messages: list[dict]) -> list[dict]:
    """OpenAI's chat messages as chat templates read them: the text parts of a content joined by spaces, tool calls'
    arguments parsed from JSON (templates iterate them as mappings), the tool call id kept."""
    converted = []
    for message in messages:
        entry: dict[str, Any] = {"role": message["role"]}
        if message.get("tool_calls"):
            calls = copy.deepcopy(message["tool_calls"])
            for call in calls:
                function = call.get("function") or call
                if isinstance(function["arguments"], str):
                    function["arguments"] = json.loads(function["arguments"])
            entry["tool_calls"] = calls
            entry["content"] = ""
        else:
            content = message.get("content") or ""
            parts = [{"type": "text", "text": content}] if isinstance(content, str) else content
            entry["content"] = " ".join(part["text"] for part in parts if part["type"] in TEXT_PARTS)
        if "tool_call_id" in message:
            entry["tool_call_id"] = message["tool_call_id"]
        converted.append(entry)
    return converted


async def render_chat(
    tokenizer: Any, name: str, messages: list, tools: Any = None, variables: dict | None = None, param: str = "messages"
) -> list[int]:
    """The token ids of `messages` rendered by the tokenizer's chat template (with a generation prompt, `tools` and
    the template `variables`) on a worker thread, within the limits; template errors are a RequestError naming
    `param`."""

    def rendered() -> list[int]:
        with template_limits():
            encoding = tokenizer.apply_chat_template(
                messages, tools=tools, add_generation_prompt=True, tokenize=True, return_dict=True, **(variables or {})
            )
        return list(encoding["input_ids"])

    try:
        return await asyncio.to_thread(rendered)
    except TemplateLimitExceeded as error:
        raise _limit_error(name, error) from error
    except (KeyError, TypeError, ValueError, jinja2.TemplateError) as error:
        raise RequestError(400, f"The {param} do not fit {name!r}'s chat template: {error}", param=param) from error


__all__ = ["TemplateLimitExceeded", "render_chat", "template_limits", "template_messages"]
