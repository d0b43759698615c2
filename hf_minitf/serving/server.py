"""`minitf serve`: model folders behind an OpenAI-compatible HTTP API of its own (FastAPI), on public interfaces
only: transformers' `generate()` with a streamer, the Auto classes, SentenceTransformer, and the engines of export
folders (ONNX Runtime, CTranslate2).

A request reads top to bottom from its route below: the body is parsed once into a `GenerationRequest`
(`serving.requests`: every check, each failure a 4xx in OpenAI's shape), the model's worker generates it
(`serving.generation`: `generate()` with the request's own generation config, logits processors and stopping
criteria), and the answer is written as the tokens come (`serving.answers`). Embeddings are encoded in shared
batches (`serving.embeddings`). Around every route: OpenAI-shaped errors, an optional API key, a limit on the body's
size (`serving.errors`); on SIGTERM the requests in flight finish for up to `shutdown_grace` seconds while new
connections are refused, then the process exits 0.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
from collections.abc import AsyncIterator, Sequence
from typing import Any

from fastapi import FastAPI

from hf_minitf.catalog.engines import AUTO
from hf_minitf.catalog.limits import MAX_BATCH, MAX_REQUEST_BYTES, SHUTDOWN_GRACE_SECONDS
from hf_minitf.serving.answers import answer
from hf_minitf.serving.embeddings import add_embeddings_route
from hf_minitf.serving.errors import RequestError, install_openai_errors, limit_request_bytes, require_api_key
from hf_minitf.serving.generation import ModelWorker
from hf_minitf.serving.models import ServedModel, ServedModels, load_model
from hf_minitf.serving.requests import chat_request, completion_request, responses_request


def load_served_models(
    sources: Sequence[str],
    dtype: str = "auto",
    device: str = "auto",
    trust_remote_code: bool = False,
    engine: str = AUTO,
) -> list[ServedModel]:
    """Each source loaded to serve, once (a source given twice is an error), on the engine `engine` chooses
    (`serving.engine_cache.choose_engine`: auto, torch, onnx, ctranslate2)."""
    served: list[ServedModel] = []
    for source in map(str, sources):
        if any(model.name == source for model in served):
            raise ValueError(f"{source} is given twice; give each model once.")
        served.append(
            load_model(source, dtype=dtype, device=device, trust_remote_code=trust_remote_code, engine=engine)
        )
    return served


def build_app(
    sources: Sequence[str],
    *,
    dtype: str = "auto",
    device: str = "auto",
    continuous_batching: bool = False,
    max_batch_size: int = MAX_BATCH,
    api_key: str | None = None,
    trust_remote_code: bool = False,
    max_request_bytes: int = MAX_REQUEST_BYTES,
    engine: str = AUTO,
) -> FastAPI:
    """The app of `minitf serve` for `sources`: completions, chat and responses for GPTs (completions for
    translators), embeddings for encoders, the model list and /health; bodies of at most `max_request_bytes`; with
    `api_key` (not empty), a key every route requires. With `continuous_batching`, up to `max_batch_size` concurrent
    greedy requests to a GPT are generated together (in torch). `engine` (auto, torch, onnx, ctranslate2) picks what
    runs each MiniTF folder's greedy requests (`serving.engine_cache.choose_engine`)."""
    if not sources:
        raise ValueError("give at least one model folder or Hub repo id to serve")
    loaded = load_served_models(sources, dtype=dtype, device=device, trust_remote_code=trust_remote_code, engine=engine)
    models = ServedModels(loaded)
    workers = {
        name: ModelWorker(served, max_batch=max_batch_size if continuous_batching else 1)
        for name, served in models.models.items()
        if served.family != "encoder"
    }

    @contextlib.asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        yield
        for worker in workers.values():
            worker.close()

    app = FastAPI(title="minitf serve", lifespan=lifespan)
    app.state.models, app.state.workers = models, workers

    @app.post("/v1/completions")
    async def completions(body: dict) -> Any:
        request = await completion_request(body, models)
        return await answer(workers[request.served.name].submit(request))

    @app.post("/v1/chat/completions")
    async def chat_completions(body: dict) -> Any:
        request = await chat_request(body, models)
        return await answer(workers[request.served.name].submit(request))

    @app.post("/v1/responses")
    async def responses(body: dict) -> Any:
        request = await responses_request(body, models)
        return await answer(workers[request.served.name].submit(request))

    @app.post("/v1/audio/transcriptions")
    async def transcriptions() -> Any:
        """No MiniTF family reads audio: refused without reading the upload."""
        raise RequestError(
            400,
            "No model served here transcribes audio: minitf serve serves text models (GPTs, encoders, translation "
            "models). Send text to /v1/completions, /v1/chat/completions or /v1/embeddings.",
            param="model",
        )

    @app.get("/v1/models")
    async def list_models() -> dict:
        return models.listing()

    @app.get("/health")
    async def health() -> dict:
        return {"status": "ok"}

    add_embeddings_route(app, models)
    install_openai_errors(app)
    if api_key is not None:
        require_api_key(app, api_key)
    limit_request_bytes(app, max_request_bytes)
    return app


def serve(
    sources: Sequence[str],
    host: str = "127.0.0.1",
    port: int = 8000,
    log_level: str = "info",
    shutdown_grace: int = SHUTDOWN_GRACE_SECONDS,
    **options,
) -> None:
    """Serve `sources` over HTTP until interrupted (options: those of `build_app`). On SIGTERM or Ctrl-C, uvicorn
    stops accepting connections, lets the requests in flight finish for up to `shutdown_grace` seconds, cancels
    the rest and returns; after SIGTERM this returns normally (exit status 0)."""
    import uvicorn

    app = build_app(sources, **options)
    print(startup_line(app.state.models, host, port), file=sys.stderr, flush=True)
    # uvicorn raises the SIGTERM it handled again once it has stopped, which would kill the process (status -15)
    # after a clean shutdown: while it runs, that second delivery finds this no-op handler.
    main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _stopped) if main_thread else None
    try:
        uvicorn.run(app, host=host, port=port, log_level=log_level, timeout_graceful_shutdown=shutdown_grace)
    finally:
        if main_thread:
            signal.signal(signal.SIGTERM, previous)


def startup_line(models: ServedModels, host: str, port: int) -> str:
    """What `minitf serve` says once its models are loaded: where it listens, each model with what runs it, and the
    transformers it runs on (with a warning where that is outside the tested range)."""
    import transformers

    from hf_minitf.catalog.packaging import version_warning

    served = "; ".join(f"{name} ({model.family}, {_runs_on(model)})" for name, model in models.models.items())
    warning = version_warning()
    line = f"minitf serve: http://{host}:{port} serves {served}; transformers {transformers.__version__}"
    return line if warning is None else f"{line}. WARNING: {warning}"


def _runs_on(model: ServedModel) -> str:
    """Which engine answers a served model's requests, and why."""
    if model.runner is None:
        return model.why or model.engine
    rest = "stops, penalties, sampling and --continuous-batching batches" if model.family != "encoder" else ""
    return f"{model.why}; torch for {rest}" if rest else model.why


def _stopped(_signal_number: int, _frame) -> None:
    """SIGTERM delivered again by uvicorn after its graceful shutdown: the server has already stopped."""


__all__ = ["build_app", "load_served_models", "serve", "startup_line"]
