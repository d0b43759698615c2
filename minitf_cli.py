"""The `minitf` command: its arguments, help and dispatch.

This module sits beside the `hf_minitf` package, not inside it, because importing `hf_minitf` registers every
model with transformers (importing torch and transformers): `minitf --help`, `--version`, every command's and
every converter's `--help`, and wrong arguments are answered from here without that. A command imports
`hf_minitf.cli` only to run, once its arguments are parsed; the package never imports this module.

So the names the package owns and the help needs (families, presets, dtypes, norm types, each converter's
description) are mirrored here; tests/test_cli.py checks that each mirror equals the package's.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import logging
import math
import os
import signal
import sys
import threading
from importlib import metadata
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import NamedTuple

# The model families (mirror of hf_minitf.presets.FAMILIES), and the older names `minitf train` still accepts.
FAMILIES = ("gpt", "encoder", "seq2seq")
FAMILY_ALIASES = {"gpt": (), "encoder": ("embedding",), "seq2seq": ("translation",)}
# Mirror of hf_minitf.presets.PRESETS' names.
PRESET_NAMES = {
    "gpt": ("tiny", "shakespeare-char", "frawdllm-tiny", "frawdllm-small", "frawdllm-base", "frawdllm-tiny-llama",
            "frawdllm-small-llama", "frawdllm-100m"),
    "encoder": ("tiny", "miniembed-mini"),
    "seq2seq": ("tiny", "hkproj"),
}
# Loggers that speak while transformers imports torchao (the quantization extra): optional kernels that did not
# load and torch's deprecation of a registration torchao makes. Nothing a command's user can act on.
IMPORT_TIME_LOGGERS = ("torchao", "torch.utils._pytree")
DEFAULT_COLUMNS = {"gpt": "text", "encoder": "anchor,positive", "seq2seq": "source,target"}


class ArgumentParser(argparse.ArgumentParser):
    """argparse with one-line errors: `minitf train: error: ... (see minitf train --help)`, exit code 2."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")

    def parse_known_args(self, args=None, namespace=None):
        """Unknown arguments are an error of the (sub-)command given them, which the message names: argparse
        would leave them to the top parser (`minitf: error: unrecognized arguments`)."""
        namespace, extras = super().parse_known_args(args, namespace)
        if extras:
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        return namespace, extras


def _figure(value: float) -> str:
    return f"{value:,}" if isinstance(value, int) else f"{value:g}"


def _number(kind: type, minimum: float, inclusive: bool = True, maximum: float | None = None,
            maximum_included: bool = False, advice: str = ""):
    """An argparse type for finite numbers in a range, with an error that names the range (and `advice`)."""
    bound = (f">= {_figure(minimum)}" if inclusive else f"> {_figure(minimum)}") + (
        "" if maximum is None else f" and {'<=' if maximum_included else '<'} {_figure(maximum)}")
    expected = f"a finite number {bound}" if kind is float else bound

    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {'an integer' if kind is int else 'a number'}, got {text!r}")
        if (kind is float and not math.isfinite(value)) or (value < minimum if inclusive else value <= minimum) or (
                maximum is not None and (value > maximum if maximum_included else value >= maximum)):
            raise argparse.ArgumentTypeError(f"must be {expected}, got {text}{advice}")
        return value

    parse.__name__ = kind.__name__
    return parse


def _at_most(kind: type, maximum: float, minimum: float = 1, inclusive: bool = True, advice: str = ""):
    return _number(kind, minimum, inclusive, maximum=maximum, maximum_included=True, advice=advice)


# Mirrors of hf_minitf.training's limits (tests/test_cli.py checks each): more steps, epochs or warmup than any run
# could take (a larger value runs until killed, or overflows inside the trainer), and the seeds numpy takes
# (transformers' set_seed seeds numpy too).
MAX_STEPS = 10**9
MAX_EPOCHS = 10**6
SEED_LIMIT = 2**32
# Mirror of hf_minitf.quickstart.MAX_STEPS_SCALE: a thousand times the quickstart is already about ten hours.
MAX_STEPS_SCALE = 1000
# Mirror of hf_minitf.tokenization_minitf.MAX_VOCAB_SIZE: tokenizers' BPE trainer reserves memory for the size
# asked (10**9 aborts the process), and published vocabularies stay well below this.
MAX_VOCAB_SIZE = 10**6
# Mirror of hf_minitf.serving.GREEDY_BELOW_TEMPERATURE: dividing the logits by a lower temperature overflows them.
GREEDY_BELOW_TEMPERATURE = 1e-4
# Beyond these, decoding holds the machine for hours (a beam search over 10**9 beams, 10**12 new tokens).
MAX_NEW_TOKENS = 10**6
MAX_BEAMS = 1000

count = _at_most(int, MAX_STEPS)  # steps, batch sizes, heads, lengths: bounded so no value overflows a C integer
random_seed = _number(int, 0, maximum=SEED_LIMIT)
port_number = _at_most(int, 65535)
vocab_size = _at_most(int, MAX_VOCAB_SIZE)
new_tokens = _at_most(int, MAX_NEW_TOKENS)
beam_width = _at_most(int, MAX_BEAMS)
epochs = _at_most(float, MAX_EPOCHS, minimum=0.0, inclusive=False)
warmup = _at_most(float, MAX_STEPS, minimum=0.0)
steps_scale = _at_most(float, MAX_STEPS_SCALE, minimum=0.0, inclusive=False)
temperature = _number(float, GREEDY_BELOW_TEMPERATURE,
                      advice=" (a lower temperature is greedy decoding: leave out --sample)")
positive_float = _number(float, 0.0, inclusive=False)
non_negative_float = _number(float, 0.0)
fraction = _number(float, 0.0, maximum=1.0)


def _version() -> str:
    try:
        return metadata.version("hf-minitf")
    except metadata.PackageNotFoundError:
        return "unknown (not installed)"


def _add_out(parser: argparse.ArgumentParser, default: str | None = None, what: str = "the model") -> None:
    parser.add_argument("--out", type=Path, required=default is None,
                        default=None if default is None else Path(default),
                        help=f"folder to write {what} to (must be empty unless --overwrite)"
                             + (f"; default: ./{default}" if default else ""))
    parser.add_argument("--overwrite", action="store_true",
                        help="replace a non-empty --out model folder (nothing else)")


def _add_train(commands) -> None:
    train = commands.add_parser(
        "train", help="train a gpt, encoder (sentence embeddings) or seq2seq (translation) model on your data",
        description="Train a model from scratch on a local file or a `datasets` dataset through the ecosystem's "
                    "trainers (transformers' Trainer for gpt, sentence-transformers' trainer for encoder, "
                    "Seq2SeqTrainer for seq2seq), then write one complete folder: weights, tokenizer, model card "
                    "with held-out figures and loss_curve.png. Runs unchanged under `torchrun` or `accelerate launch`.",
    )
    families = train.add_subparsers(dest="family", required=True, metavar="FAMILY")
    texts = {
        "gpt": ("a causal language model on a text", "a .txt file (the whole text), .jsonl/.json rows with a text "
                "column, a folder saved by datasets' save_to_disk, or a Hub dataset name"),
        "encoder": ("an encoder as an embedding model (SentenceTransformer) on (anchor, positive) pairs, in-batch "
                    "negatives",
                    "a .tsv file (two tab-separated columns), .jsonl/.json rows, a folder saved by datasets' "
                    "save_to_disk, or a Hub dataset name"),
        "seq2seq": ("a seq2seq translation model on (source, target) pairs", "a .tsv file (source<TAB>target), "
                    ".jsonl/.json rows, a folder saved by datasets' save_to_disk, or a Hub dataset name"),
    }
    for family in FAMILIES:
        summary, data = texts[family]
        parser = families.add_parser(family, aliases=FAMILY_ALIASES[family], help=summary,
                                     description=f"Train {summary}.")
        parser.set_defaults(family=family)  # the family's name, also when an alias was given
        parser.add_argument("--data", required=True, metavar="PATH", help=f"training data: {data}")
        _add_out(parser)
        parser.add_argument("--preset", default="tiny", choices=PRESET_NAMES[family],
                            help="model size (default: tiny); see the README for what each preset is")
        columns = "column holding the text" if family == "gpt" else "the two columns of each pair, comma-separated"
        parser.add_argument("--columns", default=DEFAULT_COLUMNS[family],
                            help=f"{columns} in jsonl/datasets data (default: {DEFAULT_COLUMNS[family]})")
        parser.add_argument("--split", default="train", help="dataset split to train on (default: train)")
        if family == "gpt":
            parser.add_argument("--tokenizer", choices=("char", "bpe"), default=None,
                                help="char: one token per character; bpe: byte-level BPE trained on the data "
                                     "(default: the preset's)")
            parser.add_argument("--vocab-size", type=vocab_size, default=None, help="BPE vocabulary size")
            parser.add_argument("--block-size", type=count, default=None,
                                help="tokens per training example (default: the preset's context)")
        elif family == "encoder":
            parser.add_argument("--vocab-size", type=vocab_size, default=None, help="word vocabulary size")
        group = parser.add_argument_group("training")
        group.add_argument("--epochs", type=epochs, default=1.0, help="passes over the data (default: 1)")
        group.add_argument("--max-steps", type=count, default=None,
                           help="stop after this many optimizer steps (overrides --epochs)")
        group.add_argument("--batch-size", type=count, default=32, help="examples per device and step (32)")
        group.add_argument("--learning-rate", type=positive_float, default=1e-3, help="peak learning rate (1e-3)")
        group.add_argument("--warmup", type=warmup, default=0.0,
                           help="warmup: a fraction of the steps if < 1, else a number of steps (default: 0)")
        group.add_argument("--weight-decay", type=non_negative_float, default=0.0, help="AdamW weight decay (0)")
        group.add_argument("--eval-fraction", type=fraction, default=0.05,
                           help="fraction of the data held out for evaluation (default: 0.05, at most 1000 examples)")
        group.add_argument("--eval-steps", type=count, default=None,
                           help="also evaluate every N steps (default: only at the end)")
        group.add_argument("--logging-steps", type=count, default=10, help="log the loss every N steps (10)")
        group.add_argument("--checkpoint-dir", type=Path, default=None,
                           help="keep trainer checkpoints here (default: none are kept)")
        group.add_argument("--save-steps", type=count, default=500,
                           help="checkpoint every N steps when --checkpoint-dir is given (500)")
        group.add_argument("--resume", action="store_true",
                           help="resume from the last checkpoint in --checkpoint-dir")
        group.add_argument("--mixed-precision", choices=("no", "fp16", "bf16"), default="no",
                           help="mixed precision training on a GPU (default: no)")
        group.add_argument("--report-to", default="none",
                           help="logging integration(s) of the Trainer, e.g. tensorboard or wandb (default: none)")
        group.add_argument("--seed", type=random_seed, default=0, help="random seed (default: 0)")
        group.add_argument("--no-progress", action="store_true", help="no progress bars")


def _add_use_commands(commands) -> None:
    generate = commands.add_parser(
        "generate", help="continue prompts with a gpt folder, streaming the tokens",
        description="Load a GPT folder with AutoModelForCausalLM and continue each prompt, printing tokens as they "
                    "are generated (TextStreamer). Greedy unless --sample.",
    )
    generate.add_argument("model", type=Path, metavar="DIR", help="a folder written by minitf train/quickstart/convert")
    generate.add_argument("prompts", nargs="+", metavar="PROMPT", help="text(s) to continue")
    generate.add_argument("--max-new-tokens", type=new_tokens, default=64, help="tokens to add (default: 64)")
    generate.add_argument("--sample", action="store_true", help="sample instead of greedy decoding")
    generate.add_argument("--temperature", type=temperature, default=1.0, help="sampling temperature (1.0)")
    generate.add_argument("--top-k", type=count, default=None, help="sample from the k likeliest tokens")
    generate.add_argument("--seed", type=random_seed, default=0, help="random seed for sampling (default: 0)")

    embed = commands.add_parser(
        "embed", help="embed texts with an encoder folder (vectors or a similarity table)",
        description="Encode texts with SentenceTransformer(DIR). Prints one JSON vector per line, or with "
                    "--similarity the table of cosine similarities between the texts.",
    )
    embed.add_argument("model", type=Path, metavar="DIR", help="an encoder folder (a SentenceTransformer)")
    embed.add_argument("texts", nargs="+", metavar="TEXT", help="text(s) to embed")
    embed.add_argument("--similarity", action="store_true", help="print the similarity table instead of vectors")

    translate = commands.add_parser(
        "translate", help="translate texts with a seq2seq folder",
        description="Translate each text with pipeline('minitf-translation', model=DIR).",
    )
    translate.add_argument("model", type=Path, metavar="DIR", help="a seq2seq model folder")
    translate.add_argument("texts", nargs="+", metavar="TEXT", help="text(s) to translate")
    translate.add_argument("--num-beams", type=beam_width, default=1, help="beam search width (default: 1, greedy)")
    translate.add_argument("--max-new-tokens", type=new_tokens, default=None,
                           help="longest translation in tokens (default: up to the model's positions)")

    info = commands.add_parser(
        "info", help="describe a model folder: family, parameters, sizes, files, card metadata",
        description="Describe a saved model folder without loading its weights.",
    )
    info.add_argument("model", type=Path, metavar="DIR", help="a model folder")


# `minitf convert`: one sub-command per original codebase. Each description is its converter's documentation: what
# it reads, what it infers from the weights and what must be given.
CONVERT_DESCRIPTION = (
    "Convert a checkpoint trained with one of the original codebases into a complete Hugging Face folder "
    "(model.safetensors, config, generation config, model code, tokenizer, model card). Checkpoints are read "
    "without running pickled code; the output folder appears only when the conversion succeeded. `SOURCE --help` "
    "says what each source needs and what is inferred."
)
# Mirror of hf_minitf.conversion.base.DTYPES' names: the dtypes a conversion can write.
DTYPE_NAMES = ("float32", "float16", "bfloat16")
# Mirror of hf_minitf.conversion.hkproj.NORM_TYPES: the LayerNormalization formulas of hkproj's versions, or auto.
HKPROJ_NORM_TYPES = ("auto", "scalar_std_times_eps", "scalar_std_plus_eps", "per_feature_std_plus_eps")
# Mirror of hf_minitf.presets.FRAWDLLM_PRESETS' names.
FRAWDLLM_PRESET_NAMES = ("tiny", "small", "base", "tiny-llama", "small-llama", "100m")
# Mirrors of each converter's DESCRIPTION (hf_minitf.conversion.base.SOURCES says which module holds it).

CHAR_GPT_DESCRIPTION = """\
Convert a nanoGPT-style character-level GPT to `MiniTFGPTForCausalLM` + a character tokenizer.

Input: the model's state_dict (`torch.save(model.state_dict())` or safetensors) and its character list.
Inferred from the weights: vocabulary size, hidden size, context (block_size), layers, MLP width, and whether
the LM head is tied. Not in the weights: the number of heads (`num_heads`, or the original constructor
arguments as JSON).

The original `generate` feeds only the last `block_size` tokens at each step. The converted config sets
`context_overflow="crop"` (the model cuts longer inputs to their last `max_position_embeddings` tokens) and
the saved generation config `use_cache=False`, so a plain `generate()` continues past the context exactly
like the original, recomputing the window at each step. For cached, faster generation inside the context,
pass `use_cache=True` (and keep prompt plus new tokens within the context) or set `context_overflow="error"`."""

FRAWDLLM_DESCRIPTION = """\
Convert a FrawdLLM model to `MiniTFGPTForCausalLM` + its byte-level BPE tokenizer (and FrawdLLM's
`Embeddings` layer to the GPT's embedding weights).

Input, one of:
- a FrawdLLM training checkpoint (`{"model_state_dict", "config", ...}`, whose pickled
  `src.model.config.ModelConfig` is read into a stand-in without running any FrawdLLM code), or a bare
  state_dict (torch.save or safetensors), with `--tokenizer` (the `tokenizers` JSON of its BPE);
- a Hugging Face folder FrawdLLM published with its `scripts/convert_to_hf.py` (`config.json` with
  `model_type: "frawdllm"`, `model.safetensors` with `model.`-prefixed keys, `tokenizer.json`), or the Hub
  repository id of one. Only its JSON and safetensors files are read (a repository's code is not even
  downloaded); `HF_HUB_OFFLINE=1` reads the repository from the local cache.
Inferred from the weights: vocabulary size, hidden size, layers, MLP width, learned positions or RoPE
(no `embeddings.pos_emb`), the context length (learned: position rows; RoPE: the causal-mask buffer,
which spans 4 x context_length), tied LM head. From the stored config when present: everything, checked
against the weights. Not in a bare state_dict: the number of heads (`num_heads`, a ModelConfig JSON, or a
size that matches one of FrawdLLM's presets), and a RoPE context length when the mask buffer was dropped.
Special-token ids default to FrawdLLM's (<|pad|>=0, <|unk|>=1, <|bos|>=2, <|eos|>=3) and must agree with
the tokenizer.

FrawdLLM's `use_rmsnorm` and `use_swiglu` flags (set by its `tiny-llama` and `small-llama` presets) are read
by none of its model code: its blocks always build LayerNorm and the GELU MLP. So the weights decide: a
checkpoint with LayerNorm biases and a plain fc1/fc2 MLP converts (the card names the flags that were set
but had no effect); only weights that really are RMSNorm (norms without bias) or SwiGLU (a gate projection)
are refused, naming the keys.

Chat: when the tokenizer holds `<|user|>` and `<|assistant|>` (FrawdLLM's SFT/DPO chat models), the converted
tokenizer gets a chat template giving exactly FrawdLLM's format `<|bos|><|user|>{instruction}<|assistant|>
{response}<|eos|>`. A tokenizer file without them, for a model two tokens larger, gets them at the next two
ids, as FrawdLLM's chat scripts add them.

FrawdLLM's own loss takes `targets` already shifted and ignores pad id 0; the converted model's `labels`
follow transformers (labels = input ids, shifted inside, -100 ignored): pass `labels` with pad set to -100."""

MINIEMBED_DESCRIPTION = """\
Convert a MiniEmbed embedding model to `MiniTFEncoderModel` + a fast tokenizer, saved as a folder that is
both a Hugging Face model and a SentenceTransformer (and a Transformer-embedding layer, `TransformerEmbedding`,
to the encoder's embedding weights).

Input: the model weights (`model.safetensors`, or `model.pt`: a state_dict or a dict holding one), MiniEmbed's
`config.json` (its constructor arguments: vocab_size, d_model, num_heads, num_layers, d_ff, max_seq_len,
dropout, pad_token_id) and its `tokenizer.json` (`{vocab_size, word_to_id}`).
Inferred from the weights: vocabulary size, hidden size, layers, feed-forward width, and the maximum length
(rows of the stored positional table, checked against the sinusoidal formula). From config.json: the head
count (no weight shape reveals it; `num_heads` may be given instead), dropout and pad id, checked against
the weights. The SentenceTransformer (Transformer -> mean Pooling -> Normalize) gives MiniEmbed's `encode`."""

HKPROJ_DESCRIPTION = """\
Convert an hkproj pytorch-transformer translation model (its early version and the later ones) to
`MiniTFSeq2SeqForConditionalGeneration` + the paired source/target tokenizer.

Input: a training checkpoint `tmodel_XX.pt` (`{"model_state_dict", ...}`), or a bare state_dict (torch.save
or safetensors), and the two `tokenizers` files `tokenizer_{src}.json`, `tokenizer_{tgt}.json`.
Inferred from the weights: both vocabulary sizes, hidden size, layers, feed-forward width, the maximum
length (the stored positional tables, checked against the sinusoidal formula), q/k/v/o biases (later
versions dropped them), the projection's name, and the norm variant: per-feature gains (hkproj's last
version: `std + eps`, plain logits) or the early version's scalar gain; scalar gains far below 1 can only come
from training the early version's `std * eps` norm. Not in the weights: the head count (hkproj's train.py uses
build_transformer's default h=8; pass `num_heads`), and, for scalar gains near 1 (an untrained early-version
model, or hkproj's `std + eps` fix), which norm formula the code used (`norm_type`).
The model returns log-probabilities as `logits` for the scalar-norm versions (their ProjectionLayer ends in
log_softmax), plain scores for the last version; argmax, beams and the loss are the same either way.
With the early version's norm and gains near 1, attention scores reach ~1e12 and the original's masking (scores set
to -1e9) leaks masked positions into the softmax, so a decoder state depends on the prefix length; the
generation config then sets `use_cache=False`, which recomputes the prefix at each step as the original's
greedy_decode does and reproduces its tokens (a KV cache would keep states computed from shorter prefixes)."""

TRANSFORMER_EMBEDDING_DESCRIPTION = """\
Convert a Transformer-embedding layer (`TransformerEmbedding`: token embedding with padding row, scaled by
sqrt(d_model), plus a fixed sinusoidal table) into MiniTF encoder embedding weights: writes
embeddings.safetensors (weights under MiniTF names) and embedding_config.json (vocab_size, hidden_size,
max_position_embeddings, sinusoidal positions, scaled embeddings), to load into a larger MiniTFEncoderConfig
model with strict=False. The padding row is the one the encoder's pad_token_id must name (the layer's pad_idx,
0 by default)."""

FRAWDLLM_EMBEDDINGS_DESCRIPTION = """\
Convert FrawdLLM's `Embeddings` layer alone (token embedding, plus the learned position embedding unless it
uses RoPE) into MiniTF GPT embedding weights: writes embeddings.safetensors (weights under MiniTF names) and
embedding_config.json (vocab_size, hidden_size, position_embedding_type and, for learned positions,
max_position_embeddings), to load into a larger MiniTFGPTConfig model with strict=False."""


def _add_char_gpt_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("checkpoint", type=Path,
                        help="the model's state_dict: a torch.save file (.pt/.pth) or a .safetensors file")
    vocab = parser.add_mutually_exclusive_group(required=True)
    vocab.add_argument("--vocab", type=Path,
                       help="JSON list of the characters in id order (or a {character: id} JSON object)")
    vocab.add_argument("--training-text", type=Path,
                       help="the training text; its sorted distinct characters are the vocabulary "
                            "(as the original builds it)")
    parser.add_argument("--num-heads", type=count,
                        help="number of attention heads (n_head): the weights cannot tell it; "
                             "required unless --config gives it")
    parser.add_argument("--config", type=Path,
                        help="optional JSON of the original constructor arguments (vocab_size, block_size, n_embd, "
                             "n_head, n_layer, dropout); checked against the weights")


def _add_frawdllm_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("checkpoint",
                        help="a FrawdLLM training checkpoint (.pt with model_state_dict and config), a bare state_dict "
                             "(.pt or .safetensors), a Hugging Face folder made by FrawdLLM's convert_to_hf.py, or "
                             "the Hub repo id (owner/name) of one")
    parser.add_argument("--tokenizer", type=Path,
                        help="FrawdLLM's tokenizer: the `tokenizers` JSON of its byte-level BPE (required for a "
                             "checkpoint file; a published folder's own tokenizer.json is the default there)")
    parser.add_argument("--num-heads", type=count,
                        help="number of attention heads (n_head); needed only for a bare state_dict whose size "
                             f"matches none of FrawdLLM's presets ({', '.join(FRAWDLLM_PRESET_NAMES)})")
    parser.add_argument("--context-length", type=count,
                        help="context_length; needed only for a bare RoPE state_dict saved without its mask buffers")
    parser.add_argument("--config", type=Path,
                        help="optional JSON of FrawdLLM ModelConfig fields (n_head, context_length, dropout, token "
                             "ids, ...); checked against the checkpoint")
    parser.add_argument("--revision", help="branch, tag or commit of a Hub repo id (default: main)")


def _add_miniembed_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("checkpoint", type=Path,
                        help="MiniEmbed's weights: model.safetensors, or model.pt (a state_dict or a dict holding one)")
    parser.add_argument("--tokenizer", type=Path, required=True,
                        help="MiniEmbed's tokenizer.json ({vocab_size, word_to_id})")
    parser.add_argument("--config", type=Path,
                        help="MiniEmbed's config.json (constructor arguments); gives the head count, dropout and "
                             "pad id")
    parser.add_argument("--num-heads", type=count,
                        help="number of attention heads, when config.json is not at hand")
    parser.add_argument("--max-length", type=count,
                        help="max_seq_len, needed only when the weights lack the positional table")


def _add_hkproj_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("checkpoint", type=Path,
                        help="tmodel_XX.pt (a dict with model_state_dict) or a bare state_dict (.pt or .safetensors)")
    parser.add_argument("--source-tokenizer", type=Path, required=True, help="tokenizer_{lang_src}.json")
    parser.add_argument("--target-tokenizer", type=Path, required=True, help="tokenizer_{lang_tgt}.json")
    parser.add_argument("--num-heads", type=count,
                        help="attention heads h (not in the weights; hkproj's train.py uses the default h=8); "
                             "required unless --config gives h")
    parser.add_argument("--norm-type", default="auto", choices=HKPROJ_NORM_TYPES,
                        help="the LayerNormalization formula; auto infers it from the gains when they can tell "
                             "(per-feature gains, or scalar gains far below 1)")
    parser.add_argument("--config", type=Path,
                        help="optional JSON of build_transformer arguments (src_vocab_size, ..., h, dropout, d_ff); "
                             "checked against the weights")
    parser.add_argument("--max-length", type=count,
                        help="seq_len, needed only when the weights lack the positional tables")


def _add_embedding_layer_arguments(parser: argparse.ArgumentParser, what: str, default_prefix: str,
                                   model: str) -> None:
    parser.add_argument("checkpoint", type=Path, help=f"the {what}'s state_dict (.pt/.pth or .safetensors)")
    parser.add_argument("--prefix", default=default_prefix,
                        help=f"prefix of the written weight names (default {default_prefix!r}: loads into {model})")


class ConvertSource(NamedTuple):
    """One `minitf convert` sub-command: its help and its own arguments (hf_minitf.conversion.base.SOURCES names
    the module that runs it)."""

    summary: str
    description: str
    add_arguments: Callable[[argparse.ArgumentParser], None]


CONVERT_SOURCES = {
    "char-gpt": ConvertSource("nanoGPT-style character GPT -> MiniTFGPTForCausalLM + char tokenizer",
                              CHAR_GPT_DESCRIPTION, _add_char_gpt_arguments),
    "frawdllm": ConvertSource("FrawdLLM checkpoint, published folder or Hub repo id (learned or RoPE, chat models "
                              "too) -> MiniTFGPTForCausalLM + its BPE tokenizer",
                              FRAWDLLM_DESCRIPTION, _add_frawdllm_arguments),
    "miniembed": ConvertSource("MiniEmbed embedding model -> MiniTFEncoderModel + tokenizer + SentenceTransformer",
                               MINIEMBED_DESCRIPTION, _add_miniembed_arguments),
    "hkproj": ConvertSource("hkproj pytorch-transformer translation model -> MiniTFSeq2SeqForConditionalGeneration",
                            HKPROJ_DESCRIPTION, _add_hkproj_arguments),
    "transformer-embedding": ConvertSource(
        "Transformer-embedding layer (TransformerEmbedding) alone -> MiniTF encoder embedding weights",
        TRANSFORMER_EMBEDDING_DESCRIPTION,
        partial(_add_embedding_layer_arguments, what="TransformerEmbedding layer", default_prefix="",
                model="MiniTFEncoderModel")),
    "frawdllm-embeddings": ConvertSource(
        "FrawdLLM's Embeddings layer alone -> MiniTF GPT embedding weights",
        FRAWDLLM_EMBEDDINGS_DESCRIPTION,
        partial(_add_embedding_layer_arguments, what="FrawdLLM Embeddings layer", default_prefix="model.",
                model="MiniTFGPTForCausalLM")),
}


def add_convert_arguments(parser: argparse.ArgumentParser, source: str) -> None:
    """The arguments of `minitf convert SOURCE`: the source's own, then where and in which dtype to write."""
    CONVERT_SOURCES[source].add_arguments(parser)
    _add_out(parser, what="the converted files")
    parser.add_argument("--dtype", default="auto", choices=("auto", *DTYPE_NAMES),
                        help="dtype of the saved weights (default: the checkpoint's)")


def add_convert_parser(commands) -> argparse.ArgumentParser:
    """Add `convert`, with one sub-command per source (its name is `args.source`), to an argparse sub-parser set."""
    convert = commands.add_parser(
        "convert", help="convert a checkpoint of the original code into a Hugging Face folder "
                        "(`minitf convert --help` for the sources)", description=CONVERT_DESCRIPTION,
    )
    sources = convert.add_subparsers(dest="source", required=True, metavar="SOURCE")
    for name, source in CONVERT_SOURCES.items():
        add_convert_arguments(sources.add_parser(name, help=source.summary, description=source.description,
                                                 formatter_class=argparse.RawDescriptionHelpFormatter), name)
    return convert


# `minitf export`: one sub-command per output format (hf_minitf.export.EXPORTERS runs each).
EXPORT_DESCRIPTION = (
    "Export a MiniTF model folder (saved, trained, converted, or a Hub repo id) to a format that runs without "
    "hf_minitf and without trust_remote_code. Only exact exports are made: a model the format cannot express "
    "exactly is refused with one line naming the config field. `FORMAT --help` says what each format is."
)
NATIVE_EXPORT_DESCRIPTION = """\
Write the model as the transformers architecture that computes the same function, with its tokenizer,
generation config and a model card (no .py files, no auto_map):

- GPT, learned positions -> GPT2LMHeadModel (Conv1D weights are the transposed Linear weights)
- GPT, rotary positions  -> GPTNeoXForCausalLM (sequential residual, full rotary; qkv regrouped per head,
  interleaved rotary pairs permuted to rotate-half order)
- encoder               -> a SentenceTransformer folder (Transformer + mean Pooling + Normalize) around
  XLMRobertaXLModel (word embeddings pre-scaled, positions at XLM-R's padding_idx + 1 offset)

The folder loads with AutoModelForCausalLM / SentenceTransformer without trust_remote_code, in transformers
4.x too, and serves with `transformers serve` or vLLM. Refused (nothing written): the seq2seq family (no
native encoder-decoder is exact), a learned-position GPT with context_overflow="crop" (set "error" to export
it), an encoder without pad_token_id."""

GGUF_EXPORT_DESCRIPTION = """\
Write a GPT model as one GGUF file for llama.cpp, Ollama and LM Studio: llama.cpp's `gpt2` architecture for
learned positions, `gptneox` for rotary positions, with the tokenizer inside (byte-level BPE as llama.cpp's
`gpt2` tokenizer model; a character tokenizer is rewritten as a byte-level vocabulary with the merges that
build its multi-byte characters), the context length, the special tokens and the chat template if the
tokenizer has one.

--dtype: f32 (exact weights), f16 (half-precision weights), q8_0 (8-bit blocks of 32 with a scale, llama.cpp's
Q8_0; norms and biases stay f32). Refused: encoder and seq2seq models, activations other than gelu (llama.cpp's
GPT-2 and GPT-NeoX graphs compute GELU only), and what `export native` refuses."""


def _add_export_source(parser: argparse.ArgumentParser, out_help: str) -> None:
    parser.add_argument("source", metavar="SRC",
                        help="a MiniTF model folder (saved, trained or converted) or a Hub repo id (owner/name; its "
                             "code is never downloaded)")
    parser.add_argument("out", type=Path, metavar="OUT", help=out_help)
    parser.add_argument("--revision", default=None, metavar="REV", help="branch, tag or commit of a Hub repo id")


def _add_native_export_arguments(parser: argparse.ArgumentParser) -> None:
    _add_export_source(parser, "folder to write (must be empty unless --overwrite)")
    parser.add_argument("--overwrite", action="store_true", help="replace a non-empty OUT model folder (nothing else)")


GGUF_DTYPE_NAMES = ("f32", "f16", "q8_0")


def _add_gguf_export_arguments(parser: argparse.ArgumentParser) -> None:
    _add_export_source(parser, "the .gguf file to write (must not exist unless --overwrite)")
    parser.add_argument("--dtype", default="f16", choices=GGUF_DTYPE_NAMES,
                        help="weight type of the matrices (default: f16); norms and biases stay f32")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing OUT GGUF file (nothing else)")


class ExportFormat(NamedTuple):
    """One `minitf export` sub-command: its help and its arguments (its runner is `hf_minitf.export.EXPORTERS`)."""

    summary: str
    description: str
    add_arguments: Callable[[argparse.ArgumentParser], None]


EXPORT_FORMATS = {
    "native": ExportFormat("GPT -> GPT2LMHeadModel / GPTNeoXForCausalLM, encoder -> XLMRobertaXLModel "
                           "SentenceTransformer: loads without trust_remote_code",
                           NATIVE_EXPORT_DESCRIPTION, _add_native_export_arguments),
    "gguf": ExportFormat("GPT -> one GGUF file (llama.cpp gpt2 / gptneox, tokenizer inside) for llama.cpp, Ollama",
                         GGUF_EXPORT_DESCRIPTION, _add_gguf_export_arguments),
}


def add_export_parser(commands) -> argparse.ArgumentParser:
    """Add `export`, with one sub-command per format of EXPORT_FORMATS, to an argparse sub-parser set."""
    export = commands.add_parser(
        "export", help="export a model to run without hf_minitf: native transformers, GGUF, CTranslate2, ONNX "
                         "(`minitf export --help`)",
        description=EXPORT_DESCRIPTION,
    )
    formats = export.add_subparsers(dest="format", required=True, metavar="FORMAT")
    for name, export_format in EXPORT_FORMATS.items():
        export_format.add_arguments(formats.add_parser(name, help=export_format.summary,
                                                       description=export_format.description,
                                                       formatter_class=argparse.RawDescriptionHelpFormatter))
    return export


# The engine exports (hf_minitf.export_ctranslate2, hf_minitf.export_onnx), added to EXPORT_FORMATS.
CTRANSLATE2_EXPORT_DESCRIPTION = """\
Write a GPT as a CTranslate2 Generator folder, a seq2seq model as a CTranslate2 Translator folder (the C++
inference engine: `pip install ctranslate2`), with the tokenizer files and a README. `minitf generate` /
`minitf translate` run such a folder in CTranslate2 and print what the MiniTF folder prints.

- GPT: learned positions as the position table, rotary positions as CTranslate2's rotary attention
  (interleaved pairs or halves, as the model has them)
- seq2seq: pre-norm Transformer, ReLU, separate source and target vocabularies, the interleaved sinusoid
  as an explicit position table, the norms' eps from the config (hkproj's first norm as the exact LayerNorm)

--quantization: float32 (MiniTF's greedy tokens), int8, int8_float32 (8-bit weights; measure before using:
they can change tokens), bfloat16. Refused (nothing written): encoder models (use `export onnx`),
context_overflow="crop", a generation config with use_cache=False, hkproj's "std + eps" norms,
activations CTranslate2 lacks."""

ONNX_EXPORT_DESCRIPTION = """\
Write an encoder as ONNX for ONNX Runtime in a copy of its SentenceTransformer folder: onnx/model.onnx
(float32; the same embeddings within 1e-5), inputs input_ids and attention_mask with dynamic batch and
sequence axes, output last_hidden_state. --quantize int8 adds onnx/model_quint8_avx2.onnx (ONNX Runtime's
dynamic 8-bit quantization of the matrix products; cosine to float32 about 0.9999), which `minitf embed`
then runs. The README in the folder has the ONNX Runtime code (tokenizer, session, masked mean, normalize)
that needs no optimum. Refused: GPT and seq2seq models (use `export ctranslate2`), pooling other than mean."""

CTRANSLATE2_QUANTIZATIONS = ("float32", "int8", "int8_float32", "bfloat16")


def _add_ctranslate2_export_arguments(parser: argparse.ArgumentParser) -> None:
    _add_native_export_arguments(parser)
    parser.add_argument("--quantization", default="float32", choices=CTRANSLATE2_QUANTIZATIONS,
                        help="weight type CTranslate2 stores (default: float32, MiniTF's greedy tokens)")


def _add_onnx_export_arguments(parser: argparse.ArgumentParser) -> None:
    _add_native_export_arguments(parser)
    parser.add_argument("--quantize", default=None, choices=("int8",),
                        help="also write the dynamic 8-bit model (onnx/model_quint8_avx2.onnx)")


EXPORT_FORMATS.update({
    "ctranslate2": ExportFormat("GPT -> ctranslate2.Generator, seq2seq -> ctranslate2.Translator folder",
                                CTRANSLATE2_EXPORT_DESCRIPTION, _add_ctranslate2_export_arguments),
    "onnx": ExportFormat("encoder -> ONNX (+ int8) in a SentenceTransformer folder, for ONNX Runtime",
                         ONNX_EXPORT_DESCRIPTION, _add_onnx_export_arguments),
})


PUSH_DESCRIPTION = (
    "Upload a model folder, with its model card, to the Hugging Face Hub. The folder is checked first: config.json "
    "and safetensors weights, no pickles or training state."
)


def add_push_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments of `minitf push`."""
    parser.add_argument("folder", type=Path, metavar="DIR",
                        help="a folder written by save_pretrained, a training command or minitf convert")
    parser.add_argument("repo_id", metavar="REPO_ID", help="the model repo to push to, as namespace/name")
    parser.add_argument("--private", action="store_true", help="create the repo as private (if it does not exist)")
    parser.add_argument("--revision", default=None, metavar="REV",
                        help="branch to push to (created from main if missing; default: main)")
    parser.add_argument("--license", default=None, metavar="ID",
                        help="license identifier written into the model card, e.g. mit or apache-2.0")
    parser.add_argument("--commit-message", default=None, metavar="TEXT", help="message of the Hub commit")
    parser.add_argument("--token", default=None,
                        help="Hub token with write access (default: the logged-in token or HF_TOKEN)")
    parser.add_argument("--native", action="store_true",
                        help="upload the model exported to its native transformers architecture (`minitf export "
                             "native`: loads without trust_remote_code) instead of the MiniTF folder")
    parser.add_argument("--gguf", default=None, metavar="TYPES",
                        help="with --native, GPT only: also upload GGUF files for llama.cpp and Ollama, of these "
                             f"comma-separated types ({', '.join(GGUF_DTYPE_NAMES)}), e.g. f16,q8_0")


SERVE_DESCRIPTION = """\
Serve model folders over an OpenAI-compatible HTTP API, on transformers' own server (`transformers serve`):
the same routes, request and response schemas and streaming.

- a GPT folder (saved, trained, converted, a native GPT-2/GPT-NeoX folder, or a Hub repo id) answers
  POST /v1/completions, and POST /v1/chat/completions and /v1/responses when its tokenizer has a chat template
  (without one: HTTP 400 pointing to /v1/completions);
- an encoder folder answers POST /v1/embeddings (concurrent requests are encoded in shared batches);
- a seq2seq (translation) folder answers POST /v1/completions, the prompt being the text to translate.
GET /v1/models lists the served models (named as given here), GET /health answers {"status": "ok"}.
Errors answer HTTP 4xx in OpenAI's error shape. See docs/serving.md for curl and openai-client examples."""


def add_serve_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments of `minitf serve`."""
    parser.add_argument("models", nargs="+", metavar="SRC",
                        help="model folder(s) or Hub repo id(s) to serve; requests name each by the text given here")
    parser.add_argument("--host", default="127.0.0.1",
                        help="address to listen on (default: 127.0.0.1, this machine only; 0.0.0.0 opens the server "
                             "to the network: set --api-key)")
    parser.add_argument("--port", type=port_number, default=8000, help="port to listen on (default: 8000)")
    parser.add_argument("--dtype", default="auto", choices=("auto", *DTYPE_NAMES),
                        help="dtype to load the weights in (default: the saved weights')")
    parser.add_argument("--device", default="auto", help="device to run on, e.g. cpu, cuda, cuda:1 (default: a GPU if "
                                                         "there is one)")
    parser.add_argument("--continuous-batching", action="store_true",
                        help="generate for concurrent requests together (transformers' continuous batching with "
                             "paged attention) instead of one request after another")
    parser.add_argument("--cb-num-blocks", type=count, default=None,
                        help="KV cache size for continuous batching, in blocks of 256 tokens (default: 32 on a CPU, "
                             "from the free memory on a GPU)")
    parser.add_argument("--cb-max-batch-tokens", type=count, default=None,
                        help="most tokens in one continuous batching step (default: transformers')")
    parser.add_argument("--api-key", default=None,
                        help="require `Authorization: Bearer KEY` on every route (default: the MINITF_API_KEY "
                             "environment variable; none when unset)")
    parser.add_argument("--trust-remote-code", action="store_true",
                        help="run the model code a folder or repo ships (not needed for MiniTF folders with hf_minitf "
                             "installed)")
    parser.add_argument("--log-level", default="info", choices=("critical", "error", "warning", "info", "debug"),
                        help="server log level (default: info)")


def build_parser() -> ArgumentParser:
    """The full `minitf` parser (argparse only: building it imports nothing heavy)."""
    parser = ArgumentParser(
        prog="minitf",
        description="Small from-scratch transformers as Hugging Face models: train them on built-in tasks or your "
                    "own data, use them, convert checkpoints of the original code, publish them.",
    )
    parser.add_argument("--version", action="version", version=f"minitf (hf-minitf) {_version()}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=ArgumentParser)

    quickstart = commands.add_parser(
        "quickstart", help="train, save, reload and evaluate one small model of each family",
        description="The main job, offline: train a gpt, an encoder (sentence embeddings) and a seq2seq "
                    "(translation) model on generated tasks, save three complete folders (weights, tokenizer, model "
                    "card, loss_curve.png), load them back through pipeline('text-generation'), SentenceTransformer "
                    "and pipeline('minitf-translation'), and report held-out figures beside chance.",
    )
    _add_out(quickstart, default="quickstart_models", what="the three model folders")
    quickstart.add_argument("--steps-scale", type=steps_scale, default=1.0,
                            help="multiply every model's training steps (default: 1; 0.5 halves the run)")
    quickstart.add_argument("--seed", type=random_seed, default=0, help="seed of the tasks and the training (default: 0)")
    quickstart.add_argument("--no-progress", action="store_true", help="no progress bars")

    _add_train(commands)
    _add_use_commands(commands)
    add_convert_parser(commands)
    add_export_parser(commands)
    add_push_arguments(commands.add_parser("push", help="upload a model folder with its card to the Hugging Face Hub",
                                           description=PUSH_DESCRIPTION))
    add_serve_arguments(commands.add_parser(
        "serve", help="serve model folders over an OpenAI-compatible HTTP API (transformers' server)",
        description=SERVE_DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter))
    return parser


def _exit_on_sigterm(signal_number: int, frame) -> None:
    raise SystemExit(128 + signal_number)


@contextlib.contextmanager
def sigterm_exits():
    """While a command runs, SIGTERM (`kill`, `timeout`, `docker stop`, job schedulers) exits as Ctrl-C does:
    through the program's cleanup, so the atomic folder writers remove their half-written folders; status 143."""
    if threading.current_thread() is not threading.main_thread():  # handlers can only be set there
        yield
        return
    previous = signal.signal(signal.SIGTERM, _exit_on_sigterm)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


# The exit status of a process whose output pipe closed (128 + SIGPIPE), as `yes | head -1` ends `yes`.
BROKEN_PIPE_STATUS = 141


def _argument_names(parser: argparse.ArgumentParser, args: argparse.Namespace) -> dict[str, str]:
    """Each argument of the command `args` ran as its help shows it (`PROMPT`, `--out`), by its destination."""
    while True:
        commands = next((action for action in parser._actions if isinstance(action, argparse._SubParsersAction)), None)
        if commands is None:
            break
        parser = commands.choices[getattr(args, commands.dest)]
    return {action.dest: action.option_strings[-1] if action.option_strings else
            action.metavar if isinstance(action.metavar, str) else action.dest.upper() for action in parser._actions}


def _not_utf8(args: argparse.Namespace, parser: argparse.ArgumentParser) -> str | None:
    """What is wrong with the first argument holding bytes that are not UTF-8 (Python keeps them as surrogate
    escapes, which tokenizers refuse with a TypeError and safetensors and tokenizers refuse in paths), or None."""
    for name, value in vars(args).items():
        values = value if isinstance(value, list) else [value]
        for index, text in enumerate(str(item) for item in values if isinstance(item, (str, Path))):
            position = next((at for at, char in enumerate(text) if "\udc80" <= char <= "\udcff"), None)
            if position is not None:
                shown = _argument_names(parser, args).get(name, name)
                which = f" {index + 1}" if isinstance(value, list) and len(value) > 1 else ""
                return (f"{shown}{which} is not UTF-8 (byte {ord(text[position]) - 0xDC00:#04x} at character "
                        f"{position}); give it in UTF-8 (a file or folder name too: safetensors and tokenizers open "
                        "only UTF-8 paths)")
    return None


def _command_name(args: argparse.Namespace) -> str:
    return " ".join(part for part in (args.command, getattr(args, "source", None) if args.command == "convert" else
                                      getattr(args, "format", None) if args.command == "export" else None) if part)


def main(argv: list[str] | None = None) -> int:
    """Run `minitf ARGS` and return its exit status (0: done, 2: wrong arguments or unusable input, 141: its output
    pipe closed, as `minitf generate ... | head -1` closes it)."""
    parser = build_parser()
    args = parser.parse_args(sys.argv[1:] if argv is None else list(argv))
    problem = _not_utf8(args, parser)
    if problem is None and sys.stdout is None:  # started with `>&-`: whatever the command prints would be lost
        problem = "standard output is closed; redirect it to a file or /dev/null instead"
    if problem is not None:
        print(f"minitf {_command_name(args)}: error: {problem}", file=sys.stderr)
        return 2
    try:
        with sigterm_exits():
            status = getattr(_commands(), f"{args.command}_command")(args)
            sys.stdout.flush()  # a closed pipe shows here, not in the interpreter's flush at exit
        return status
    except BrokenPipeError:  # as pip and black: the reader left, so the rest of the output goes nowhere, quietly
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return BROKEN_PIPE_STATUS


def _commands():
    """hf_minitf.cli, imported without the import-time chatter of optional dependencies."""
    for name in IMPORT_TIME_LOGGERS:
        logging.getLogger(name).setLevel(logging.ERROR)
    return importlib.import_module("hf_minitf.cli")


if __name__ == "__main__":
    sys.exit(main())
