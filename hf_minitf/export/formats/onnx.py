"""`minitf export onnx`: ONNX graphs for ONNX Runtime and transformers.js (`hf_minitf.export.onnx`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from hf_minitf.catalog.limits import ONNX_QUANTIZATIONS
from hf_minitf.export.format import ExportFormat, every_kind, export_options

DESCRIPTION = """\
Write a GPT, an encoder or a seq2seq translator as ONNX (torch.onnx.export with dynamo) for ONNX Runtime and
transformers.js: float32 graphs giving the MiniTF model's outputs (GPT: its greedy tokens; encoder: embeddings
within 1e-5; translator: its greedy and beam-search translations). `minitf generate` / `minitf embed` /
`minitf translate` run the folder in ONNX Runtime.

- GPT: onnx/model.onnx, one decoder graph with a KV cache, inputs input_ids, attention_mask, position_ids and
  past_key_values.{i}.key/.value, outputs logits and present.{i}.key/.value (batch, length and cache length
  dynamic; optimum's and transformers.js's layout), beside config.json of the native architecture (gpt2 for
  learned positions, gpt_neox for rotary ones), the tokenizer and a generation config that stops at a learned
  position table
- encoder: onnx/model.onnx, inputs input_ids and attention_mask, output last_hidden_state, in a copy of the
  SentenceTransformer folder; the README has the ONNX Runtime code (tokenizer, session, masked mean, normalize)
  that needs no optimum
- seq2seq: optimum's seq2seq files: onnx/encoder_model.onnx (input_ids, attention_mask -> last_hidden_state),
  onnx/decoder_model.onnx (the first step: input_ids, encoder_attention_mask, encoder_hidden_states -> logits and
  present.{i}.decoder.key/.value, present.{i}.encoder.key/.value, the cross-attention keys and values computed
  once) and onnx/decoder_with_past_model.onnx (the next steps: past_key_values.{i}.decoder/.encoder.key/.value
  in, logits and present.{i}.decoder.key/.value out), beside the paired tokenizer and the generation config;
  `minitf translate` searches (greedy, or --num-beams with the generation config's length_penalty and
  early_stopping) in numpy as transformers' generate() does

--quantize q8 fp16 q4 adds the files transformers.js loads for these dtypes: onnx/model_quantized.onnx (dynamic
8-bit matrix products; an encoder's also as onnx/model_quint8_avx2.onnx, sentence-transformers' name, which
`minitf embed` then runs), onnx/model_fp16.onnx (float16), onnx/model_q4.onnx (4-bit weight blocks); a
translator gets each of its three graphs so (onnx/encoder_model_quantized.onnx, ...). They can change greedy
tokens; measure before using them. Refused: what `export native` refuses for a GPT (context_overflow="crop"),
an encoder's pooling other than mean, a translator whose generation config does not cache (hkproj's untrained
model) or sets what the runner does not reproduce (no_repeat_ngram_size, repetition_penalty, sampling, ...)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--quantize",
        nargs="+",
        default=[],
        choices=ONNX_QUANTIZATIONS,
        metavar="DTYPE",
        help=f"also write these variants, by transformers.js's dtype names ({', '.join(ONNX_QUANTIZATIONS)})",
    )


def report(args: argparse.Namespace, out: Path) -> str:
    variants = "".join(f", {name}" for name in args.quantize)
    return f"Exported {args.source} to {out} (ONNX, fp32{variants})"


FORMAT = ExportFormat(
    "onnx",
    ("gpt", "encoder", "seq2seq"),
    "GPT -> ONNX decoder with KV cache, encoder -> ONNX in a SentenceTransformer folder, seq2seq -> ONNX encoder and cached decoder graphs, for ONNX Runtime and transformers.js",
    DESCRIPTION,
    writer="hf_minitf.export.onnx:export_onnx",
    report=report,
    layout="engine_folder",
    add_arguments=add_arguments,
    arguments=export_options("quantize"),
    runners=every_kind("onnxruntime", loader_prefix="onnx"),
    exact_precisions=("fp32",),
    card_template="onnx_export.md",
)
