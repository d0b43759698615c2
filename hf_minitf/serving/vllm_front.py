"""The front of `minitf serve --engine vllm`: the app clients talk to, which answers as the default engine does
(the same names, API key, checks and errors) and forwards to vLLM's server or to the default engine's.

    client -> front (checks, API key, names) -> vLLM's server (its own Python, loopback port)
                                             -> `minitf serve` default engine (other families)

The front checks what the default engine checks itself (the model name, `max_tokens` against the context, an empty
prompt or messages, a chat request to a tokenizer without a chat template, logit bias keys, and the request fields
of `serving.fields`' table that vLLM would silently ignore) and answers those with the same 4xx errors; it decodes
greedily, as the default engine and `generate()` do, a request that sets neither `temperature` nor `top_p` for a
folder whose generation config does not sample. Everything else is vLLM's.
"""

# No `from __future__ import annotations`: FastAPI resolves the routes' `Request` annotations at definition,
# and Request is imported inside build_front_app (fastapi is needed only to serve).
import asyncio
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from hf_minitf.catalog.families import FAMILIES
from hf_minitf.catalog.limits import MAX_REQUEST_BYTES
from hf_minitf.serving.vllm_model import VllmModel


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

    from hf_minitf.serving.checks import (
        chars_per_token,
        check_chat_template,
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
    from hf_minitf.serving.models import model_owner
    from hf_minitf.serving.templates import render_chat, template_messages

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
        check_chat_template(model.tokenizer, model.name, route)
        check_messages(body.get("messages"))
        messages = body["messages"]
        check_text_length(
            text_chars(messages), model.context_limit, longest_token, model.name, "messages", "The messages' text"
        )
        variables = body.get("chat_template_kwargs") or {}
        ids = await render_chat(model.tokenizer, model.name, template_messages(messages), None, variables)
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
        entries = [{"id": model.name, "object": "model", "created": 0, "owned_by": model_owner(model.name)}]
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


__all__ = ["Backend", "build_front_app"]
