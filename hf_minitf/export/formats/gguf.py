"""`minitf export gguf`: a GPT or an encoder as one GGUF file (`hf_minitf.export.gguf`); its options and
agreement text are also `minitf export ollama`'s."""

from __future__ import annotations

import argparse
from functools import partial
from pathlib import Path
from typing import Any

from hf_minitf.catalog.exports import (
    GGUF_AGREEMENT_NEW_TOKENS,
    GGUF_AGREEMENT_PROMPTS,
    GGUF_AGREEMENT_TEXT,
)
from hf_minitf.catalog.limits import GGUF_DTYPES
from hf_minitf.catalog.packaging import EXTRAS
from hf_minitf.export.format import ExportFormat, FormatRunner, export_options

DESCRIPTION = f"""\
Write a GPT model as one GGUF file for llama.cpp, Ollama and LM Studio: llama.cpp's `gpt2` architecture for
learned positions, `gptneox` for rotary positions, with the tokenizer inside (byte-level BPE as llama.cpp's
`gpt2` tokenizer model; a character tokenizer is rewritten as a byte-level vocabulary with the merges that
build its multi-byte characters), the context length, the special tokens and the chat template if the
tokenizer has one.

An encoder becomes an embedding model for llama.cpp (`llama-server --embeddings`, llama-cpp-python's
`Llama(path, embedding=True)`): llama.cpp's `gpt2` graph, the MiniTF encoder layer exactly, with
`attention.causal = false` and `pooling_type = mean`, the sinusoid as the position table, and MiniEmbed's
word-level tokenizer as llama.cpp's WordPiece (`bert`) tokenizer model, lowercasing, [CLS] ... [SEP]. Cosine to
SentenceTransformer's embeddings: at least 0.999999 in f32 and f16 (llama.cpp's GELU is the tanh form). Its
tokens differ from MiniEmbed's on `_` inside words, combining marks, non-ASCII symbols against a word, CJK runs
and control characters. Keep texts within the context length (llama-cpp-python: n_ctx, n_batch and n_ubatch set
to it; llama.cpp reads no position past the table). Refused: other tokenizers, pooling other than mean. An
encoder's file claims no exactness: its verification (llama-cpp-python installed) prints the least cosine.

--dtype: f32 (exact weights), f16 (half-precision weights), or a llama.cpp quantization, each tensor typed by
llama.cpp's rules (llama-quant.cpp): q8_0, q4_0, q4_1, q5_0, q5_1 (blocks of 32); q4_k_m, q5_k_m (Ollama's
mixes: Q4_K / Q5_K, Q6_K for attn_qkv and ffn_down of some layers) and q6_k (blocks of 256). The output head
(the token embedding when tied) takes Q6_K, Q8_0 where its rows are no multiple of 256; the position table
stays f16, norms and biases f32. A matrix whose rows do not fit its type's blocks falls back as llama.cpp's
quantizer does (Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0, else f16). The gguf package writes Q4_0, Q4_1,
Q5_0, Q5_1 and Q8_0; the K-quants (Q4_K, Q5_K, Q6_K: rows of 256 or more) are written by llama.cpp's own
quantizer (llama_model_quantize) from the f16 file when llama-cpp-python is installed
({EXTRAS["llama"].install}). Without it Q6_K falls back to Q8_0 too, and q4_k_m, q5_k_m, q6_k are refused
where a matrix keeps Q4_K, Q5_K or Q6_K; on small models every matrix falls back and the file is written. The
export lists each fallback.

The export then reads the file back, dequantizes it, runs those weights in MiniTF (float32) and prints their
agreement with the MiniTF folder: greedy tokens over {GGUF_AGREEMENT_PROMPTS} prompts x {GGUF_AGREEMENT_NEW_TOKENS} new tokens (where they first differ) and
perplexity on held-out text beside float32's (--agreement-text FILE, one prompt per line; default: a short
English text), labelled as measured in PyTorch and followed by one sentence saying what to do (e.g. use q8_0 or
f16 where greedy text differs from the first token). This measures the weights' rounding, not llama.cpp: the
export's verification then runs the file in llama.cpp where llama-cpp-python is installed ({EXTRAS["llama"].install}),
and says "not measured in llama.cpp" otherwise. Refused: seq2seq models,
activations other than gelu (llama.cpp's GPT-2 and GPT-NeoX graphs compute GELU only), and what
`export native` refuses."""

FILE_OUT = (
    "the .gguf file to write (must not exist unless --overwrite)",
    "replace an existing OUT GGUF file (nothing else)",
)
"""The help of OUT and --overwrite: the export is one file."""


def add_gguf_arguments(parser: argparse.ArgumentParser, default_dtype: str) -> None:
    """--dtype (defaulting to `default_dtype`) and --agreement-text, of a GGUF writer (gguf, ollama)."""
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


def _agreement_text(path: Path | None) -> str:
    if path is None:
        return GGUF_AGREEMENT_TEXT
    if not path.is_file():
        raise ValueError(f"--agreement-text {path}: no such file; give a UTF-8 text file, one prompt per line.")
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        raise ValueError(f"--agreement-text {path} is not UTF-8 text ({error}); save it as UTF-8.") from None


def gguf_arguments(args: argparse.Namespace) -> dict[str, Any]:
    """The keyword arguments of a GGUF writer (gguf, ollama): the weight type, the agreement text, and every
    export's options."""
    return {"agreement_text": _agreement_text(args.agreement_text), **export_options("dtype")(args)}


def report(args: argparse.Namespace, written: Any) -> str:
    return "\n".join([f"Exported {args.source} to {written.path} (GGUF, {args.dtype})", *written.report_lines()])


FORMAT = ExportFormat(
    "gguf",
    ("gpt", "encoder"),
    "GPT or encoder -> one GGUF file (llama.cpp gpt2 / gptneox, tokenizer inside) for llama.cpp, Ollama",
    DESCRIPTION,
    writer="hf_minitf.export.gguf:export_gguf_report",  # a GPT or an encoder
    report=report,
    layout="gguf_file",
    add_arguments=partial(add_gguf_arguments, default_dtype="f16"),
    arguments=gguf_arguments,
    runners=(
        FormatRunner("llama.cpp", "generator", "llama_cpp_generator"),
        # llama.cpp's embedding graph computes GELU's tanh form: cosine 0.999999 to MiniTF in f32, not within 1e-5
        FormatRunner("llama.cpp", "embedder", "llama_cpp_embedder", exact=False),
    ),
    exact_precisions=("f32",),
    # llama.cpp computes GELU's tanh form from an f16 table: an f32 file's logits lie about 1e-3 (relative) from
    # MiniTF's; a file past this bound is not the exported model
    logit_bound=5e-3,
    out=FILE_OUT,
)
