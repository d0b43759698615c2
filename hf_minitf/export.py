"""Export MiniTF models to formats that run without this package: native transformers architectures
(`export_native`), GGUF for llama.cpp and Ollama (`export_gguf`), CTranslate2 (`export_ctranslate2`) and ONNX
Runtime (`export_onnx`); the runners of `minitf export FORMAT ...`.

Each format is one entry of `minitf_cli.EXPORT_FORMATS` (its arguments and help) and one runner in `EXPORTERS`
here, which takes the parsed arguments and returns the line to print.
"""

from __future__ import annotations

import argparse

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


# `minitf export FORMAT`: the runner of each format (its arguments are minitf_cli.EXPORT_FORMATS[FORMAT]).
EXPORTERS = {"native": run_native, "gguf": run_gguf, "ctranslate2": run_ctranslate2, "onnx": run_onnx}


__all__ = ["EXPORTERS", "ExportRefused", "export_ctranslate2", "export_gguf", "export_native", "export_onnx"]
