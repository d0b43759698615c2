"""The checks `minitf serve` makes of a request before generating, on either engine: the token budget against the
model's context, an empty prompt, sampling numbers in OpenAI's ranges, logit biases, tools, message parts (what
each request field may be is `serving.fields`' table). Each failure is a `RequestError` (HTTP 4xx in OpenAI's
shape) naming the field and what is allowed. Imports nothing of transformers' serving code, so vLLM's front
(`serving.vllm_front`) runs them too."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from typing import Any

from hf_minitf.catalog.limits import CHARS_PER_TOKEN_FLOOR, MAX_NEW_TOKENS
from hf_minitf.serving.errors import RequestError

# transformers' `generate` default for a request without max_tokens (serving.utils.BaseHandler).
SERVER_DEFAULT_NEW_TOKENS = 1024


def positive_int(body: dict, field: str) -> int | None:
    """The request's token count `field`, a positive integer up to MAX_NEW_TOKENS (a model without a context limit
    would otherwise generate for hours), or None where it is not set."""
    value = body.get(field)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_NEW_TOKENS:
        raise RequestError(
            400, f"{field} must be a positive integer of at most {MAX_NEW_TOKENS:,}, got {value!r}.", param=field
        )
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
    if requested is None:  # the last of `fields` is the route's own (max_tokens, max_output_tokens)
        body[fields[-1]] = min(room, SERVER_DEFAULT_NEW_TOKENS)
        return body[fields[-1]]
    return requested


# OpenAI's ranges for the numbers a request may set; the bounds are included, except top_p's 0.
SAMPLING_RANGES = {
    "temperature": (0.0, 2.0),
    "top_p": (0.0, 1.0),
    "frequency_penalty": (-2.0, 2.0),
    "presence_penalty": (-2.0, 2.0),
}
LOGIT_BIAS_RANGE = (-100, 100)  # OpenAI's
STOP_STRINGS = 4  # OpenAI's limit
# The message content parts these text models read (chat completions' and the Responses API's names); transformers'
# server drops any other part (an image, audio, a file) without a word.
TEXT_PARTS = ("text", "input_text", "output_text")


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def check_sampling(body: dict) -> None:
    """Refuse sampling fields that are out of OpenAI's ranges, not finite or of the wrong type, and `stop` strings
    past OpenAI's. Each error names the field, its value and what is allowed."""
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
    check_stop(body)


def check_stop(body: dict) -> None:
    """`stop` is a non-empty text or a list of 1 to STOP_STRINGS of them (OpenAI's limit)."""
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
    """`logit_bias` maps token ids of the model's vocabulary (decimal ASCII digits) to biases in LOGIT_BIAS_RANGE
    (integers or finite numbers), as OpenAI's."""
    bias = body.get("logit_bias")
    if bias is None:
        return
    if not isinstance(bias, dict):
        raise RequestError(400, f"logit_bias must be an object of token id -> bias, got {bias!r}.", param="logit_bias")
    low, high = LOGIT_BIAS_RANGE
    for key, value in bias.items():
        if not (key.isascii() and key.isdigit() and int(key) < vocab_size):
            raise RequestError(
                400,
                f"logit_bias key {key!r} is not a token id of the model: give decimal ids from 0 to {vocab_size - 1}.",
                param="logit_bias",
            )
        if not _is_number(value) or not low <= value <= high:
            raise RequestError(
                400, f"logit_bias[{key!r}] must be a number in [{low}, {high}], got {value!r}.", param="logit_bias"
            )


def check_tools(body: dict, chat_template: Any, name: str) -> None:
    """`tools` are function tools, and the model's chat template shows them to it (reads `tools`): otherwise the
    model would never see them (transformers' server passes them to the template, which drops them silently)."""
    tools = body.get("tools")
    if not tools:
        return
    for index, tool in enumerate(tools):
        if tool.get("type") != "function":
            raise RequestError(
                400,
                f"tools[{index}] is a {tool.get('type')!r} tool: this server runs no built-in tools; send function "
                "tools only.",
                param="tools",
            )
    templates = chat_template.values() if isinstance(chat_template, dict) else [chat_template]
    if not any(isinstance(template, str) and re.search(r"\btools\b", template) for template in templates):
        raise RequestError(
            400,
            f"{name!r}'s chat template does not show tools to the model (it never reads `tools`), so they would be "
            "ignored; leave tools out, or give the model a chat template that renders them.",
            param="tools",
        )


# The type of each request field a route reads that the other checks do not (None, JSON's null, is "not set"):
# transformers' handlers use them as they come, so `suffix: 5` or `tools: "x"` failed inside them with a 500.
FIELD_TYPES: dict[str, tuple[type, ...]] = {
    "stream": (bool,),
    "suffix": (str,),
    "user": (str,),
    "instructions": (str,),
    "tools": (list,),
    "tool_choice": (str, dict),
    "stream_options": (dict,),
    "chat_template_kwargs": (dict,),
    "response_format": (dict,),
    "metadata": (dict,),
    "dimensions": (int,),
    "encoding_format": (str,),
}
_TYPE_NAMES = {str: "a string", bool: "true or false", list: "a list", dict: "an object", int: "an integer"}
# apply_chat_template's own arguments, which chat_template_kwargs (variables for the template) may not set: one
# is the template itself.
TEMPLATE_ARGUMENTS = {
    "conversation", "tools", "documents", "chat_template", "add_generation_prompt", "continue_final_message",
    "tokenize", "padding", "truncation", "max_length", "return_tensors", "return_dict", "return_assistant_tokens_mask",
    "tokenizer_kwargs", "sanitize_control_tokens", "load_audio_from_video", "messages",
}  # fmt: skip
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def check_field_types(body: dict) -> None:
    """Each field of FIELD_TYPES the request sets has its type (`chat_template_kwargs` only template variables)."""
    for field, types in FIELD_TYPES.items():
        value = body.get(field)
        if value is not None and (not isinstance(value, types) or (isinstance(value, bool) and bool not in types)):
            expected = " or ".join(_TYPE_NAMES[kind] for kind in types)
            raise RequestError(400, f"{field} must be {expected}, got {value!r}.", param=field)
    if isinstance(body.get("tools"), list) and not all(isinstance(tool, dict) for tool in body["tools"]):
        raise RequestError(400, "tools must be a list of tool objects ({type, function}).", param="tools")
    reserved = sorted(TEMPLATE_ARGUMENTS & set(body.get("chat_template_kwargs") or {}))
    if reserved:
        raise RequestError(
            400,
            f"chat_template_kwargs may set the chat template's variables only, not {reserved[0]!r} (an argument of "
            "the server's own rendering).",
            param="chat_template_kwargs",
        )


def _strings(value: Any, path: str) -> Iterator[tuple[str, str]]:
    """Every text inside a JSON value, with its path (`messages[0].content`)."""
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(key, f"{path} key")
            yield from _strings(item, f"{path}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _strings(item, f"{path}[{index}]")


def check_unicode(body: dict) -> None:
    """No text of the request holds a lone surrogate (a JSON \\ud800 escape without its pair): it is not Unicode, and the
    tokenizers fail on it (a 500 the openai client retries)."""
    for field, value in body.items():
        for path, text in _strings(value, field):
            found = _LONE_SURROGATE.search(text)
            if found:
                raise RequestError(
                    400,
                    f"{path} holds a lone surrogate ({found.group()!r} at character {found.start()}), which is not "
                    "Unicode text: send UTF-8, where a \\u escape of a surrogate comes in a high-low pair.",
                    param=str(field),
                )


def text_chars(value: Any) -> int:
    """The characters of all the texts in a JSON value (messages, an input list)."""
    return sum(len(text) for _, text in _strings(value, ""))


def chars_per_token(tokenizer: Any) -> int:
    """Most characters one token of `tokenizer` stands for, as far as the server assumes: its longest vocabulary
    entry (added tokens included), at least CHARS_PER_TOKEN_FLOOR. A text longer than the context times this is
    refused before it is tokenized."""
    vocabularies = [tokenizer.get_vocab()]
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None:  # the seq2seq tokenizer's get_vocab is its target side; the backend reads inputs
        vocabularies.append(backend.get_vocab(with_added_tokens=True))
    return max([CHARS_PER_TOKEN_FLOOR, *(len(token) for vocabulary in vocabularies for token in vocabulary)])


def check_text_length(chars: int, tokens: int | None, chars_per_token: int, name: str, param: str, what: str) -> None:
    """Refuse, before tokenizing it, a text of `chars` characters where no such text fits a model reading `tokens`
    tokens of at most `chars_per_token` characters each (tokenizing it all cost gigabytes)."""
    if tokens is not None and chars > tokens * chars_per_token:
        raise RequestError(
            400,
            f"{what} is {chars:,} characters; {name!r} reads at most {tokens} tokens, and no text longer than "
            f"{tokens * chars_per_token:,} characters fits in them. Shorten or split it.",
            param=param,
            code="context_length_exceeded",
        )


def check_chat_template(tokenizer: Any, name: str, route: str) -> None:
    """Refuse a chat request (`route`) to the model `name` whose tokenizer has no chat template to render it with."""
    if getattr(tokenizer, "chat_template", None) is None:
        raise RequestError(
            400,
            f"{name!r} has no chat template (its tokenizer defines no chat format), so {route} cannot turn messages "
            "into a prompt. Send the text to continue to POST /v1/completions instead.",
            param="messages",
            code="no_chat_template",
        )


def check_messages(messages: Any, param: str = "messages") -> None:
    """Chat messages as OpenAI's schema has them: a non-empty list of objects with a role and a text content (a
    string, a list of text parts, or null beside tool calls)."""
    if not isinstance(messages, list) or not messages:
        raise RequestError(400, f"{param} must be a non-empty list of {{role, content}} objects.", param=param)
    for index, message in enumerate(messages):
        where = f"{param}[{index}]"
        if not isinstance(message, dict):
            raise RequestError(400, f"{where} must be a {{role, content}} object, got {message!r}.", param=param)
        if not isinstance(message.get("role"), str) or not message["role"]:
            raise RequestError(400, f"{where}.role must be a non-empty string.", param=param)
        content = message.get("content")
        parts = content if isinstance(content, list) else []
        if not (content is None or isinstance(content, (str, list))) or not all(
            isinstance(part, dict)
            and isinstance(part.get("type"), str)
            and (part["type"] not in TEXT_PARTS or isinstance(part.get("text"), str))
            for part in parts
        ):
            raise RequestError(
                400,
                f"{where}.content must be a string or a list of {{type: 'text', text}} parts, got {content!r}.",
                param=param,
            )
        for number, part in enumerate(parts):
            if part["type"] not in TEXT_PARTS:
                raise RequestError(
                    400,
                    f"{where}.content[{number}] is an {part['type']!r} part: these models read text only, and it "
                    "would be dropped; send text parts.",
                    param=param,
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
    "FIELD_TYPES",
    "LOGIT_BIAS_RANGE",
    "SAMPLING_RANGES",
    "SERVER_DEFAULT_NEW_TOKENS",
    "TEMPLATE_ARGUMENTS",
    "TEXT_PARTS",
    "chars_per_token",
    "check_chat_template",
    "check_field_types",
    "check_logit_bias",
    "check_messages",
    "check_new_tokens",
    "check_sampling",
    "check_stop",
    "check_text_length",
    "check_tools",
    "check_unicode",
    "positive_int",
    "text_chars",
    "text_prompt",
]
