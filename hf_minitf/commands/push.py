"""`minitf push DIR REPO_ID`: upload a model folder with its card to the Hub, its native export with GGUF files, or
its web page as a static Space (hf_minitf.hub.push; an export then its upload: hf_minitf.publishing)."""

from __future__ import annotations

import argparse
from pathlib import Path

from hf_minitf.catalog.limits import GGUF_DTYPES
from hf_minitf.catalog.publishing import CARRIED_LICENSE_DEFAULT, TRAINING_BYPRODUCTS
from hf_minitf.catalog.verification import NO_VERIFY_HELP
from hf_minitf.commands.common import CommandError, add_license, forwarded, reports_errors, say

HELP = "upload a model folder with its card to the Hugging Face Hub"
DESCRIPTION = (
    "Upload a model folder, with its model card, to the Hugging Face Hub. The folder is checked first: config.json "
    "and safetensors weights, no pickles or training state. What a trainer leaves beside the model "
    f"({', '.join(TRAINING_BYPRODUCTS)}) is left out, each named on stderr."
)
# The options of every upload, by the names of the parameters of push_folder, push_native and push_space.
HUB_OPTIONS = ("private", "revision", "license", "commit_message", "token")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "folder",
        type=Path,
        metavar="DIR",
        help="a folder written by save_pretrained, a training command or minitf convert",
    )
    parser.add_argument(
        "repo_id", metavar="REPO_ID", help="the model repo (with --space: the Space) to push to, as namespace/name"
    )
    parser.add_argument("--private", action="store_true", help="create the repo as private (if it does not exist)")
    parser.add_argument(
        "--revision",
        default=None,
        metavar="REV",
        help="branch to push to (created from main if missing; default: main)",
    )
    add_license(parser, CARRIED_LICENSE_DEFAULT)
    parser.add_argument("--commit-message", default=None, metavar="TEXT", help="message of the Hub commit")
    parser.add_argument(
        "--token", default=None, help="Hub token with write access (default: the logged-in token or HF_TOKEN)"
    )
    parser.add_argument(
        "--native",
        action="store_true",
        help="upload the model exported to its native transformers architecture (`minitf export "
        "native`: loads without trust_remote_code) instead of the MiniTF folder",
    )
    parser.add_argument(
        "--gguf",
        default=None,
        metavar="TYPES",
        help="with --native, GPT only: also upload GGUF files for llama.cpp and Ollama, of these "
        f"comma-separated types ({', '.join(GGUF_DTYPES)}), e.g. f16,q8_0",
    )
    parser.add_argument(
        "--space",
        action="store_true",
        help="upload a web page running the model in the browser to the static Space REPO_ID instead of a model "
        "repo: DIR is a GPT or encoder folder (exported with `minitf export web` first) or such a page",
    )
    parser.add_argument(
        "--example",
        action="append",
        default=[],
        metavar="TEXT",
        help="with --space: text put in the page's boxes (repeat it), as `minitf export web --example`",
    )
    parser.add_argument("--no-verify", action="store_true", help=f"with --native or --space: {NO_VERIFY_HELP}")


@reports_errors("push")
def run(args: argparse.Namespace) -> int:
    """`minitf push DIR REPO_ID [--native [--gguf TYPES] | --space]`: upload the folder with its card, its native
    export with GGUF files beside it, or its web page to a static Space (hf_minitf.hub.push, hf_minitf.publishing)."""
    from hf_minitf.commands.verify import verify_before_push
    from hf_minitf.hub.push import push_folder
    from hf_minitf.publishing import push_native, push_space

    gguf = tuple(dtype.strip() for dtype in args.gguf.split(",") if dtype.strip()) if args.gguf else ()
    if gguf and not args.native:
        raise CommandError("--gguf adds GGUF files to a native export: pass --native with it.")
    unknown = [dtype for dtype in gguf if dtype not in GGUF_DTYPES]
    if unknown:
        raise CommandError(
            f"--gguf {args.gguf}: unknown type(s) {', '.join(unknown)}; choose from {', '.join(GGUF_DTYPES)}."
        )
    if args.space and args.native:
        raise CommandError("--space uploads a web page, --native a model repo: pass one of them.")
    if args.example and not args.space:
        raise CommandError("--example fills the web page's boxes: pass --space with it.")
    check = None if args.no_verify else verify_before_push(args.folder, args.repo_id)
    hub = forwarded(args, *HUB_OPTIONS)
    if args.space:
        url = push_space(args.folder, args.repo_id, examples=tuple(args.example), check=check, **hub)
    elif args.native:
        url = push_native(args.folder, args.repo_id, gguf_dtypes=gguf, check=check, **hub)
    else:
        url = push_folder(args.folder, args.repo_id, note=lambda line: say("push", "note", line), **hub)
    print(f"Pushed {args.folder} to {args.repo_id}: {url}")
    return 0
