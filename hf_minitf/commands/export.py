"""`minitf export FORMAT SRC OUT`: write a model in a format that runs without hf_minitf, one sub-command per format
of `hf_minitf.catalog.exports` (its help is there; its arguments and the call of its writer here)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from hf_minitf.catalog.exports import EXPORT_DESCRIPTION, EXPORTS
from hf_minitf.catalog.limits import CTRANSLATE2_QUANTIZATIONS, GGUF_DTYPES, ONNX_QUANTIZATIONS
from hf_minitf.catalog.publishing import CARRIED_LICENSE_DEFAULT
from hf_minitf.catalog.verification import NO_VERIFY_HELP
from hf_minitf.commands.common import (
    CommandError,
    add_catalog_commands,
    add_license,
    forwarded,
    quiet_transformers,
    reports_errors,
)

HELP = "export a model to run without hf_minitf: native transformers, GGUF, CTranslate2, ONNX, a web page (`minitf export --help`)"


# OUT and --overwrite of a format that writes a folder (every format but gguf), and of gguf's one file.
FOLDER_OUT = (
    "folder to write (must be empty unless --overwrite)",
    "replace a non-empty OUT model folder (nothing else)",
)
FILE_OUT = (
    "the .gguf file to write (must not exist unless --overwrite)",
    "replace an existing OUT GGUF file (nothing else)",
)


def _add_export_source(parser: argparse.ArgumentParser, out_help: str, overwrite_help: str) -> None:
    """What every export takes: SRC, OUT, --revision, --license and --overwrite."""
    parser.add_argument(
        "source",
        metavar="SRC",
        help="a MiniTF model folder (saved, trained or converted) or a Hub repo id (owner/name; its "
        "code is never downloaded)",
    )
    parser.add_argument("out", type=Path, metavar="OUT", help=out_help)
    parser.add_argument("--revision", default=None, metavar="REV", help="branch, tag or commit of a Hub repo id")
    add_license(parser, CARRIED_LICENSE_DEFAULT)
    parser.add_argument("--overwrite", action="store_true", help=overwrite_help)


def _add_no_options(parser: argparse.ArgumentParser) -> None:
    """The options of a format that has none of its own (native)."""


def _add_gguf_options(parser: argparse.ArgumentParser, default_dtype: str) -> None:
    parser.add_argument(
        "--dtype",
        default=default_dtype,
        choices=GGUF_DTYPES,
        help=f"weight type of the matrices, a llama.cpp file type (default: {default_dtype}); norms and biases stay f32",
    )
    parser.add_argument(
        "--agreement-text",
        type=Path,
        default=None,
        metavar="FILE",
        help="UTF-8 text the file's agreement is measured on: its first lines' first tokens are the prompts, the "
        "whole text the held-out text of the perplexity (default: a short English text)",
    )


def _add_ctranslate2_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--quantization",
        default="float32",
        choices=CTRANSLATE2_QUANTIZATIONS,
        help="weight type CTranslate2 stores (default: float32, MiniTF's greedy tokens)",
    )


def _add_onnx_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--quantize",
        nargs="+",
        default=[],
        choices=ONNX_QUANTIZATIONS,
        metavar="DTYPE",
        help=f"also write these variants, by transformers.js's dtype names ({', '.join(ONNX_QUANTIZATIONS)})",
    )


def _add_web_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--quantize",
        default="q8",
        choices=ONNX_QUANTIZATIONS,
        help="the ONNX variant written beside float32, which the page offers too (default: q8)",
    )
    parser.add_argument(
        "--example",
        action="append",
        default=[],
        metavar="TEXT",
        help="text put in the page's boxes (repeat it): a GPT's prompt or a text to translate; an encoder's source "
        "sentence, then the sentences to compare with it",
    )
    parser.add_argument("--title", default=None, help="the page's title (default: the model folder's name)")
    parser.add_argument(
        "--bundle",
        action="store_true",
        help="copy transformers.js and onnxruntime-web's wasm into OUT/vendor, with a Content-Security-Policy "
        "forbidding other origins: the page runs offline (default: loaded from jsDelivr); the npm packages are "
        "downloaded once, integrity-checked, unless --bundle-from names them",
    )
    parser.add_argument(
        "--bundle-from",
        type=Path,
        default=None,
        metavar="DIR",
        help="a node_modules folder (or the folder holding one) with the pinned @huggingface/transformers and its "
        "onnxruntime-web, to bundle from without network access; implies --bundle",
    )


# Each format's own options.
FORMAT_ARGUMENTS: dict[str, Callable[[argparse.ArgumentParser], None]] = {
    "native": _add_no_options,
    "gguf": partial(_add_gguf_options, default_dtype="f16"),
    "ollama": partial(_add_gguf_options, default_dtype="q8_0"),
    "ctranslate2": _add_ctranslate2_options,
    "onnx": _add_onnx_options,
    "web": _add_web_options,
}


def add_format_arguments(parser: argparse.ArgumentParser, name: str) -> None:
    """The arguments of `minitf export NAME`: those of every export (OUT a file for gguf, a folder for the others),
    the format's own, then whether to verify the export."""
    _add_export_source(parser, *(FILE_OUT if name == "gguf" else FOLDER_OUT))
    FORMAT_ARGUMENTS[name](parser)
    parser.add_argument("--no-verify", action="store_true", help=NO_VERIFY_HELP)


def add_parser(commands) -> argparse.ArgumentParser:
    """`export`, with one sub-command per format (its name is `args.format`)."""
    return add_catalog_commands(
        commands, "export", HELP, EXPORT_DESCRIPTION, "format", EXPORTS, add_format_arguments, run
    )


# The options every export writer takes, by the names of its parameters.
EXPORT_OPTIONS = ("overwrite", "revision", "license")


def write_native(args: argparse.Namespace) -> str:
    from hf_minitf.export.native import export_native

    out = export_native(args.source, args.out, **forwarded(args, *EXPORT_OPTIONS))
    return f"Exported {args.source} to {out} (native transformers architecture, no remote code)"


def _agreement_text(args: argparse.Namespace) -> str:
    from hf_minitf.catalog.exports import GGUF_AGREEMENT_TEXT

    path = args.agreement_text
    if path is None:
        return GGUF_AGREEMENT_TEXT
    if not path.is_file():
        raise CommandError(f"--agreement-text {path}: no such file; give a UTF-8 text file, one prompt per line.")
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        raise CommandError(f"--agreement-text {path} is not UTF-8 text ({error}); save it as UTF-8.") from None


def _gguf_options(args: argparse.Namespace) -> dict[str, Any]:
    """The keyword arguments of a GGUF writer (gguf, ollama): the weight type, the agreement text, and every
    export's options."""
    return {"dtype": args.dtype, "agreement_text": _agreement_text(args), **forwarded(args, *EXPORT_OPTIONS)}


def write_gguf(args: argparse.Namespace) -> str:
    from hf_minitf.export.gguf import export_gguf_report  # a GPT or an encoder

    written = export_gguf_report(args.source, args.out, **_gguf_options(args))
    return "\n".join([f"Exported {args.source} to {written.path} (GGUF, {args.dtype})", *written.report_lines()])


def write_ollama(args: argparse.Namespace) -> str:
    from hf_minitf.export.ollama import export_ollama

    written = export_ollama(args.source, args.out, **_gguf_options(args))
    return "\n".join(
        [
            f"Exported {args.source} to {args.out} (GGUF {args.dtype} with an Ollama Modelfile)",
            *written.gguf.report_lines(),
            *written.notes,
            f"Create the Ollama model: ollama create {written.name} -f {Path(args.out) / written.modelfile}",
        ]
    )


def write_ctranslate2(args: argparse.Namespace) -> str:
    from hf_minitf.export.ctranslate2 import export_ctranslate2

    out = export_ctranslate2(args.source, args.out, quantization=args.quantization, **forwarded(args, *EXPORT_OPTIONS))
    return f"Exported {args.source} to {out} (CTranslate2, {args.quantization})"


def write_onnx(args: argparse.Namespace) -> str:
    from hf_minitf.export.onnx import export_onnx

    out = export_onnx(args.source, args.out, quantize=args.quantize, **forwarded(args, *EXPORT_OPTIONS))
    variants = "".join(f", {name}" for name in args.quantize)
    return f"Exported {args.source} to {out} (ONNX, fp32{variants})"


def write_web(args: argparse.Namespace) -> str:
    from hf_minitf.export.web import export_web

    options = forwarded(args, "title", "quantize", "bundle", "bundle_from", *EXPORT_OPTIONS)
    out = export_web(args.source, args.out, examples=args.example, **options)
    return f"Exported {args.source} to {out} (a static web page with transformers.js; serve it: python -m http.server --directory {out})"


# Each format's writer: the export function called with the parsed arguments, returning the line to print.
WRITERS: dict[str, Callable[[argparse.Namespace], str]] = {
    "native": write_native,
    "gguf": write_gguf,
    "ollama": write_ollama,
    "ctranslate2": write_ctranslate2,
    "onnx": write_onnx,
    "web": write_web,
}


@reports_errors(lambda args: f"export {args.format}", out="OUT")
def run(args: argparse.Namespace) -> int:
    """`minitf export FORMAT SRC OUT ...`: the format's writer, as `WRITERS` names it."""
    quiet_transformers()  # loading bars and notes of the source model: nothing the user acts on
    print(WRITERS[args.format](args))
    if args.no_verify:
        return 0
    from hf_minitf.commands.verify import verify_after_export

    return verify_after_export(args.out, args.source, args.revision, f"export {args.format}")
