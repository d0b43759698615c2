"""`minitf serve SRC...`: model folders behind transformers' OpenAI-compatible server (hf_minitf.serving.server)."""

from __future__ import annotations

import argparse

from hf_minitf.catalog.limits import DTYPE_NAMES
from hf_minitf.commands.common import CommandError, count, port_number, quiet_transformers, reports_errors

HELP = "serve model folders over an OpenAI-compatible HTTP API (transformers' server)"
DESCRIPTION = """\
Serve model folders over an OpenAI-compatible HTTP API, on transformers' own server (`transformers serve`):
the same routes, request and response schemas and streaming.

- a GPT folder (saved, trained, converted, a native GPT-2/GPT-NeoX folder, or a Hub repo id) answers
  POST /v1/completions, and POST /v1/chat/completions and /v1/responses when its tokenizer has a chat template
  (without one: HTTP 400 pointing to /v1/completions);
- an encoder folder answers POST /v1/embeddings (concurrent requests are encoded in shared batches);
- a seq2seq (translation) folder answers POST /v1/completions, the prompt being the text to translate.
GET /v1/models lists the served models (named as given here), GET /health answers {"status": "ok"}.
Errors answer HTTP 4xx in OpenAI's error shape. See docs/serving.md for curl and openai-client examples."""


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
        help="generate for concurrent requests together (transformers' continuous batching with "
        "paged attention) instead of one request after another",
    )
    parser.add_argument(
        "--cb-num-blocks",
        type=count,
        default=None,
        help="KV cache size for continuous batching, in blocks of 256 tokens (default: 32 on a CPU, "
        "from the free memory on a GPU)",
    )
    parser.add_argument(
        "--cb-max-batch-tokens",
        type=count,
        default=None,
        help="most tokens in one continuous batching step (default: transformers')",
    )
    parser.add_argument(
        "--api-key",
        default=None,
        help="require `Authorization: Bearer KEY` on every route (default: the MINITF_API_KEY "
        "environment variable; none when unset)",
    )
    parser.add_argument(
        "--trust-remote-code",
        action="store_true",
        help="run the model code a folder or repo ships (not needed for MiniTF folders with hf_minitf installed)",
    )
    parser.add_argument(
        "--log-level",
        default="info",
        choices=("critical", "error", "warning", "info", "debug"),
        help="server log level (default: info)",
    )


@reports_errors("serve")
def run(args: argparse.Namespace) -> int:
    """`minitf serve`: the models behind transformers' OpenAI-compatible server (hf_minitf.serving.server)."""
    import os

    try:
        from hf_minitf.serving import API_KEY_VARIABLE
        from hf_minitf.serving.server import serve
    except ImportError as error:  # transformers' serving code or its packages are missing: the message says which
        raise CommandError(str(error)) from error

    quiet_transformers()
    serve(
        args.models,
        host=args.host,
        port=args.port,
        log_level=args.log_level,
        dtype=args.dtype,
        device=args.device,
        continuous_batching=args.continuous_batching,
        cb_num_blocks=args.cb_num_blocks,
        cb_max_batch_tokens=args.cb_max_batch_tokens,
        trust_remote_code=args.trust_remote_code,
        api_key=args.api_key or os.environ.get(API_KEY_VARIABLE) or None,
    )
    return 0
