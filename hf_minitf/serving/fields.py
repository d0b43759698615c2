"""What `minitf serve` does with each field of OpenAI's completions, chat completions and responses requests: it
honours the field with OpenAI's meaning, accepts it where it asks for nothing this server could do otherwise, or
refuses it (HTTP 400 naming the field and why) unless its value asks for nothing. A field the server would
silently ignore is refused, never answered as if absent. `FIELDS` is the table; docs/serving.md shows it as
`field_table()` writes it, the checks (`check_fields`) read it, and on `--engine vllm` the front applies the rows
that vLLM would ignore. Imports nothing of transformers' serving code, so the vLLM front reads it too."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from hf_minitf.serving.errors import RequestError

COMPLETIONS, CHAT, RESPONSES = "/v1/completions", "/v1/chat/completions", "/v1/responses"
ROUTES = (COMPLETIONS, CHAT, RESPONSES)
HONOURED, ACCEPTED, REFUSED = "honoured", "accepted", "refused"


@dataclass(frozen=True)
class Field:
    """One request field on some routes: `answer` is HONOURED (OpenAI's meaning), ACCEPTED (any value; `why` says
    why it changes nothing here) or REFUSED (400 unless its value is null or one of `allowed`, the values that ask
    for nothing). `vllm`: on `--engine vllm`, vLLM answers the field itself (True) or the front applies this row
    (False: vLLM would ignore it)."""

    name: str
    routes: tuple[str, ...]
    answer: str
    why: str
    allowed: tuple[Any, ...] = ()
    vllm: bool = False

    def refuses(self, value: Any) -> bool:
        """Whether this row refuses `value` (null, JSON's "not set", never)."""
        return self.answer == REFUSED and value is not None and not any(_same(value, ok) for ok in self.allowed)


def _same(value: Any, allowed: Any) -> bool:
    """JSON equality that keeps booleans apart from numbers (`n: true` is not `n: 1`) and drops null members."""
    if isinstance(value, dict) and isinstance(allowed, dict):
        value = {key: item for key, item in value.items() if item is not None}
        return value.keys() == allowed.keys() and all(_same(value[key], allowed[key]) for key in value)
    if isinstance(value, list) and isinstance(allowed, list):
        return len(value) == len(allowed) and all(map(_same, value, allowed))
    return (
        isinstance(value, bool) == isinstance(allowed, bool)
        and type(value) in (int, float, str, bool)
        and (value == allowed)
    )


_ALL, _GENERATING = ROUTES, (COMPLETIONS, CHAT)
_STORED = "this server stores nothing (no stored completions, responses or conversations)"
_NO_REASONING = "these models do not reason"
_TEXT_ONLY = "these models read and write text only"

FIELDS: tuple[Field, ...] = (
    # the request itself
    Field("model", _ALL, HONOURED, "the served model's name; may be left out when one model is served", vllm=True),
    Field("prompt", (COMPLETIONS,), HONOURED, "one text (or a list of one); token ids are refused", vllm=True),
    Field("messages", (CHAT,), HONOURED, "rendered by the model's chat template; text parts only", vllm=True),
    Field("input", (RESPONSES,), HONOURED, "a text or a list of input items, rendered by the chat template", vllm=True),
    Field("instructions", (RESPONSES,), HONOURED, "a system message before the input", vllm=True),
    Field(
        "chat_template_kwargs", (CHAT,), HONOURED, "variables for the chat template (transformers' field)", vllm=True
    ),
    Field("stream", _ALL, HONOURED, "server-sent events; without it /v1/responses answers one JSON", vllm=True),
    # decoding
    Field("max_tokens", _GENERATING, HONOURED, "within the model's context", vllm=True),
    Field("max_completion_tokens", (CHAT,), HONOURED, "within the model's context", vllm=True),
    Field("max_output_tokens", (RESPONSES,), HONOURED, "within the model's context", vllm=True),
    Field("temperature", _ALL, HONOURED, "0 decodes greedily, above samples", vllm=True),
    Field("top_p", _ALL, HONOURED, "nucleus sampling", vllm=True),
    Field("seed", _ALL, HONOURED, "repeatable sampling", vllm=True),
    Field("stop", _GENERATING, HONOURED, "the text ends before the first stop string", vllm=True),
    Field(
        "frequency_penalty",
        _GENERATING,
        HONOURED,
        "subtracted from a token's logit once per time it was generated (the prompt does not count)",
        vllm=True,
    ),
    Field(
        "presence_penalty",
        _GENERATING,
        HONOURED,
        "subtracted from the logit of every token generated so far (the prompt does not count)",
        vllm=True,
    ),
    Field("logit_bias", _GENERATING, HONOURED, "added to the logits of the token ids given", vllm=True),
    Field(
        "tools",
        (CHAT, RESPONSES),
        HONOURED,
        "function tools only, shown to the model by its chat template; refused where the template does not read "
        "`tools` (none of the templates this package writes does); no tool calls are parsed from the reply",
        vllm=True,
    ),
    # asking for nothing this server could do otherwise
    Field("user", _ALL, ACCEPTED, "an end-user id for OpenAI's abuse monitoring; nothing here depends on it"),
    Field("safety_identifier", (CHAT, RESPONSES), ACCEPTED, "an end-user id for OpenAI's abuse monitoring"),
    Field("metadata", (CHAT, RESPONSES), ACCEPTED, f"tags for stored objects; {_STORED}"),
    Field(
        "stream_options",
        _ALL,
        ACCEPTED,
        "a stream's last chunk carries the usage whatever `include_usage` says",
        vllm=True,
    ),
    Field("prompt_cache_key", (CHAT, RESPONSES), ACCEPTED, "a prompt-cache hint; the answer is the same"),
    Field("prompt_cache_options", (CHAT, RESPONSES), ACCEPTED, "a prompt-cache hint; the answer is the same"),
    Field("prompt_cache_retention", (CHAT, RESPONSES), ACCEPTED, "a prompt-cache hint; the answer is the same"),
    Field("prediction", (CHAT,), ACCEPTED, "a latency hint (Predicted Outputs); the answer is the same"),
    Field(
        "parallel_tool_calls",
        (CHAT, RESPONSES),
        ACCEPTED,
        "no tool calls are parsed from these models' replies",
        vllm=True,
    ),
    Field("max_tool_calls", (RESPONSES,), ACCEPTED, "bounds built-in tool calls, and this server runs none", vllm=True),
    # refused unless they ask for nothing
    Field("n", _GENERATING, REFUSED, "one choice per request", (1,), vllm=True),
    Field("best_of", (COMPLETIONS,), REFUSED, "one candidate per request", (1,)),
    Field("echo", (COMPLETIONS,), REFUSED, "the answer does not repeat the prompt", (False,), vllm=True),
    Field(
        "suffix", (COMPLETIONS,), REFUSED, "these models continue a text; they cannot fill in before a suffix", ("",)
    ),
    Field("logprobs", (COMPLETIONS,), REFUSED, "no log probabilities are returned", vllm=True),
    Field("logprobs", (CHAT,), REFUSED, "no log probabilities are returned", (False,), vllm=True),
    Field("top_logprobs", (CHAT, RESPONSES), REFUSED, "no log probabilities are returned", (0,), vllm=True),
    Field("generation_config", _ALL, REFUSED, "transformers' free-form generate() settings; set OpenAI's fields"),
    Field(
        "response_format",
        (CHAT,),
        REFUSED,
        "structured output needs grammar-constrained decoding, which this server lacks",
        ({"type": "text"},),
        vllm=True,
    ),
    Field(
        "text",
        (RESPONSES,),
        REFUSED,
        "structured output needs grammar-constrained decoding, which this server lacks; nothing steers the length",
        (
            {},
            {"format": {"type": "text"}},
            {"verbosity": "medium"},
            {"format": {"type": "text"}, "verbosity": "medium"},
        ),
    ),
    Field(
        "tool_choice",
        (CHAT, RESPONSES),
        REFUSED,
        "nothing makes the model call a tool (no constrained decoding); `auto` lets the template show the tools",
        ("none", "auto"),
        vllm=True,
    ),
    Field("functions", (CHAT,), REFUSED, "legacy function calling: never shown to the model; send `tools`", ([],)),
    Field("function_call", (CHAT,), REFUSED, "legacy function calling; send `tools`", ("none",)),
    Field("modalities", (CHAT,), REFUSED, _TEXT_ONLY, (["text"],)),
    Field("audio", (CHAT,), REFUSED, f"no audio output: {_TEXT_ONLY}"),
    Field("reasoning_effort", (CHAT,), REFUSED, _NO_REASONING, ("none",)),
    Field("reasoning", (RESPONSES,), REFUSED, _NO_REASONING, ({}, {"effort": "none"})),
    Field("verbosity", (CHAT,), REFUSED, "nothing steers these models' length but the token budget", ("medium",)),
    Field("web_search_options", (CHAT,), REFUSED, "this server searches nothing"),
    Field("moderation", (CHAT, RESPONSES), REFUSED, "no moderation model runs here"),
    Field("service_tier", (CHAT, RESPONSES), REFUSED, "this server has one processing tier", ("auto", "default")),
    Field("store", (CHAT, RESPONSES), REFUSED, _STORED, (False,)),
    Field("previous_response_id", (RESPONSES,), REFUSED, f"{_STORED}; send the whole conversation as input"),
    Field("conversation", (RESPONSES,), REFUSED, f"{_STORED}; send the whole conversation as input"),
    Field(
        "background", (RESPONSES,), REFUSED, "requests run while the client waits; there is nothing to poll", (False,)
    ),
    Field("background_options", (RESPONSES,), REFUSED, "requests run while the client waits"),
    Field("include", (RESPONSES,), REFUSED, "no extra output data (log probabilities, sources) is produced", ([],)),
    Field("prompt", (RESPONSES,), REFUSED, f"a stored prompt template; {_STORED}"),
    Field(
        "truncation", (RESPONSES,), REFUSED, "an input past the context is refused, not cut", ("disabled",), vllm=True
    ),
    Field("context_management", (RESPONSES,), REFUSED, "nothing is compacted: the input must fit the context", ([],)),
    Field("image", (RESPONSES,), REFUSED, f"no image generation: {_TEXT_ONLY}"),
    Field("access_programs", (RESPONSES,), REFUSED, "OpenAI's access programs do not apply here"),
)


def route_fields(route: str) -> dict[str, Field]:
    """The fields of `route`, by name."""
    return {row.name: row for row in FIELDS if route in row.routes}


def check_fields(body: dict, route: str, engine: str = "transformers") -> None:
    """Refuse a field `route` does not take, or a value its row refuses (on `engine` "vllm", the rows vLLM would
    ignore only: vLLM answers the others, and its own extra fields)."""
    rows = route_fields(route)
    for name, value in body.items():
        row = rows.get(name)
        if row is None:
            if engine == "vllm":
                continue
            raise RequestError(400, f"Unknown field {name!r}: {route} does not take it; leave it out.", param=name)
        if (engine != "vllm" or not row.vllm) and row.refuses(value):
            asks = " or ".join(json.dumps(ok) for ok in row.allowed)
            instead = f"leave it out or send {asks}" if asks else "leave it out"
            shown = json.dumps(value, ensure_ascii=False)
            shown = shown if len(shown) <= 80 else shown[:77] + "..."
            raise RequestError(400, f"{name}={shown} is not supported here: {row.why}; {instead}.", param=name)


def field_table(rows: Sequence[Field] = FIELDS) -> str:
    """The Markdown table of docs/serving.md: each field, its routes, what happens to it, on both engines."""
    short = {COMPLETIONS: "completions", CHAT: "chat", RESPONSES: "responses"}
    lines = ["| field | routes | answer | why | `--engine vllm` |", "|---|---|---|---|---|"]
    for row in rows:
        answer = row.answer
        if row.answer == REFUSED and row.allowed:
            answer = "refused unless " + " or ".join(f"`{json.dumps(ok)}`" for ok in row.allowed)
        vllm = "vLLM answers it" if row.vllm else "refused by the front" if row.answer == REFUSED else "the same"
        routes = ", ".join(short[route] for route in row.routes)
        lines.append(f"| `{row.name}` | {routes} | {answer} | {row.why} | {vllm} |")
    return "\n".join(lines)


__all__ = [
    "ACCEPTED",
    "CHAT",
    "COMPLETIONS",
    "FIELDS",
    "HONOURED",
    "REFUSED",
    "RESPONSES",
    "ROUTES",
    "Field",
    "check_fields",
    "field_table",
    "route_fields",
]
