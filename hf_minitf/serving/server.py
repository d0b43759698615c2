"""`minitf serve`: model folders behind transformers' own OpenAI-compatible server (`transformers serve`).

The app is the one `transformers.cli.serving.build_server` builds: its routes, request and response schemas,
streaming, continuous batching, `/v1/models` and `/health`. This module adds only what that server lacks for
these folders, by subclassing its parts (nothing in transformers is patched):

- `ServedModelManager`: transformers' model manager limited to the folders given to `minitf serve`, loading
  classes registered with the Auto classes (transformers' own resolves `getattr(transformers,
  config.architectures[0])`, which no registered class is);
- request checks before generation (the model name, `max_tokens` against the context, an empty prompt, chat
  messages for a tokenizer without a chat template, sampling numbers in OpenAI's ranges, fields the server would
  silently ignore), answered with HTTP 4xx instead of a 500 from inside `generate()`;
- sampling as asked: `temperature` > 0 samples (transformers' server keeps the model's `do_sample=False`);
- `stop` as OpenAI answers it: the text ends before the first stop string, streamed too (`serving.stops`);
- `/v1/completions` for translation folders (the prompt is the source text) and `POST /v1/embeddings` for
  embedding folders (`serving.embeddings`);
- errors in OpenAI's shape (`{"error": {"message", "type", "param", "code"}}`) and an optional API key that every
  route requires;
- bounded work per request: a body past `max_request_bytes` answers 413 before it is read, a text too long for the
  context is refused before it is tokenized, chat templates render on a worker thread within a time and size limit
  (`serving.templates`), and tokenizing runs off the event loop;
- on SIGTERM, the requests in flight finish for up to `shutdown_grace` seconds while new connections are refused;
  then the process exits 0.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

from fastapi import FastAPI
from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

from hf_minitf.catalog.limits import MAX_REQUEST_BYTES, SHUTDOWN_GRACE_SECONDS
from hf_minitf.engines import export_info
from hf_minitf.serving import API_KEY_VARIABLE
from hf_minitf.serving.api import SystemOneHandler
from hf_minitf.serving.api import model_manager as _model_manager
from hf_minitf.serving.api import server as _server
from hf_minitf.serving.errors import install_openai_errors, limit_request_bytes, require_api_key
from hf_minitf.serving.family import served_config
from hf_minitf.serving.models import ServedModel, ServedModelManager, model_family
from hf_minitf.serving.requests import ChatCompletions, Completions, Responses, Transcriptions
from hf_minitf.serving.stops import GenerationState

# The continuous-batching KV cache on a CPU: transformers sizes it from the free memory of the device, which on a
# CPU is the whole RAM (tens of GB allocated, a minute spent). This many pages of 256 tokens is plenty for small models.
CPU_CB_NUM_BLOCKS = 32


def _device(device: str) -> str:
    if device != "auto":
        return device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def load_served_models(
    sources: Sequence[str], dtype: str = "auto", device: str = "auto", trust_remote_code: bool = False
) -> list[ServedModel]:
    """Each source's family and, for the families transformers' manager does not load, the model itself."""
    import torch

    served, keys = [], set()
    for source in sources:
        source = str(source)
        key = _model_manager.ModelManager.process_model_name(source)
        if key in keys:
            raise ValueError(f"{source} is given twice; give each model once.")
        keys.add(key)
        export = export_info(source) if Path(source).is_dir() else None
        if export is not None and export.get("engine") == "ctranslate2":  # an ONNX export is a whole ST folder too
            raise ValueError(
                f"cannot serve {source}: it is an engine export ({export.get('engine')} "
                f"{export.get('kind')}), which minitf generate, translate or embed run; serve the MiniTF "
                f"folder it was exported from ({export.get('source', 'the one given to minitf export')})"
            )
        config = served_config(source, trust_remote_code)
        model = ServedModel(name=source, key=key, family=model_family(config), config=config)
        torch_dtype = None if dtype == "auto" else getattr(torch, dtype)
        if model.family == "encoder":
            from sentence_transformers import SentenceTransformer  # heavy: imported when an encoder is served

            model.model = SentenceTransformer(
                source,
                device=_device(device),
                trust_remote_code=trust_remote_code,
                model_kwargs={"dtype": torch_dtype} if torch_dtype else None,
            )
            model.tokenizer = model.model.tokenizer
        elif model.family == "seq2seq":
            model.model = (
                AutoModelForSeq2SeqLM.from_pretrained(
                    source, dtype=torch_dtype or "auto", trust_remote_code=trust_remote_code
                )
                .to(_device(device))
                .eval()
            )
            model.tokenizer = AutoTokenizer.from_pretrained(source, trust_remote_code=trust_remote_code)
        served.append(model)
    return served


def build_app(
    sources: Sequence[str],
    *,
    dtype: str = "auto",
    device: str = "auto",
    continuous_batching: bool = False,
    cb_num_blocks: int | None = None,
    cb_max_batch_tokens: int | None = None,
    api_key: str | None = None,
    trust_remote_code: bool = False,
    max_request_bytes: int = MAX_REQUEST_BYTES,
) -> FastAPI:
    """The server of `minitf serve`: transformers' app (as `transformers serve` builds it) for `sources`, with
    /v1/embeddings, OpenAI-shaped errors, bodies of at most `max_request_bytes` and, with `api_key` (not empty),
    a key every route requires."""
    from transformers import ContinuousBatchingConfig

    from hf_minitf.serving.embeddings import add_embeddings_route

    if not sources:
        raise ValueError("give at least one model folder or Hub repo id to serve")
    served = load_served_models(sources, dtype=dtype, device=device, trust_remote_code=trust_remote_code)
    manager = ServedModelManager(
        served, device=device, dtype=dtype, trust_remote_code=trust_remote_code, continuous_batching=continuous_batching
    )
    if cb_num_blocks is None and _device(device) == "cpu":
        cb_num_blocks = CPU_CB_NUM_BLOCKS
    cb_options: dict[str, Any] = {
        key: value
        for key, value in {"num_blocks": cb_num_blocks, "max_batch_tokens": cb_max_batch_tokens}.items()
        if value is not None
    }
    state = GenerationState(
        continuous_batching=continuous_batching,
        cb_config=ContinuousBatchingConfig(**cb_options) if cb_options else None,
    )
    app = _server.build_server(
        manager,
        ChatCompletions(manager, state),
        completion_handler=Completions(manager, state),
        response_handler=Responses(manager, state),
        transcription_handler=Transcriptions(manager, state),
        systemone_handler=SystemOneHandler(manager, state),
        generation_state=state,
    )
    _stops_generation_at_shutdown(app, state)
    add_embeddings_route(app, manager)
    install_openai_errors(app)
    if api_key is not None:
        require_api_key(app, api_key)
    limit_request_bytes(app, max_request_bytes)
    return app


def _stops_generation_at_shutdown(app: FastAPI, state: GenerationState) -> None:
    """transformers' app shuts its models down when it stops, but not its generation managers: the continuous
    batch's thread (not a daemon) kept the process alive after SIGTERM had stopped the server."""
    inner = app.router.lifespan_context

    @contextlib.asynccontextmanager
    async def lifespan(app: Any) -> AsyncIterator[Any]:
        try:
            async with inner(app) as value:
                yield value
        finally:
            state.shutdown()

    app.router.lifespan_context = lifespan


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
    # uvicorn raises the SIGTERM it handled again once it has stopped, which would kill the process (status -15)
    # after a clean shutdown: while it runs, that second delivery finds this no-op handler.
    main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _stopped) if main_thread else None
    try:
        uvicorn.run(app, host=host, port=port, log_level=log_level, timeout_graceful_shutdown=shutdown_grace)
    finally:
        if main_thread:
            signal.signal(signal.SIGTERM, previous)


def _stopped(_signal_number: int, _frame) -> None:
    """SIGTERM delivered again by uvicorn after its graceful shutdown: the server has already stopped."""


__all__ = ["API_KEY_VARIABLE", "build_app", "load_served_models", "serve"]
