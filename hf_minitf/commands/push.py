"""`minitf push DIR REPO_ID`: upload a model folder with its card to the Hub, its native export with GGUF files, or
its web page as a static Space (hf_minitf.hub.push; an export then its upload: hf_minitf.publishing)."""

from __future__ import annotations

import argparse
from pathlib import Path

from hf_minitf.catalog.limits import GGUF_DTYPES
from hf_minitf.catalog.publishing import (
    ALL_RUNTIMES_GGUF_DTYPES,
    CARRIED_LICENSE_DEFAULT,
    RUNTIME_REPO_SUFFIXES,
    TRAINING_BYPRODUCTS,
)
from hf_minitf.catalog.verification import NO_VERIFY_HELP
from hf_minitf.commands.common import CommandError, add_license, forwarded, reports_errors, say
from hf_minitf.hub.sources import REPO_ID

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
        f"comma-separated types ({', '.join(GGUF_DTYPES)}), e.g. f16,q8_0; with --all-runtimes, the types of the "
        f"GGUF repo (default: {','.join(ALL_RUNTIMES_GGUF_DTYPES)})",
    )
    parser.add_argument(
        "--all-runtimes",
        action="store_true",
        help="upload every runtime's export, each verified, to its own place: the native folder to REPO_ID, GGUF "
        f"files (a GPT's with its Ollama Modelfile) to REPO_ID{RUNTIME_REPO_SUFFIXES['gguf']}, the ONNX folder to "
        f"REPO_ID{RUNTIME_REPO_SUFFIXES['onnx']}, the CTranslate2 folder to "
        f"REPO_ID{RUNTIME_REPO_SUFFIXES['ctranslate2']}, the web page to the static Space REPO_ID (what the model's "
        "family has; a GGUF type that needs llama.cpp's quantizer is left out, with a line, where it is not "
        "installed); nothing is uploaded unless every export passes",
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
    parser.add_argument(
        "--no-verify", action="store_true", help=f"with --native, --space or --all-runtimes: {NO_VERIFY_HELP}"
    )
    parser.add_argument(
        "--source-repo",
        default=None,
        metavar="REPO_ID",
        help="with --native or --all-runtimes: the Hub repo DIR itself was pushed to (`minitf push DIR REPO_ID`), "
        "named as the native card's base_model (the other runtimes' cards name the native repo); without it the "
        "card names no source repo, and never a local folder",
    )
    parser.add_argument(
        "--verbose",
        action="store_true",
        help="show the progress bars and notes of the models the export and its verification load (hidden by default)",
    )


@reports_errors("push")
def run(args: argparse.Namespace) -> int:
    """`minitf push DIR REPO_ID [--native [--gguf TYPES] | --space | --all-runtimes [--gguf TYPES]]`: upload the folder
    with its card, its native export with GGUF files beside it, its web page to a static Space, or every runtime's
    export to its own repo (hf_minitf.hub.push, hf_minitf.publishing)."""
    from hf_minitf.commands.verify import verify_before_push
    from hf_minitf.hub.push import push_folder
    from hf_minitf.publishing import push_all_runtimes, push_native, push_space

    gguf = tuple(dtype.strip() for dtype in args.gguf.split(",") if dtype.strip()) if args.gguf else ()
    if args.all_runtimes and (args.native or args.space):
        raise CommandError("--all-runtimes uploads the native folder and the web page too: drop --native / --space.")
    if gguf and not (args.native or args.all_runtimes):
        raise CommandError("--gguf adds GGUF files to a native export: pass --native (or --all-runtimes) with it.")
    unknown = [dtype for dtype in gguf if dtype not in GGUF_DTYPES]
    if unknown:
        raise CommandError(
            f"--gguf {args.gguf}: unknown type(s) {', '.join(unknown)}; choose from {', '.join(GGUF_DTYPES)}."
        )
    if args.space and args.native:
        raise CommandError("--space uploads a web page, --native a model repo: pass one of them.")
    if args.example and not (args.space or args.all_runtimes):
        raise CommandError("--example fills the web page's boxes: pass --space (or --all-runtimes) with it.")
    if args.source_repo is not None:
        if not (args.native or args.all_runtimes):
            raise CommandError(
                "--source-repo names the MiniTF repo an export's card comes from: pass --native (or "
                "--all-runtimes) with it."
            )
        if REPO_ID.fullmatch(args.source_repo) is None:
            raise CommandError(f"--source-repo {args.source_repo}: not a Hub repo id; give it as namespace/name.")
    check = None if args.no_verify else verify_before_push(args.folder, args.repo_id)
    hub = forwarded(args, *HUB_OPTIONS)
    if args.all_runtimes:
        urls = push_all_runtimes(
            args.folder,
            args.repo_id,
            gguf_dtypes=gguf or ALL_RUNTIMES_GGUF_DTYPES,
            examples=tuple(args.example),
            check_for=None if args.no_verify else lambda repo_id: verify_before_push(args.folder, repo_id),
            note=lambda line: say("push", "note", line),
            source_repo=args.source_repo,
            verbose=args.verbose,
            **hub,
        )
        for repo_id, url in urls.items():
            print(f"Pushed {args.folder} to {repo_id}: {url}")
        return 0
    if args.space:
        url = push_space(
            args.folder, args.repo_id, examples=tuple(args.example), check=check, verbose=args.verbose, **hub
        )
    elif args.native:
        url = push_native(
            args.folder,
            args.repo_id,
            gguf_dtypes=gguf,
            check=check,
            source_repo=args.source_repo,
            verbose=args.verbose,
            **hub,
        )
    else:
        url = push_folder(args.folder, args.repo_id, note=lambda line: say("push", "note", line), **hub)
    print(f"Pushed {args.folder} to {args.repo_id}: {url}")
    return 0
