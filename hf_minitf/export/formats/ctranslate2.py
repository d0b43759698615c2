"""`minitf export ctranslate2`: a CTranslate2 Generator, Translator or Encoder folder
(`hf_minitf.export.ctranslate2`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from hf_minitf.catalog.limits import CTRANSLATE2_QUANTIZATIONS
from hf_minitf.export.format import ExportFormat, every_kind, export_options

DESCRIPTION = """\
Write a GPT as a CTranslate2 Generator folder, a seq2seq model as a CTranslate2 Translator folder, an encoder
as a CTranslate2 Encoder folder (the C++ inference engine: `pip install ctranslate2`), with the tokenizer files
and a README. `minitf generate` / `minitf translate` / `minitf embed` run such a folder in CTranslate2 and print
what the MiniTF folder prints.

- GPT: learned positions as the position table, rotary positions as CTranslate2's rotary attention
  (interleaved pairs or halves, as the model has them)
- seq2seq: pre-norm Transformer, ReLU, separate source and target vocabularies, the interleaved sinusoid
  as an explicit position table, the norms' eps from the config (hkproj's first norm as the exact LayerNorm)
- encoder: pre-norm Transformer encoder, the sinusoid or learned positions as the position table; the token
  states are mean-pooled and normalized as the SentenceTransformer folder does (embeddings within 1e-5)

--quantization: float32 (MiniTF's greedy tokens and embeddings), int8, int8_float32 (8-bit weights; measure
before using: they can change tokens; an encoder's embeddings kept a cosine of 0.99997 to float32's on
MiniEmbed's dims), bfloat16. Refused (nothing written): context_overflow="crop", a generation config with
use_cache=False, hkproj's "std + eps" norms, activations CTranslate2 lacks, an encoder's pooling other than
mean."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--quantization",
        default="float32",
        choices=CTRANSLATE2_QUANTIZATIONS,
        help="weight type CTranslate2 stores (default: float32, MiniTF's greedy tokens)",
    )


def report(args: argparse.Namespace, out: Path) -> str:
    return f"Exported {args.source} to {out} (CTranslate2, {args.quantization})"


FORMAT = ExportFormat(
    "ctranslate2",
    ("gpt", "seq2seq", "encoder"),
    "GPT -> ctranslate2.Generator, seq2seq -> ctranslate2.Translator, encoder -> ctranslate2.Encoder folder",
    DESCRIPTION,
    writer="hf_minitf.export.ctranslate2:export_ctranslate2",
    report=report,
    layout="engine_folder",
    add_arguments=add_arguments,
    arguments=export_options("quantization"),
    runners=every_kind("ctranslate2", loader_prefix="ctranslate2"),
    exact_precisions=("float32",),
    card_template="ctranslate2_export.md",
)
