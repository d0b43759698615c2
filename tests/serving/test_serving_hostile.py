"""`minitf serve` under hostile requests, over real HTTP: every bad request of the table answers 4xx in OpenAI's
error shape naming the field (and the server answers afterwards), every row of the request-field table
(`serving.fields`) is answered as it says, bodies past --max-request-bytes answer 413 unparsed and the client gets
that answer, a chat template that loops is cut at its limit while the server answers other requests, SIGTERM lets
the request in flight finish, and the API key rules of the command line."""

import asyncio
import json
import signal
import socket
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import httpx
import pytest
from factories import _random_gpt, make_encoder, make_gpt, make_seq2seq
from field_examples import BASE_FIELDS, example
from helpers import run_cli
from transformers import AutoTokenizer

from hf_minitf import char_tokenizer
from hf_minitf.catalog.limits import CHARS_PER_TOKEN_FLOOR, MAX_NEW_TOKENS
from hf_minitf.serving.fields import REFUSED, ROUTES, field_table, route_fields
from hf_minitf.serving.process import server_process
from hf_minitf.serving.templates import TemplateLimitExceeded, template_limits

BODY_LIMIT = 65536
CHAT_TEMPLATE = (
    "{% for m in messages %}{{ m.role[0] }}: {{ m.content }}\n{% endfor %}{% if add_generation_prompt %}a: {% endif %}"
)
LOOPING_TEMPLATE = "{% for i in range(99999) %}{% for j in range(99999) %}{% endfor %}{% endfor %}{{ messages }}"
TOOLS_TEMPLATE = "{% for t in tools or [] %}t: {{ t.function.name }}\n{% endfor %}" + CHAT_TEMPLATE


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """The tiny GPT (64 positions), the same with a chat template, with one that shows tools and with a looping
    one, a rotary GPT (no context limit), a GPT whose characters cannot spell transformers' stop-string probe
    "abcdef", the encoder and the translation model."""
    root = tmp_path_factory.mktemp("hostile")
    folders = {"gpt": make_gpt(root / "gpt"), "rope": make_gpt(root / "rope", position_embedding_type="rope")}
    for name, template in (("chat", CHAT_TEMPLATE), ("tools", TOOLS_TEMPLATE), ("looping", LOOPING_TEMPLATE)):
        folder = make_gpt(root / name)
        tokenizer = AutoTokenizer.from_pretrained(folder)
        tokenizer.chat_template = template
        tokenizer.save_pretrained(folder)
        folders[name] = folder
    folders["letters"] = _random_gpt(root / "letters", char_tokenizer("ghijklmnopqrstuvwxyz ghost jump\n"), 7)
    folders["encoder"] = make_encoder(root / "encoder")
    folders["seq2seq"] = make_seq2seq(root / "seq2seq")
    return {name: str(folder) for name, folder in folders.items()}


@pytest.fixture(scope="module")
def server(folders, tmp_path_factory):
    log = tmp_path_factory.mktemp("hostile_log") / "server.log"
    with server_process(
        folders.values(), "--log-level", "warning", "--max-request-bytes", str(BODY_LIMIT), "--engine", "torch", log=log
    ) as running:
        yield running


def post(url: str, route: str, body: dict | str, **options) -> httpx.Response:
    """POST a body as Python's json writes it (NaN, lone surrogates as \\u escapes), which httpx's json= refuses."""
    content = body if isinstance(body, str) else json.dumps(body)
    return httpx.post(url + route, content=content, headers={"Content-Type": "application/json"}, timeout=60, **options)


def assert_openai_error(response: httpx.Response, status: int, param: str | None) -> dict:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"} and error["type"] == "invalid_request_error", error
    assert error["param"] == param and error["message"], error
    return error


HI = [{"role": "user", "content": "hi"}]
COMPLETIONS, CHAT, RESPONSES, EMBEDDINGS = "/v1/completions", "/v1/chat/completions", "/v1/responses", "/v1/embeddings"
# id: (route, model, body, param, words of the message). Every row answers 400. Raw strings are sent as written.
BAD_REQUESTS = {
    # lone surrogates, in every text a route reads
    "surrogate in a prompt": (COMPLETIONS, "gpt", {"prompt": "a\ud800b"}, "prompt", "lone surrogate"),
    "surrogate in a message": (CHAT, "chat", {"messages": [{"role": "user", "content": "\udfff"}]}, "messages", "lone"),
    "surrogate in a message part": (
        CHAT,
        "chat",
        {"messages": [{"role": "user", "content": [{"type": "text", "text": "x\ud800"}]}]},
        "messages",
        "messages[0].content[0].text",
    ),
    "surrogate in an embedding input": (EMBEDDINGS, "encoder", {"input": ["dog", "\ud800"]}, "input", "input[1]"),
    "surrogate in a translation": (COMPLETIONS, "seq2seq", {"prompt": "the \ud800"}, "prompt", "lone surrogate"),
    "surrogate in a responses input": (RESPONSES, "chat", {"input": "\ud800", "stream": False}, "input", "lone"),
    "surrogate in a stop": (COMPLETIONS, "gpt", {"prompt": "a", "stop": ["\ud800"]}, "stop", "lone surrogate"),
    # numbers: not finite, past every bound, of the wrong type
    "temperature NaN": (
        COMPLETIONS,
        "gpt",
        '{"model": "{gpt}", "prompt": "a", "temperature": NaN}',
        "temperature",
        "nan",
    ),
    "top_p Infinity": (COMPLETIONS, "gpt", '{"model": "{gpt}", "prompt": "a", "top_p": Infinity}', "top_p", "inf"),
    "max_tokens 10**30": (COMPLETIONS, "gpt", {"prompt": "a", "max_tokens": 10**30}, "max_tokens", "at most"),
    "max_tokens 10**30, no context limit": (
        COMPLETIONS,
        "rope",
        {"prompt": "a", "max_tokens": 10**30},
        "max_tokens",
        f"{MAX_NEW_TOKENS:,}",
    ),
    "max_completion_tokens 10**30": (
        CHAT,
        "chat",
        {"messages": HI, "max_completion_tokens": 10**30},
        "max_completion_tokens",
        "at most",
    ),
    "max_output_tokens 10**30": (
        RESPONSES,
        "chat",
        {"input": "hi", "max_output_tokens": 10**30},
        "max_output_tokens",
        "",
    ),
    "max_output_tokens past the context": (
        RESPONSES,
        "chat",
        {"input": "hi", "max_output_tokens": 60, "stream": False},
        "max_output_tokens",
        "context",
    ),
    "max_tokens 10**30 (translation)": (
        COMPLETIONS,
        "seq2seq",
        {"prompt": "the", "max_tokens": 10**30},
        "max_tokens",
        "",
    ),
    "max_tokens a float": (COMPLETIONS, "gpt", {"prompt": "a", "max_tokens": 5.0}, "max_tokens", "positive integer"),
    "n 10**30": (COMPLETIONS, "gpt", {"prompt": "a", "n": 10**30}, "n", "not supported"),
    "seed negative": (COMPLETIONS, "gpt", {"prompt": "a", "seed": -1}, "seed", "seed must be"),
    "logit_bias NaN": (CHAT, "chat", '{"model": "{chat}", "messages": [], "logit_bias": {"3": NaN}}', "logit_bias", ""),
    # logit_bias keys that are no token id (str.isdigit() holds for the first two, int() fails: a 500 before)
    "logit_bias key superscript": (CHAT, "chat", {"messages": HI, "logit_bias": {"³": 1}}, "logit_bias", "'³'"),
    "logit_bias key circled": (COMPLETIONS, "gpt", {"prompt": "a", "logit_bias": {"①": 1}}, "logit_bias", "'①'"),
    "logit_bias key negative": (COMPLETIONS, "gpt", {"prompt": "a", "logit_bias": {"-1": 1}}, "logit_bias", "'-1'"),
    "logit_bias key spaced": (COMPLETIONS, "gpt", {"prompt": "a", "logit_bias": {" 3": 1}}, "logit_bias", "' 3'"),
    "logit_bias past 100": (COMPLETIONS, "gpt", {"prompt": "a", "logit_bias": {"3": 100.5}}, "logit_bias", "[-100"),
    "logit_bias true": (COMPLETIONS, "seq2seq", {"prompt": "a", "logit_bias": {"3": True}}, "logit_bias", "True"),
    "presence_penalty past 2": (CHAT, "chat", {"messages": HI, "presence_penalty": 2.5}, "presence_penalty", "[-2, 2]"),
    # parts and tools the model would never see
    "an image part": (
        CHAT,
        "chat",
        {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]},
        "messages",
        "'image_url' part",
    ),
    "an audio part in a responses input": (
        RESPONSES,
        "chat",
        {
            "input": [
                {"role": "user", "content": [{"type": "input_audio", "input_audio": {"data": "", "format": "wav"}}]}
            ]
        },
        "input",
        "text only",
    ),
    "tools a template does not show": (
        CHAT,
        "chat",
        {"messages": HI, "tools": [{"type": "function", "function": {"name": "f"}}]},
        "tools",
        "does not show tools",
    ),
    "a built-in tool": (RESPONSES, "tools", {"input": "hi", "tools": [{"type": "web_search"}]}, "tools", "built-in"),
    "a named tool choice": (
        CHAT,
        "tools",
        {"messages": HI, "tool_choice": {"type": "function", "function": {"name": "f"}}},
        "tool_choice",
        "call a tool",
    ),
    "dimensions true": (EMBEDDINGS, "encoder", {"input": "dog", "dimensions": True}, "dimensions", "an integer"),
    "dimensions 10**30": (EMBEDDINGS, "encoder", {"input": "dog", "dimensions": 10**30}, "dimensions", "32"),
    # other fields of the wrong type, each a 500 inside transformers' handlers before
    "suffix a number": (COMPLETIONS, "gpt", {"prompt": "a", "suffix": 5}, "suffix", "cannot fill in"),
    "stream a text": (COMPLETIONS, "gpt", {"prompt": "a", "stream": "yes"}, "stream", "true or false"),
    "stream_options a number": (COMPLETIONS, "gpt", {"prompt": "a", "stream_options": 5}, "stream_options", "object"),
    "prompt token ids": (COMPLETIONS, "gpt", {"prompt": [1, 2]}, "prompt", "one text"),
    "tools a text": (CHAT, "chat", {"messages": HI, "tools": "x"}, "tools", "a list"),
    "tools of numbers": (CHAT, "chat", {"messages": HI, "tools": [1]}, "tools", "tool objects"),
    "role a number": (CHAT, "chat", {"messages": [{"role": 5, "content": "x"}]}, "messages", "messages[0].role"),
    "content a number": (CHAT, "chat", {"messages": [{"role": "user", "content": 5}]}, "messages", "content"),
    "content of numbers": (CHAT, "chat", {"messages": [{"role": "user", "content": [1]}]}, "messages", "content"),
    "text part without text": (
        CHAT,
        "chat",
        {"messages": [{"role": "user", "content": [{"type": "text"}]}]},
        "messages",
        "content",
    ),
    "message a text": (CHAT, "chat", {"messages": ["hi"]}, "messages", "messages[0]"),
    "tool call arguments not JSON": (
        CHAT,
        "chat",
        {"messages": [{"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": "{"}}]}, *HI]},
        "messages",
        "not OpenAI chat messages",
    ),
    "chat_template_kwargs a list": (
        CHAT,
        "chat",
        {"messages": HI, "chat_template_kwargs": [1]},
        "chat_template_kwargs",
        "",
    ),
    "chat_template_kwargs sets the template": (
        CHAT,
        "chat",
        {"messages": HI, "chat_template_kwargs": {"chat_template": LOOPING_TEMPLATE}},
        "chat_template_kwargs",
        "'chat_template'",
    ),
    "instructions a number": (RESPONSES, "chat", {"input": "hi", "instructions": 5}, "instructions", "a string"),
    "responses input a number": (RESPONSES, "chat", {"input": 5}, "input", "input must be"),
    "responses input of numbers": (RESPONSES, "chat", {"input": [5]}, "input", "input must be"),
    "embeddings user a number": (EMBEDDINGS, "encoder", {"input": "dog", "user": 5}, "user", "a string"),
    "encoding_format a number": (EMBEDDINGS, "encoder", {"input": "dog", "encoding_format": 5}, "encoding_format", ""),
    "encoding_format unknown": (
        EMBEDDINGS,
        "encoder",
        {"input": "dog", "encoding_format": "int8"},
        "encoding_format",
        "",
    ),
    "embeddings token arrays": (EMBEDDINGS, "encoder", {"input": [[1, 2], [3]]}, "input", "token ids"),
    "embeddings texts and numbers": (EMBEDDINGS, "encoder", {"input": ["dog", 2]}, "input", "list of texts"),
    # empty lists
    "no messages": (CHAT, "chat", {"messages": []}, "messages", "non-empty"),
    "no embedding inputs": (EMBEDDINGS, "encoder", {"input": []}, "input", "non-empty"),
    "no responses input": (RESPONSES, "chat", {"input": []}, "input", "input must be"),
    "no stops": (COMPLETIONS, "gpt", {"prompt": "a", "stop": []}, "stop", "stop must"),
    # a field the route does not take (transformers: a 422 without param)
    "unknown field": (COMPLETIONS, "gpt", {"prompt": "a", "tempreature": 1}, "tempreature", "Unknown field"),
    # texts too long for the context, refused by their characters before they are tokenized
    "prompt past the characters": (
        COMPLETIONS,
        "gpt",
        {"prompt": "x" * (64 * CHARS_PER_TOKEN_FLOOR + 1)},
        "prompt",
        "",
    ),
    "messages past the characters": (
        CHAT,
        "chat",
        {"messages": [{"role": "user", "content": "x" * 1500}] * 2},
        "messages",
        "characters",
    ),
    "embedding past the characters": (EMBEDDINGS, "encoder", {"input": ["dog", "dog " * 300]}, "input", "input[1]"),
    "translation past the characters": (COMPLETIONS, "seq2seq", {"prompt": "the " * 200}, "prompt", "characters"),
}


@pytest.mark.parametrize("case", BAD_REQUESTS)
def test_bad_request_is_400_naming_the_field(server, folders, case):
    route, model, body, param, words = BAD_REQUESTS[case]
    if isinstance(body, str):
        body = body.replace("{" + model + "}", folders[model])
    else:
        body = {"model": folders[model], **body}
    error = assert_openai_error(post(server.url, route, body), 400, param)
    assert words in error["message"], error
    assert httpx.get(server.url + "/health", timeout=60).json() == {"status": "ok"}


# ------------------------------------------------------------------------------------------------ request fields
SERVING_PAGE = Path(__file__).parents[2] / "docs" / "serving.md"
# What a request of the walk asks, beside the field it tries; BASE_FIELDS are these.
ASKED = {
    COMPLETIONS: {"prompt": "a", "max_tokens": 1},
    CHAT: {"messages": HI, "max_tokens": 1},
    RESPONSES: {"input": "hi", "max_output_tokens": 1},
}
WALK = [(route, name) for route in ROUTES for name in route_fields(route) if name not in BASE_FIELDS]


@pytest.mark.parametrize(("route", "name"), WALK)
def test_every_request_field_is_answered_as_the_table_says(server, folders, route, name):
    """The table of `serving.fields` as a real server answers it: a refused field's example is a 400 naming it and
    why, its values that ask for nothing (and null) answer 200; an honoured or accepted field's example answers
    200. Before, each refused example was answered 200 as if absent (or 500: penalties, an integer logit bias)."""
    row, value = route_fields(route)[name], example(route, name)
    assert value is not None, f"give {name} on {route} an example in field_examples.py"
    model = "tools" if name == "tools" else "gpt" if route == COMPLETIONS else "chat"
    body = {"model": folders[model], **ASKED[route]}
    answer = post(server.url, route, {**body, name: value})
    if row.answer == REFUSED:
        error = assert_openai_error(answer, 400, name)
        assert row.why in error["message"], error
        for asks_nothing in row.allowed:
            accepted = post(server.url, route, {**body, name: asks_nothing})
            assert accepted.status_code == 200, (asks_nothing, accepted.text)
    else:
        assert answer.status_code == 200 and '"error"' not in answer.text, answer.text


@pytest.mark.parametrize("route", ROUTES)
def test_null_is_not_set_for_every_field(server, folders, route):
    """Every field of the route set to null at once answers as if none were sent (`chat_template_kwargs: null` and,
    on /v1/responses, `parallel_tool_calls: null` were a 500 inside transformers' handlers)."""
    nulls = {name: None for name in route_fields(route) if name not in BASE_FIELDS}
    body = {"model": folders["gpt" if route == COMPLETIONS else "chat"], **ASKED[route]}
    answer = post(server.url, route, {**body, **nulls})
    assert answer.status_code == 200 and answer.text == answer.text.replace('"error"', ""), answer.text


# The fields this server takes beyond OpenAI's request schemas: transformers serve's free-form `generation_config`
# (refused, naming OpenAI's fields instead), the chat template's variables (vLLM's and transformers' name) and a
# seed for /v1/responses.
EXTENSIONS = {COMPLETIONS: {"generation_config"}, CHAT: {"generation_config", "chat_template_kwargs"}}
EXTENSIONS[RESPONSES] = {"generation_config", "seed"}


def test_the_table_holds_every_field_of_the_routes_schemas():
    """Every field of the request schemas the installed openai package publishes is in the table (a field a later
    openai adds is refused as unknown until it has a row), and nothing else but this server's extensions."""
    from openai.types import completion_create_params
    from openai.types.chat import completion_create_params as chat_create_params
    from openai.types.responses import response_create_params

    schemas = {
        COMPLETIONS: completion_create_params.CompletionCreateParamsStreaming,
        CHAT: chat_create_params.CompletionCreateParamsStreaming,
        RESPONSES: response_create_params.ResponseCreateParamsStreaming,
    }
    for route, schema in schemas.items():
        fields = schema.__required_keys__ | schema.__optional_keys__
        assert set(route_fields(route)) == fields | EXTENSIONS[route], route


def test_the_serving_page_shows_the_field_table():
    assert field_table() in SERVING_PAGE.read_text(encoding="utf-8")


def test_tools_reach_a_template_that_shows_them_and_responses_answer_json(server, folders):
    """A template that reads `tools` gets them (the prompt grows by their line); /v1/responses without `stream`
    answers one JSON object, as OpenAI's (transformers' server streamed it)."""
    body = {"model": folders["tools"], "messages": HI, "max_tokens": 1}
    plain = post(server.url, CHAT, body).json()["usage"]["prompt_tokens"]
    tools = post(server.url, CHAT, {**body, "tools": example(CHAT, "tools"), "tool_choice": "auto"})
    assert tools.json()["usage"]["prompt_tokens"] == plain + len("t: f\n")
    answer = post(server.url, RESPONSES, {"model": folders["chat"], "input": "hi", "max_output_tokens": 2})
    assert answer.headers["content-type"].startswith("application/json") and answer.json()["object"] == "response"


@pytest.mark.parametrize("stop", ["\n", "abcdef", ["é", "<pad>", "zz", "q"], "\u0000"])
@pytest.mark.parametrize(("route", "name"), [(COMPLETIONS, "letters"), (COMPLETIONS, "seq2seq"), (CHAT, "chat")])
def test_any_stop_string_is_answered(server, folders, route, name, stop):
    """Stop strings a vocabulary cannot spell, or holds only in part, stop nothing and fail nothing (transformers'
    criterion answered a 500, `substring not found`, on the "letters" vocabulary)."""
    body = {"model": folders[name], "max_tokens": 8, "stop": stop, "temperature": 0}
    body.update({"messages": HI} if route == CHAT else {"prompt": "ghost" if name == "letters" else "the cat"})
    for stream in (False, True):
        answer = post(server.url, route, {**body, "stream": stream})
        assert answer.status_code == 200, answer.text
        assert "error" not in answer.text and "finish_reason" in answer.text


def test_audio_transcription_is_a_400_naming_the_text_routes(server, folders):
    """No MiniTF family reads audio: the upload is refused, not parsed (a 500 without python-multipart)."""
    answer = httpx.post(
        server.url + "/v1/audio/transcriptions",
        files={"file": ("a.wav", b"RIFF0000WAVE")},
        data={"model": folders["gpt"]},
        timeout=60,
    )
    error = assert_openai_error(answer, 400, "model")
    assert "transcribes audio" in error["message"] and "/v1/completions" in error["message"]


def test_bodies_past_the_limit_answer_413_unparsed(server, folders):
    big = {"model": folders["encoder"], "input": ["dog " * 1000] * 20}
    error = assert_openai_error(post(server.url, EMBEDDINGS, big), 413, None)
    assert f"{BODY_LIMIT:,} bytes" in error["message"] and error["code"] == "request_too_large"

    def chunks():  # no Content-Length: httpx sends a generator chunked
        yield b'{"model": "x", "input": "'
        for _ in range(BODY_LIMIT // 4096 + 2):
            yield b"a" * 4096
        yield b'"}'

    chunked = httpx.post(server.url + EMBEDDINGS, content=chunks(), headers={"Content-Type": "application/json"})
    assert chunked.request.headers["transfer-encoding"] == "chunked"
    assert assert_openai_error(chunked, 413, None)["code"] == "request_too_large"
    assert post(server.url, EMBEDDINGS, {"model": folders["encoder"], "input": "dog"}).status_code == 200


def exchange(url: str, head: bytes, parts=()) -> tuple[int, dict]:
    """Send a request on a raw socket, all of it before reading (as urllib or `requests` do), then read the
    answer: its status and JSON body."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=60) as connection:
        connection.sendall(head)
        for part in parts:
            connection.sendall(part)
        answer = b""
        while b"\r\n\r\n" not in answer:
            answer += connection.recv(65536)
        head_lines, _, content = answer.partition(b"\r\n\r\n")
        length = next(
            int(line.split(b":")[1]) for line in head_lines.split(b"\r\n") if line.lower().startswith(b"content-length")
        )
        while len(content) < length:
            content += connection.recv(65536)
    return int(head_lines.split()[1]), json.loads(content)


def test_a_client_that_sends_its_whole_body_first_gets_the_413(server, folders):
    """5 MB past a 64 KB limit, sent whole before the answer is read: the client gets the 413 (before, the server
    closed with the body unread, and the reset lost the answer: ConnectionResetError in urllib), sized, chunked,
    or waiting for `100 Continue` (then it sends nothing)."""
    body = json.dumps({"model": folders["encoder"], "input": "dog " * 1_250_000}).encode()
    start = b"POST /v1/embeddings HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
    sized = start + b"Content-Length: %d\r\n\r\n" % len(body)
    chunks = [body[index : index + 65536] for index in range(0, len(body), 65536)]
    chunked = [b"%x\r\n%s\r\n" % (len(chunk), chunk) for chunk in chunks] + [b"0\r\n\r\n"]
    for head, parts in (
        (sized, [body]),
        (start + b"Transfer-Encoding: chunked\r\n\r\n", chunked),
        (start + b"Expect: 100-continue\r\nContent-Length: %d\r\n\r\n" % len(body), []),
    ):
        status, answer = exchange(server.url, head, parts)
        assert status == 413 and answer["error"]["code"] == "request_too_large", answer
        assert f"{BODY_LIMIT:,} bytes" in answer["error"]["message"]
    request = urllib.request.Request(server.url + EMBEDDINGS, data=body, headers={"Content-Type": "application/json"})
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=60)
    assert refused.value.code == 413 and json.loads(refused.value.read())["error"]["code"] == "request_too_large"
    assert post(server.url, EMBEDDINGS, {"model": folders["encoder"], "input": "dog"}).status_code == 200


def test_a_looping_chat_template_is_cut_while_the_server_answers(server, folders):
    answered = {}

    def looping_chat():
        answered["looping"] = post(server.url, CHAT, {"model": folders["looping"], "messages": HI})
        answered["looping at"] = time.monotonic()

    thread = threading.Thread(target=looping_chat)
    thread.start()
    time.sleep(0.2)  # the rendering has started
    models = httpx.get(server.url + "/v1/models", timeout=60)
    completion = post(server.url, COMPLETIONS, {"model": folders["gpt"], "prompt": "the", "max_tokens": 2})
    others_at = time.monotonic()
    thread.join()
    assert models.status_code == 200 and completion.status_code == 200, completion.text
    assert others_at < answered["looping at"]  # answered while the template was rendering
    error = assert_openai_error(answered["looping"], 400, "messages")
    assert folders["looping"] in error["message"] and "chat template" in error["message"]
    assert error["code"] == "chat_template_limit"
    chat = post(server.url, CHAT, {"model": folders["chat"], "messages": HI, "max_tokens": 2})
    assert chat.status_code == 200 and chat.json()["usage"]["completion_tokens"] == 2


def test_template_limits_stop_loops_and_output():
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    environment = ImmutableSandboxedEnvironment()
    writing = environment.from_string("{% for i in range(99999) %}{% for j in range(99999) %}x{% endfor %}{% endfor %}")
    with pytest.raises(TemplateLimitExceeded, match="more than 1,000 characters"), template_limits(60, 1000):
        writing.render()
    with pytest.raises(TemplateLimitExceeded, match="longer than 0.2 s"), template_limits(0.2, 10**9):
        environment.from_string(LOOPING_TEMPLATE).render(messages=[])
    chat = environment.from_string(CHAT_TEMPLATE)
    with template_limits(60, 1000):
        assert chat.render(messages=HI, add_generation_prompt=True) == "u: hi\na: "


def test_sigterm_lets_the_request_in_flight_finish(folders, tmp_path):
    """A streamed generation in flight when SIGTERM comes completes; new requests are not served meanwhile (the
    connection refused, or closed unanswered when the listening socket had already queued it); the process exits 0
    (uvicorn alone would die of the SIGTERM it raises again after draining)."""
    body = {"model": folders["rope"], "prompt": "the", "max_tokens": 200, "temperature": 0, "stream": True}
    with (
        server_process(
            [folders["rope"]], "--shutdown-grace", "120", "--engine", "torch", log=tmp_path / "server.log"
        ) as running,
        httpx.stream("POST", running.url + COMPLETIONS, json=body, timeout=120) as stream,
    ):
        lines = stream.iter_lines()
        first = next(line for line in lines if line.startswith("data: "))
        running.process.send_signal(signal.SIGTERM)
        refused = False
        for _ in range(100):
            try:
                httpx.get(running.url + "/health", timeout=5)
            except (httpx.ConnectError, httpx.RemoteProtocolError):
                refused = True
                break
            time.sleep(0.1)
        rest = [line for line in lines if line.startswith("data: ")]
        assert running.process.wait(timeout=120) == 0
    assert refused
    chunks = [json.loads(line[len("data: ") :]) for line in [first, *rest] if line != "data: [DONE]"]
    assert chunks[-1]["choices"][0]["finish_reason"] == "length"  # all 200 tokens (this model writes no end token)
    assert chunks[-1]["usage"]["completion_tokens"] == 200


# ------------------------------------------------------------------------------------------------ the API key
@pytest.mark.parametrize(
    ("arguments", "environment", "words"),
    [
        (["--api-key", ""], {}, "--api-key is empty"),
        (["--api-key", "   "], {}, "only spaces"),
        ([], {"MINITF_API_KEY": " \t"}, "MINITF_API_KEY is only spaces"),
        (["--api-key", "two words"], {}, "printable ASCII without spaces"),
    ],
)
def test_an_empty_or_unusable_key_is_an_error(tmp_path, capsys, monkeypatch, arguments, environment, words):
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    status, _, err = run_cli(["serve", tmp_path / "never-loaded", *arguments], capsys)
    assert status == 2 and err.count("\n") == 1 and words in err and "Traceback" not in err, err


def test_no_key_off_loopback_warns(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("MINITF_API_KEY", raising=False)
    status, _, err = run_cli(["serve", tmp_path / "absent", "--host", "0.0.0.0"], capsys)
    assert status == 2 and "WARNING: no API key, listening on 0.0.0.0: anyone" in err.splitlines()[0], err
    status, _, err = run_cli(["serve", tmp_path / "absent", "--host", "::1"], capsys)
    assert "WARNING" not in err
    status, _, err = run_cli(["serve", tmp_path / "absent", "--host", "0.0.0.0", "--api-key", "k"], capsys)
    assert "WARNING" not in err


# ------------------------------------------------------------------------------------------------ the worker
def test_a_failed_generation_fails_its_requests_and_the_worker_goes_on(tmp_path, monkeypatch):
    """A model error fails the request (or batch) it happened in; the worker then generates the next one, also when
    the event loop that asked has closed before the worker handed over the end (each asyncio.run here closes its
    loop: the worker's thread died on that and the next request waited forever)."""
    from transformers import AutoModelForCausalLM

    from hf_minitf.serving.generation import ModelWorker
    from hf_minitf.serving.models import ServedModel
    from hf_minitf.serving.requests import GenerationRequest

    folder = make_gpt(tmp_path / "gpt")
    model, tokenizer = AutoModelForCausalLM.from_pretrained(folder).eval(), AutoTokenizer.from_pretrained(folder)
    worker = ModelWorker(ServedModel("gpt", "gpt", model, tokenizer, config=model.config), max_batch=4)
    prompt = tokenizer("the qu")["input_ids"]

    async def complete() -> list[int]:
        generation = worker.submit(GenerationRequest(worker.served, COMPLETIONS, prompt, 5))

        async def collect() -> list[int]:
            return [token async for ids in generation.tokens() for token in ids]

        return await asyncio.wait_for(collect(), timeout=120)  # a worker that died fails here instead of hanging

    def broken(self, *args, **kwargs):
        raise RuntimeError("injected model error")

    try:
        before = asyncio.run(complete())
        with monkeypatch.context() as patch:
            patch.setattr(type(model), "forward", broken)
            with pytest.raises(RuntimeError, match="injected model error"):
                asyncio.run(complete())
        assert asyncio.run(complete()) == before and len(before) == 5
    finally:
        worker.close()


def test_a_tokenizer_that_does_not_match_its_model_is_refused_before_the_model_runs(tmp_path):
    """The model's forward pass reads no id (a host sync per step), so the server checks the prompt's ids: a
    tokenizer giving ids past the model's vocabulary is an error naming the id and the size, and nothing runs."""
    import copy

    from transformers import AutoModelForCausalLM

    from hf_minitf.serving.errors import RequestError
    from hf_minitf.serving.models import ServedModel, ServedModels
    from hf_minitf.serving.requests import completion_request

    folder = make_gpt(tmp_path / "gpt")
    model, tokenizer = AutoModelForCausalLM.from_pretrained(folder).eval(), AutoTokenizer.from_pretrained(folder)
    config = copy.deepcopy(model.config)
    config.vocab_size = 4  # the tokenizer's ids for "the qu" lie past it
    served = ServedModels([ServedModel("gpt", "gpt", model, tokenizer, config=config)])
    first_id = next(token for token in tokenizer("the qu")["input_ids"] if token >= 4)
    with pytest.raises(RequestError) as refused:
        asyncio.run(completion_request({"model": "gpt", "prompt": "the qu", "max_tokens": 2}, served))
    assert refused.value.status == 500
    assert f"token id {first_id}, outside its model's vocabulary (vocab_size=4)" in refused.value.message
    config.vocab_size = model.config.vocab_size
    request = asyncio.run(completion_request({"model": "gpt", "prompt": "the qu", "max_tokens": 2}, served))
    assert request.prompt_ids == tokenizer("the qu")["input_ids"]
