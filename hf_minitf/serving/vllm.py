"""`minitf serve SRC --engine vllm`: a GPT on vLLM's OpenAI-compatible server, behind a small front that answers
as the default engine does: the same names, API key, checks and errors.

    client -> front (this process: checks, API key, names) -> vLLM's server (its own Python, loopback port)
                                                           -> `minitf serve` default engine (other families)

`serve_with_vllm` puts the pieces together: vLLM's Python and environment (`serving.vllm_environment`), the model
vLLM is given and its command line (`serving.vllm_model`), the front (`serving.vllm_front`), the servers'
subprocesses (`serving.process`). Encoders and translation models stay on the default engine, in a `minitf serve`
subprocess the front routes their requests to, so one `minitf serve GPT ENCODER --engine vllm` serves both on one
port.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from hf_minitf.catalog.limits import MAX_REQUEST_BYTES
from hf_minitf.serving import API_KEY_VARIABLE
from hf_minitf.serving.process import free_port, running
from hf_minitf.serving.vllm_environment import (
    INSTALL_HINT,
    KV_CACHE_VARIABLE,
    VLLM_PYTHON_VARIABLE,
    VllmUnavailable,
    cpu_kv_cache_gib,
    find_vllm_python,
    vllm_environment,
)
from hf_minitf.serving.vllm_front import Backend, build_front_app
from hf_minitf.serving.vllm_model import VllmModel, prepare_model, split_sources, vllm_command

# How long vLLM may take to load the model and warm up (minutes on a busy CPU) before the start is given up.
START_TIMEOUT_S = 900


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
        environment = vllm_environment(vllm.key)
        stack.enter_context(running(command, environment, vllm.url, vllm.key, "vLLM's server", START_TIMEOUT_S))
        others = None
        if other_sources:
            others = Backend(f"http://127.0.0.1:{free_port()}", secrets.token_urlsafe(24), other_sources)
            default_engine = [sys.executable, "-m", "hf_minitf.cli", "serve", *other_sources,
                              "--port", others.url.rsplit(":", 1)[1], "--log-level", log_level,
                              "--dtype", dtype]  # fmt: skip
            if trust_remote_code:
                default_engine.append("--trust-remote-code")
            environment = {**os.environ, API_KEY_VARIABLE: others.key}
            what = "the default engine's server"
            stack.enter_context(running(default_engine, environment, others.url, others.key, what, START_TIMEOUT_S))
        front = build_front_app(model, vllm, others, api_key, max_request_bytes=max_request_bytes)
        uvicorn.run(front, host=host, port=port, log_level=log_level)


__all__ = [
    "INSTALL_HINT",
    "KV_CACHE_VARIABLE",
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
