"""`minitf convert {char-gpt,frawdllm,miniembed,hkproj} CHECKPOINT --out DIR [...]`.

`add_convert_parser` adds the command to the `minitf` parser; `python -m hf_minitf.conversion` and
`python -m hf_minitf.conversion.<module>` run the same commands on their own.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path

from .base import DTYPES
from .checkpoint import ConversionError

# sub-command -> module in this package (each has DESCRIPTION, add_arguments(parser) and run(args)).
SOURCES = {
    "char-gpt": ("char_gpt", "character-level GPT (seed 004, nanoGPT family) -> MiniTFGPTForCausalLM + char tokenizer"),
    "frawdllm": ("frawdllm", "FrawdLLM checkpoint (learned or RoPE) -> MiniTFGPTForCausalLM + its BPE tokenizer"),
    "miniembed": ("miniembed",
                  "MiniEmbed embedding model (seed 000) -> MiniTFEncoderModel + tokenizer + SentenceTransformer"),
    "hkproj": ("hkproj",
               "hkproj pytorch-transformer translation model (seed 003) -> MiniTFSeq2SeqForConditionalGeneration"),
}


def _module(source: str):
    return importlib.import_module(f"{__package__}.{SOURCES[source][0]}")


def add_output_arguments(parser: argparse.ArgumentParser) -> None:
    """The options every source shares: where to write, in which dtype, and whether to replace a folder."""
    parser.add_argument("--out", type=Path, required=True, help="output folder (must be empty unless --overwrite)")
    parser.add_argument("--dtype", default="auto", choices=["auto", *DTYPES],
                        help="dtype of the saved weights (default: the checkpoint's)")
    parser.add_argument("--overwrite", action="store_true", help="replace a non-empty --out folder")


def _handler(source: str):
    def handle(args: argparse.Namespace) -> int:
        try:
            return _module(source).run(args)
        except ConversionError as error:
            print(f"minitf convert {source}: error: {error}", file=sys.stderr)
            return 2

    return handle


def _add_source(commands, source: str) -> None:
    module = _module(source)
    parser = commands.add_parser(source, help=SOURCES[source][1], description=module.DESCRIPTION,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    module.add_arguments(parser)
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
    module = _module(source)
    parser = argparse.ArgumentParser(prog=f"python -m {module.__name__}", description=module.DESCRIPTION,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    module.add_arguments(parser)
    add_output_arguments(parser)
    return _handler(source)(parser.parse_args(argv))


def main(argv: list[str] | None = None) -> int:
    """Entry point of `python -m hf_minitf.conversion SOURCE ...` (the same as `minitf convert SOURCE ...`)."""
    parser = argparse.ArgumentParser(prog="python -m hf_minitf.conversion", description=DESCRIPTION)
    _add_sources(parser)
    args = parser.parse_args(argv)
    return args.handler(args)


__all__ = ["SOURCES", "add_convert_parser", "main", "run_module"]
