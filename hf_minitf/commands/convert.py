"""`minitf convert SOURCE ...`: convert a checkpoint of an original codebase into a Hugging Face folder, one
sub-command per source of `hf_minitf.catalog.converters` (its help is there; its arguments here)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from hf_minitf.catalog.converters import CONVERTERS
from hf_minitf.catalog.limits import DTYPE_NAMES, HKPROJ_NORM_TYPES
from hf_minitf.catalog.presets import FRAWDLLM_PRESETS
from hf_minitf.catalog.publishing import converted_license_default
from hf_minitf.commands.common import add_catalog_commands, add_license, add_out, count, reports_errors

HELP = "convert a checkpoint of the original code into a Hugging Face folder (`minitf convert --help` for the sources)"
# `minitf convert`: one sub-command per original codebase. Each description is its converter's documentation: what
# it reads, what it infers from the weights and what must be given.
CONVERT_DESCRIPTION = (
    "Convert a checkpoint trained with one of the original codebases into a complete Hugging Face folder "
    "(model.safetensors, config, generation config, model code, tokenizer, model card). Checkpoints are read "
    "without running pickled code; the output folder appears only when the conversion succeeded. `SOURCE --help` "
    "says what each source needs and what is inferred."
)


def _add_converted_license(parser: argparse.ArgumentParser, source: str) -> None:
    """`--license` of a source whose conversion writes a model card."""
    add_license(parser, converted_license_default(CONVERTERS[source].project, CONVERTERS[source].license))


def _add_checkpoint_file(parser: argparse.ArgumentParser, help: str) -> None:
    """The CHECKPOINT positional of a source read from a local file."""
    parser.add_argument("checkpoint", type=Path, help=help)


def _add_char_gpt_arguments(parser: argparse.ArgumentParser) -> None:
    _add_checkpoint_file(parser, "the model's state_dict: a torch.save file (.pt/.pth) or a .safetensors file")
    vocab = parser.add_mutually_exclusive_group(required=True)
    vocab.add_argument(
        "--vocab", type=Path, help="JSON list of the characters in id order (or a {character: id} JSON object)"
    )
    vocab.add_argument(
        "--training-text",
        type=Path,
        help="the training text; its sorted distinct characters are the vocabulary (as the original builds it)",
    )
    parser.add_argument(
        "--num-heads",
        type=count,
        help="number of attention heads (n_head): the weights cannot tell it; required unless --config gives it",
    )
    parser.add_argument(
        "--config",
        type=Path,
        help="optional JSON of the original constructor arguments (vocab_size, block_size, n_embd, "
        "n_head, n_layer, dropout); checked against the weights",
    )
    _add_converted_license(parser, "char-gpt")


def _add_frawdllm_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "checkpoint",
        help="a FrawdLLM training checkpoint (.pt with model_state_dict and config), a bare state_dict "
        "(.pt or .safetensors), a Hugging Face folder made by FrawdLLM's convert_to_hf.py, or "
        "the Hub repo id (owner/name) of one",
    )
    parser.add_argument(
        "--tokenizer",
        type=Path,
        help="FrawdLLM's tokenizer: the `tokenizers` JSON of its byte-level BPE (required for a "
        "checkpoint file; a published folder's own tokenizer.json is the default there)",
    )
    parser.add_argument(
        "--num-heads",
        type=count,
        help="number of attention heads (n_head); needed only for a bare state_dict whose size "
        f"matches none of FrawdLLM's presets ({', '.join(FRAWDLLM_PRESETS)})",
    )
    parser.add_argument(
        "--context-length",
        type=count,
        help="context_length; needed only for a bare RoPE state_dict saved without its mask buffers",
    )
    parser.add_argument(
        "--config",
        type=Path,
        help="optional JSON of FrawdLLM ModelConfig fields (n_head, context_length, dropout, token "
        "ids, ...); checked against the checkpoint",
    )
    parser.add_argument("--revision", help="branch, tag or commit of a Hub repo id (default: main)")
    _add_converted_license(parser, "frawdllm")


def _add_miniembed_arguments(parser: argparse.ArgumentParser) -> None:
    _add_checkpoint_file(
        parser, "MiniEmbed's weights: model.safetensors, or model.pt (a state_dict or a dict holding one)"
    )
    parser.add_argument(
        "--tokenizer", type=Path, required=True, help="MiniEmbed's tokenizer.json ({vocab_size, word_to_id})"
    )
    parser.add_argument(
        "--config",
        type=Path,
        help="MiniEmbed's config.json (constructor arguments); gives the head count, dropout and pad id",
    )
    parser.add_argument("--num-heads", type=count, help="number of attention heads, when config.json is not at hand")
    parser.add_argument(
        "--max-length", type=count, help="max_seq_len, needed only when the weights lack the positional table"
    )
    _add_converted_license(parser, "miniembed")


def _add_hkproj_arguments(parser: argparse.ArgumentParser) -> None:
    _add_checkpoint_file(
        parser, "tmodel_XX.pt (a dict with model_state_dict) or a bare state_dict (.pt or .safetensors)"
    )
    parser.add_argument("--source-tokenizer", type=Path, required=True, help="tokenizer_{lang_src}.json")
    parser.add_argument("--target-tokenizer", type=Path, required=True, help="tokenizer_{lang_tgt}.json")
    parser.add_argument(
        "--num-heads",
        type=count,
        help="attention heads h (not in the weights; hkproj's train.py uses the default h=8); "
        "required unless --config gives h",
    )
    parser.add_argument(
        "--norm-type",
        default="auto",
        choices=HKPROJ_NORM_TYPES,
        help="the LayerNormalization formula; auto infers it from the gains when they can tell "
        "(per-feature gains, or scalar gains far below 1)",
    )
    parser.add_argument(
        "--config",
        type=Path,
        help="optional JSON of build_transformer arguments (src_vocab_size, ..., h, dropout, d_ff); "
        "checked against the weights",
    )
    parser.add_argument(
        "--max-length", type=count, help="seq_len, needed only when the weights lack the positional tables"
    )
    _add_converted_license(parser, "hkproj")


def _add_embedding_layer_arguments(parser: argparse.ArgumentParser, what: str, default_prefix: str, model: str) -> None:
    _add_checkpoint_file(parser, f"the {what}'s state_dict (.pt/.pth or .safetensors)")
    parser.add_argument(
        "--prefix",
        default=default_prefix,
        help=f"prefix of the written weight names (default {default_prefix!r}: loads into {model})",
    )


# Each source's own arguments.
SOURCE_ARGUMENTS: dict[str, Callable[[argparse.ArgumentParser], None]] = {
    "char-gpt": _add_char_gpt_arguments,
    "frawdllm": _add_frawdllm_arguments,
    "miniembed": _add_miniembed_arguments,
    "hkproj": _add_hkproj_arguments,
    "transformer-embedding": partial(
        _add_embedding_layer_arguments, what="TransformerEmbedding layer", default_prefix="", model="MiniTFEncoderModel"
    ),
    "frawdllm-embeddings": partial(
        _add_embedding_layer_arguments,
        what="FrawdLLM Embeddings layer",
        default_prefix="model.",
        model="MiniTFGPTForCausalLM",
    ),
}


def add_convert_arguments(parser: argparse.ArgumentParser, source: str) -> None:
    """The arguments of `minitf convert SOURCE`: the source's own, then where and in which dtype to write."""
    SOURCE_ARGUMENTS[source](parser)
    add_out(parser, what="the converted files")
    parser.add_argument(
        "--dtype",
        default="auto",
        choices=("auto", *DTYPE_NAMES),
        help="dtype of the saved weights (default: the checkpoint's)",
    )


def add_parser(commands) -> argparse.ArgumentParser:
    """`convert`, with one sub-command per source (its name is `args.source`)."""
    return add_catalog_commands(
        commands, "convert", HELP, CONVERT_DESCRIPTION, "source", CONVERTERS, add_convert_arguments, run
    )


def _convert(args: argparse.Namespace, convert: Callable[..., Any], what: str, *options: str, **given: Any) -> int:
    """Run `convert` on the parsed checkpoint into --out, with the source's `options` (each the parsed argument of
    the same name), `given`, and the --dtype, --overwrite and --license every source takes; print what was
    inferred."""
    from hf_minitf.conversion.base import conversion_summary

    chosen = {option: getattr(args, option) for option in options}
    converted = convert(
        args.checkpoint, args.out, **chosen, **given, dtype=args.dtype, overwrite=args.overwrite, license=args.license
    )
    print(conversion_summary(converted, f"{what} {args.checkpoint}", args.out))
    return 0


def _convert_embedding_layer(
    args: argparse.Namespace, convert: Callable[..., Any], what: str, config_class: str
) -> int:
    """Run an embedding layer's `convert` and write its weights into --out."""
    from hf_minitf.conversion.base import save_embedding_layer

    weights, fields = convert(args.checkpoint, prefix=args.prefix)
    saved = save_embedding_layer(
        weights, fields, args.out, what, config_class, args.checkpoint, dtype=args.dtype, overwrite=args.overwrite
    )
    print(saved)
    return 0


def run_char_gpt(args: argparse.Namespace) -> int:
    from hf_minitf.conversion.char_gpt import convert_char_gpt

    options = ("vocab", "training_text", "num_heads")
    return _convert(args, convert_char_gpt, "character GPT", *options, original_config=args.config)


def run_frawdllm(args: argparse.Namespace) -> int:
    from hf_minitf.conversion.frawdllm import convert_frawdllm

    options = ("tokenizer", "num_heads", "config", "context_length", "revision")
    return _convert(args, convert_frawdllm, "FrawdLLM", *options)


def run_miniembed(args: argparse.Namespace) -> int:
    from hf_minitf.conversion.miniembed import convert_miniembed

    return _convert(args, convert_miniembed, "MiniEmbed", "tokenizer", "config", "num_heads", "max_length")


def run_hkproj(args: argparse.Namespace) -> int:
    from hf_minitf.conversion.hkproj import convert_hkproj

    options = ("source_tokenizer", "target_tokenizer", "num_heads", "norm_type", "config", "max_length")
    return _convert(args, convert_hkproj, "hkproj translation model", *options)


def run_transformer_embedding(args: argparse.Namespace) -> int:
    from hf_minitf.conversion.miniembed import convert_transformer_embedding

    return _convert_embedding_layer(
        args, convert_transformer_embedding, "Transformer-embedding layer", "MiniTFEncoderConfig"
    )


def run_frawdllm_embeddings(args: argparse.Namespace) -> int:
    from hf_minitf.conversion.frawdllm import convert_frawdllm_embeddings

    return _convert_embedding_layer(args, convert_frawdllm_embeddings, "FrawdLLM Embeddings layer", "MiniTFGPTConfig")


# Each source's runner: its converter called with the parsed arguments.
RUNNERS: dict[str, Callable[[argparse.Namespace], int]] = {
    "char-gpt": run_char_gpt,
    "frawdllm": run_frawdllm,
    "miniembed": run_miniembed,
    "hkproj": run_hkproj,
    "transformer-embedding": run_transformer_embedding,
    "frawdllm-embeddings": run_frawdllm_embeddings,
}


@reports_errors(lambda args: f"convert {args.source}")
def run(args: argparse.Namespace) -> int:
    """`minitf convert SOURCE ...`: that source's runner."""
    from transformers.utils import logging

    logging.disable_progress_bar()  # stderr holds the summary's notes or one error line, not save/load bars
    return RUNNERS[args.source](args)
