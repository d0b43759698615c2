"""`minitf export FORMAT SRC OUT`: write a model in a format that runs without hf_minitf, one sub-command per format
of `hf_minitf.catalog.exports` (its help is there; its arguments and the call of its writer here)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

from hf_minitf.catalog.exports import EXPORT_DESCRIPTION, EXPORTS
from hf_minitf.catalog.limits import CTRANSLATE2_QUANTIZATIONS, GGUF_DTYPES, ONNX_QUANTIZATIONS
from hf_minitf.catalog.publishing import CARRIED_LICENSE_DEFAULT
from hf_minitf.commands.common import add_license, reports_errors

HELP = "export a model to run without hf_minitf: native transformers, GGUF, CTranslate2, ONNX, a web page (`minitf export --help`)"


def _add_export_source(parser: argparse.ArgumentParser, out_help: str) -> None:
    parser.add_argument(
        "source",
        metavar="SRC",
        help="a MiniTF model folder (saved, trained or converted) or a Hub repo id (owner/name; its "
        "code is never downloaded)",
    )
    parser.add_argument("out", type=Path, metavar="OUT", help=out_help)
    parser.add_argument("--revision", default=None, metavar="REV", help="branch, tag or commit of a Hub repo id")
    add_license(parser, CARRIED_LICENSE_DEFAULT)


def _add_native_export_arguments(parser: argparse.ArgumentParser) -> None:
    _add_export_source(parser, "folder to write (must be empty unless --overwrite)")
    parser.add_argument("--overwrite", action="store_true", help="replace a non-empty OUT model folder (nothing else)")


def _add_gguf_export_arguments(parser: argparse.ArgumentParser) -> None:
    _add_export_source(parser, "the .gguf file to write (must not exist unless --overwrite)")
    parser.add_argument(
        "--dtype",
        default="f16",
        choices=GGUF_DTYPES,
        help="weight type of the matrices (default: f16); norms and biases stay f32",
    )
    parser.add_argument("--overwrite", action="store_true", help="replace an existing OUT GGUF file (nothing else)")


def _add_ctranslate2_export_arguments(parser: argparse.ArgumentParser) -> None:
    _add_native_export_arguments(parser)
    parser.add_argument(
        "--quantization",
        default="float32",
        choices=CTRANSLATE2_QUANTIZATIONS,
        help="weight type CTranslate2 stores (default: float32, MiniTF's greedy tokens)",
    )


def _add_onnx_export_arguments(parser: argparse.ArgumentParser) -> None:
    _add_native_export_arguments(parser)
    parser.add_argument(
        "--quantize",
        nargs="+",
        default=[],
        choices=ONNX_QUANTIZATIONS,
        metavar="DTYPE",
        help=f"also write these variants, by transformers.js's dtype names ({', '.join(ONNX_QUANTIZATIONS)})",
    )


def _add_web_export_arguments(parser: argparse.ArgumentParser) -> None:
    _add_native_export_arguments(parser)
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
        help="text put in the page's boxes (repeat it): a GPT's prompt; an encoder's source sentence, then the "
        "sentences to compare with it",
    )
    parser.add_argument("--title", default=None, help="the page's title (default: the model folder's name)")


# Each format's arguments.
FORMAT_ARGUMENTS: dict[str, Callable[[argparse.ArgumentParser], None]] = {
    "native": _add_native_export_arguments,
    "gguf": _add_gguf_export_arguments,
    "ctranslate2": _add_ctranslate2_export_arguments,
    "onnx": _add_onnx_export_arguments,
    "web": _add_web_export_arguments,
}


def add_parser(commands) -> argparse.ArgumentParser:
    """`export`, with one sub-command per format (its name is `args.format`)."""
    export = commands.add_parser("export", help=HELP, description=EXPORT_DESCRIPTION)
    formats = export.add_subparsers(dest="format", required=True, metavar="FORMAT")
    for name, export_format in EXPORTS.items():
        parser = formats.add_parser(
            name,
            help=export_format.summary,
            description=export_format.description,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        FORMAT_ARGUMENTS[name](parser)
        parser.set_defaults(run=run)
    return export


def write_native(args: argparse.Namespace) -> str:
    from hf_minitf.export.native import export_native

    out = export_native(args.source, args.out, overwrite=args.overwrite, revision=args.revision, license=args.license)
    return f"Exported {args.source} to {out} (native transformers architecture, no remote code)"


def write_gguf(args: argparse.Namespace) -> str:
    from hf_minitf.export.gguf import export_gguf

    out = export_gguf(
        args.source, args.out, dtype=args.dtype, overwrite=args.overwrite, revision=args.revision, license=args.license
    )
    return f"Exported {args.source} to {out} (GGUF, {args.dtype})"


def write_ctranslate2(args: argparse.Namespace) -> str:
    from hf_minitf.export.ctranslate2 import export_ctranslate2

    out = export_ctranslate2(
        args.source,
        args.out,
        quantization=args.quantization,
        overwrite=args.overwrite,
        revision=args.revision,
        license=args.license,
    )
    return f"Exported {args.source} to {out} (CTranslate2, {args.quantization})"


def write_onnx(args: argparse.Namespace) -> str:
    from hf_minitf.export.onnx import export_onnx

    out = export_onnx(
        args.source,
        args.out,
        quantize=args.quantize,
        overwrite=args.overwrite,
        revision=args.revision,
        license=args.license,
    )
    variants = "".join(f", {name}" for name in args.quantize)
    return f"Exported {args.source} to {out} (ONNX, fp32{variants})"


def write_web(args: argparse.Namespace) -> str:
    from hf_minitf.export.web import export_web

    out = export_web(
        args.source,
        args.out,
        examples=args.example,
        title=args.title,
        quantize=args.quantize,
        overwrite=args.overwrite,
        revision=args.revision,
        license=args.license,
    )
    return f"Exported {args.source} to {out} (a static web page with transformers.js; serve it: python -m http.server --directory {out})"


# Each format's writer: the export function called with the parsed arguments, returning the line to print.
WRITERS: dict[str, Callable[[argparse.Namespace], str]] = {
    "native": write_native,
    "gguf": write_gguf,
    "ctranslate2": write_ctranslate2,
    "onnx": write_onnx,
    "web": write_web,
}


@reports_errors(lambda args: f"export {args.format}", out="OUT")
def run(args: argparse.Namespace) -> int:
    """`minitf export FORMAT SRC OUT ...`: the format's writer, as `WRITERS` names it."""
    from transformers.utils import logging

    logging.set_verbosity_error()  # loading bars and notes of the source model: nothing the user acts on
    logging.disable_progress_bar()
    print(WRITERS[args.format](args))
    return 0
