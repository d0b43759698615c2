"""Chat templates rendered for `minitf serve` off the event loop, within a time and a size limit.

A chat template is code from the model folder, run by jinja2 in transformers' sandbox, which stops escapes but not
loops: nested `range(99999)` loops held the whole server for over a minute. Here each request's messages are
rendered (and tokenized) on a worker thread before transformers' handler runs, under `template_limits`, and the
handler is given that result instead of rendering again on the event loop (`guard_chat_template`).

A thread cannot be killed, so the limits are checked from inside the rendering: jinja2 compiles a template into
Python generators (code objects named `<template>`), whose every line and every piece of output a trace function of
the rendering thread sees. A line past the deadline, or output past the size limit, raises `TemplateLimitExceeded`
there, which ends the rendering. Work done in one call from the template (a huge string repetition) is not cut.
Meanwhile the rendering thread often releases the GIL, so the other requests are answered as it runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import inspect
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import jinja2

from hf_minitf.catalog.limits import CHAT_TEMPLATE_MAX_CHARS, CHAT_TEMPLATE_SECONDS
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


@dataclass
class _Rendered:
    """One request's chat, rendered and tokenized ahead: the arguments it was rendered with and the token lists."""

    conversation: list
    options: dict
    encoding: Any  # transformers' BatchEncoding of lists (no tensors)

    def matches(self, conversation: Any, options: dict) -> bool:
        return conversation == self.conversation and _without_tensors(options) == self.options

    def as_asked(self, return_tensors: str | None) -> Any:
        if return_tensors is None:
            return self.encoding
        from transformers import BatchEncoding

        return BatchEncoding({key: [value] for key, value in self.encoding.items()}, tensor_type=return_tensors)


_RENDERED_AHEAD: contextvars.ContextVar[_Rendered | None] = contextvars.ContextVar("minitf_rendered", default=None)


def _without_tensors(options: dict) -> dict:
    return {key: value for key, value in options.items() if key != "return_tensors"}


def guard_chat_template(tokenizer: Any) -> None:
    """Make the served tokenizer's `apply_chat_template` return the chat rendered ahead for this request (same
    conversation and arguments), and render anything else within `template_limits`. Idempotent."""
    if getattr(tokenizer, "_minitf_render", None) is not None:
        return
    render = tokenizer.apply_chat_template

    def apply_chat_template(conversation, *args, **options):
        ahead = _RENDERED_AHEAD.get()
        if ahead is not None and not args and ahead.matches(conversation, options):
            return ahead.as_asked(options.get("return_tensors"))
        with template_limits():
            return render(conversation, *args, **options)

    tokenizer._minitf_render = render
    tokenizer.apply_chat_template = apply_chat_template


def _limit_error(name: str, error: BaseException) -> RequestError:
    return RequestError(
        400,
        f"{name!r}'s chat template {error} rendering these messages, past this server's limits "
        f"({CHAT_TEMPLATE_SECONDS:g} s, {CHAT_TEMPLATE_MAX_CHARS:,} characters): the template (chat_template in the "
        "model folder's tokenizer files) loops or writes too much; send fewer or shorter messages, or fix the template.",
        param="messages",
        code="chat_template_limit",
    )


async def render_ahead(
    tokenizer: Any, name: str, conversation: list, options: dict, param: str = "messages"
) -> contextlib.AbstractContextManager[Any]:
    """Render and tokenize `conversation` with the served tokenizer on a worker thread, within the limits; returns a
    context manager within which the tokenizer's `apply_chat_template` (called by transformers' handler with the
    same arguments) returns that result, which the block gets. Template errors are a RequestError naming `param`."""
    render: Callable = getattr(tokenizer, "_minitf_render", tokenizer.apply_chat_template)
    options = _without_tensors(options)

    def rendered() -> Any:
        with template_limits():
            return render(conversation, **options)

    try:
        encoding = await asyncio.to_thread(rendered)
    except TemplateLimitExceeded as error:
        raise _limit_error(name, error) from error
    except (KeyError, TypeError, ValueError, jinja2.TemplateError) as error:
        raise RequestError(400, f"The {param} do not fit {name!r}'s chat template: {error}", param=param) from error
    return _using(_Rendered(conversation, options, encoding))


@contextlib.contextmanager
def _using(rendered: _Rendered) -> Iterator[Any]:
    token = _RENDERED_AHEAD.set(rendered)
    try:
        yield rendered.encoding
    finally:
        _RENDERED_AHEAD.reset(token)


__all__ = ["TemplateLimitExceeded", "guard_chat_template", "render_ahead", "template_limits"]
