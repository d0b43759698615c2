"""`minitf export native`: the model as the transformers architecture that computes the same function
(`hf_minitf.export.native`, `hf_minitf.export.native_seq2seq`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from hf_minitf.export.format import ExportFormat, FormatRunner

DESCRIPTION = """\
Write the model as the transformers architecture that computes the same function, with its tokenizer,
generation config and a model card (no .py files, no auto_map):

- GPT, learned positions -> GPT2LMHeadModel (Conv1D weights are the transposed Linear weights)
- GPT, rotary positions  -> GPTNeoXForCausalLM (sequential residual, full rotary; qkv regrouped per head,
  interleaved rotary pairs permuted to rotate-half order)
- encoder               -> a SentenceTransformer folder (Transformer + mean Pooling + Normalize) around
  XLMRobertaXLModel (word embeddings pre-scaled, positions at XLM-R's padding_idx + 1 offset)
- seq2seq (translator)  -> PegasusForConditionalGeneration (pre-LN, the position table as its weight; the two
  vocabularies as one joint tokenizer.json, target tokens after the source ids; the residual stream scaled
  so that Pegasus's fixed LayerNorm eps 1e-5 computes MiniTF's eps)

The folder loads with AutoModelForCausalLM / SentenceTransformer / AutoModelForSeq2SeqLM without
trust_remote_code, and a GPT serves with `transformers serve` or vLLM. Refused (nothing written): a
learned-position GPT with context_overflow="crop" (set "error" to export it), an encoder without pad_token_id,
a translator whose norms divide by std + eps (hkproj's later norms) or whose generation config does not cache
(hkproj's untrained model)."""


def report(args: argparse.Namespace, out: Path) -> str:
    return f"Exported {args.source} to {out} (native transformers architecture, no remote code)"


FORMAT = ExportFormat(
    "native",
    ("gpt", "encoder", "seq2seq"),
    "GPT -> GPT2LMHeadModel / GPTNeoXForCausalLM, encoder -> XLMRobertaXLModel SentenceTransformer, translator -> PegasusForConditionalGeneration: loads without trust_remote_code",
    DESCRIPTION,
    writer="hf_minitf.export.native:export_native",
    report=report,
    layout="native_folder",
    runners=(
        FormatRunner("transformers", "generator", "native_generator"),
        FormatRunner("sentence-transformers", "embedder", "native_embedder"),
        FormatRunner("transformers", "translator", "native_translator"),
    ),
    exact_precisions=("float32",),
    card_template="native_export.md",
)
