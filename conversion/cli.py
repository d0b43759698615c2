"""`minitf convert SOURCE CHECKPOINT --out DIR [...]`, one SOURCE per original codebase (and embedding layer).

`add_convert_parser` adds the command to the `minitf` parser; `python -m hf_minitf.conversion` and
`python -m hf_minitf.conversion.<module>` run the same commands on their own.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable
from pathlib import Path

from .base import DTYPES
from .checkpoint import ConversionError
from .output import check_output_dir, input_paths

# sub-command -> (module in this package, help, entry): the module's DESCRIPTION, add_arguments(parser) and run(args)
# implement the command; entry "embeddings" names EMBEDDINGS_DESCRIPTION, add_embeddings_arguments, run_embeddings.
SOURCES = {
    "char-gpt": ("char_gpt", "nanoGPT-style character GPT -> MiniTFGPTForCausalLM + char tokenizer", ""),
    "frawdllm": ("frawdllm", "FrawdLLM checkpoint, published folder or Hub repo id (learned or RoPE, chat models too) "
                             "-> MiniTFGPTForCausalLM + its BPE tokenizer", ""),
    "miniembed": ("miniembed", "MiniEmbed embedding model -> MiniTFEncoderModel + tokenizer + SentenceTransformer", ""),
    "hkproj": ("hkproj", "hkproj pytorch-transformer translation model -> MiniTFSeq2SeqForConditionalGeneration", ""),
    "transformer-embedding": ("miniembed", "Transformer-embedding layer (TransformerEmbedding) alone -> MiniTF "
                                           "encoder embedding weights", "embeddings"),
    "frawdllm-embeddings": ("frawdllm", "FrawdLLM's Embeddings layer alone -> MiniTF GPT embedding weights",
                            "embeddings"),
}
ENTRY_NAMES = {"": ("DESCRIPTION", "add_arguments", "run"),
               "embeddings": ("EMBEDDINGS_DESCRIPTION", "add_embeddings_arguments", "run_embeddings")}


def _entry(source: str) -> tuple[str, Callable[[argparse.ArgumentParser], None], Callable[[argparse.Namespace], int]]:
    """The description, argument adder and runner of one sub-command."""
    module_name, _, entry = SOURCES[source]
    module = importlib.import_module(f"{__package__}.{module_name}")
    return tuple(getattr(module, name) for name in ENTRY_NAMES[entry])


def add_output_arguments(parser: argparse.ArgumentParser) -> None:
    """The options every source shares: where to write, in which dtype, and whether to replace a folder."""
    parser.add_argument("--out", type=Path, required=True, help="output folder (must be empty unless --overwrite)")
    parser.add_argument("--dtype", default="auto", choices=["auto", *DTYPES],
                        help="dtype of the saved weights (default: the checkpoint's)")
    parser.add_argument("--overwrite", action="store_true", help="replace a non-empty --out folder")


def _handler(source: str):
    def handle(args: argparse.Namespace) -> int:
        from transformers.utils import logging

        logging.disable_progress_bar()  # stderr holds the summary's notes or one error line, not save/load bars
        try:
            check_output_dir(args.out, args.overwrite, input_paths(args))
            return _entry(source)[2](args)
        except ConversionError as error:
            print(f"minitf convert {source}: error: {error}", file=sys.stderr)
            return 2
        except OSError as error:  # disk full, a read-only folder: the output folder was left as it was
            reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
            print(f"minitf convert {source}: error: cannot write {args.out}: {reason}", file=sys.stderr)
            return 2

    return handle


def _add_source(commands, source: str) -> None:
    description, add_arguments, _ = _entry(source)
    parser = commands.add_parser(source, help=SOURCES[source][1], description=description,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(parser)
    add_output_arguments(parser)
    parser.set_defaults(handler=_handler(source))


DESCRIPTION = ("Convert a checkpoint trained with one of the original codebases into a complete Hugging Face "
               "folder (model.safetensors, config, generation config, model code, tokenizer, model card). "
               "Checkpoints are read without running pickled code; the output folder appears only when the "
               "conversion succeeded. `SOURCE --help` says what each source needs and what is inferred.")


def _add_sources(parser: argparse.ArgumentParser) -> None:
    sources = parser.add_subparsers(dest="source", required=True, metavar="SOURCE")
    for source in SOURCES:
        _add_source(sources, source)


def add_convert_parser(subparsers) -> argparse.ArgumentParser:
    """Add `convert` with one sub-command per original codebase to an argparse sub-parser set."""
    convert = subparsers.add_parser(
        "convert", help="convert a checkpoint of the original code into a Hugging Face folder", description=DESCRIPTION
    )
    _add_sources(convert)
    return convert


def run_module(source: str, argv: list[str] | None = None) -> int:
    """Entry point of `python -m hf_minitf.conversion.<module>`: the one sub-command, on its own."""
    description, add_arguments, _ = _entry(source)
    parser = argparse.ArgumentParser(prog=f"python -m {__package__}.{SOURCES[source][0]}", description=description,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(parser)
    add_output_arguments(parser)
    return _handler(source)(parser.parse_args(argv))


def main(argv: list[str] | None = None) -> int:
    """Entry point of `python -m hf_minitf.conversion SOURCE ...` (the same as `minitf convert SOURCE ...`)."""
    parser = argparse.ArgumentParser(prog="python -m hf_minitf.conversion", description=DESCRIPTION)
    _add_sources(parser)
    args = parser.parse_args(argv)
    return args.handler(args)


__all__ = ["SOURCES", "add_convert_parser", "main", "run_module"]
