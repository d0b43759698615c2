"""Export MiniTF models to formats that run without this package: native transformers architectures
(`export_native`) and GGUF for llama.cpp and Ollama (`export_gguf`), and `minitf export FORMAT ...`.

Each format is one entry of `minitf_cli.EXPORT_FORMATS` (its arguments and help) and one runner here, named there,
that takes the parsed arguments and returns what it wrote.
"""

from __future__ import annotations

import argparse
import sys

from .export_ctranslate2 import export_ctranslate2
from .export_gguf import export_gguf
from .export_native import ExportRefused, export_native
from .export_onnx import export_onnx


def run_native(args: argparse.Namespace) -> str:
    out = export_native(args.source, args.out, overwrite=args.overwrite, revision=args.revision)
    return f"Exported {args.source} to {out} (native transformers architecture, no remote code)"


def run_gguf(args: argparse.Namespace) -> str:
    out = export_gguf(args.source, args.out, dtype=args.dtype, overwrite=args.overwrite, revision=args.revision)
    return f"Exported {args.source} to {out} (GGUF, {args.dtype})"


def run_ctranslate2(args: argparse.Namespace) -> str:
    out = export_ctranslate2(args.source, args.out, quantization=args.quantization, overwrite=args.overwrite,
                             revision=args.revision)
    return f"Exported {args.source} to {out} (CTranslate2, {args.quantization})"


def run_onnx(args: argparse.Namespace) -> str:
    out = export_onnx(args.source, args.out, quantize=args.quantize, overwrite=args.overwrite, revision=args.revision)
    return f"Exported {args.source} to {out} (ONNX{', + int8' if args.quantize else ''})"


def export_command(args: argparse.Namespace) -> int:
    """Run `minitf export FORMAT SRC OUT ...`: 0 when written, 2 with a one-line error for unusable input."""
    from transformers.utils import logging

    from minitf_cli import EXPORT_FORMATS

    logging.set_verbosity_error()  # loading bars and notes of the source model: nothing the user acts on
    logging.disable_progress_bar()
    runner = globals()[EXPORT_FORMATS[args.format].runner]
    try:
        print(runner(args))
    except (ValueError, OSError) as error:
        message = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        print(f"minitf export {args.format}: error: {message}", file=sys.stderr)
        return 2
    return 0


__all__ = ["ExportRefused", "export_command", "export_ctranslate2", "export_gguf", "export_native", "export_onnx"]
