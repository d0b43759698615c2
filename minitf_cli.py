"""The `minitf` command: its arguments, help and dispatch.

This module sits beside the `hf_minitf` package, not inside it, because importing `hf_minitf` registers every
model with transformers (importing torch and transformers, seconds of CPU): `minitf --help`, `--version` and
wrong arguments are answered from here without that, and a command imports `hf_minitf.cli` only to run.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from importlib import metadata
from pathlib import Path

FAMILIES = ("gpt", "embedding", "seq2seq")
# Kept in step with hf_minitf.training.PRESETS (a test checks); listed here so that --help needs no import.
PRESET_NAMES = {
    "gpt": ("tiny", "shakespeare-char", "frawdllm-tiny", "frawdllm-small", "frawdllm-base", "frawdllm-100m",
            "frawdllm-tiny-llama", "frawdllm-small-llama"),
    "embedding": ("tiny", "miniembed-mini"),
    "seq2seq": ("tiny", "hkproj"),
}
# Loggers that speak while transformers imports torchao (the quantization extra): optional kernels that did not
# load and torch's deprecation of a registration torchao makes. Nothing a command's user can act on.
IMPORT_TIME_LOGGERS = ("torchao", "torch.utils._pytree")
# Commands whose arguments their own modules define (hf_minitf.conversion, hf_minitf.publishing).
DELEGATED = ("convert", "push")
DEFAULT_COLUMNS = {"gpt": "text", "embedding": "anchor,positive", "seq2seq": "source,target"}


class ArgumentParser(argparse.ArgumentParser):
    """argparse with one-line errors: `minitf train: error: ... (see minitf train --help)`, exit code 2."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")


def _number(kind: type, minimum: float, inclusive: bool = True, maximum: float | None = None):
    """An argparse type for numbers in a range, with an error that names the range."""
    bound = f">= {minimum}" if inclusive else f"> {minimum}"

    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {'an integer' if kind is int else 'a number'}, got {text!r}")
        if value != value or (value < minimum if inclusive else value <= minimum) or (
                maximum is not None and value >= maximum):
            limit = f"{bound} and < {maximum}" if maximum is not None else bound
            raise argparse.ArgumentTypeError(f"must be {limit}, got {text}")
        return value

    parse.__name__ = kind.__name__
    return parse


positive_int = _number(int, 1)
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
    parser.add_argument("--overwrite", action="store_true", help="replace a non-empty --out folder")


def _add_train(commands) -> None:
    train = commands.add_parser(
        "train", help="train a GPT, embedding or translation model on your data",
        description="Train a model from scratch on a local file or a `datasets` dataset through the ecosystem's "
                    "trainers (transformers' Trainer for GPT, sentence-transformers' trainer for embeddings, "
                    "Seq2SeqTrainer for translation), then write one complete folder: weights, tokenizer, model card "
                    "with held-out figures and loss_curve.png. Runs unchanged under `torchrun` or `accelerate launch`.",
    )
    families = train.add_subparsers(dest="family", required=True, metavar="FAMILY")
    texts = {
        "gpt": ("a causal language model on a text", "a .txt file (the whole text), .jsonl/.json rows with a text "
                "column, a folder saved by datasets' save_to_disk, or a Hub dataset name"),
        "embedding": ("an embedding model (SentenceTransformer) on (anchor, positive) pairs, in-batch negatives",
                      "a .tsv file (two tab-separated columns), .jsonl/.json rows, a folder saved by datasets' "
                      "save_to_disk, or a Hub dataset name"),
        "seq2seq": ("a translation model on (source, target) pairs", "a .tsv file (source<TAB>target), .jsonl/.json "
                    "rows, a folder saved by datasets' save_to_disk, or a Hub dataset name"),
    }
    for family in FAMILIES:
        summary, data = texts[family]
        parser = families.add_parser(family, help=summary, description=f"Train {summary}.")
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
            parser.add_argument("--vocab-size", type=positive_int, default=None, help="BPE vocabulary size")
            parser.add_argument("--block-size", type=positive_int, default=None,
                                help="tokens per training example (default: the preset's context)")
        elif family == "embedding":
            parser.add_argument("--vocab-size", type=positive_int, default=None, help="word vocabulary size")
        group = parser.add_argument_group("training")
        group.add_argument("--epochs", type=positive_float, default=1.0, help="passes over the data (default: 1)")
        group.add_argument("--max-steps", type=positive_int, default=None,
                           help="stop after this many optimizer steps (overrides --epochs)")
        group.add_argument("--batch-size", type=positive_int, default=32, help="examples per device and step (32)")
        group.add_argument("--learning-rate", type=positive_float, default=1e-3, help="peak learning rate (1e-3)")
        group.add_argument("--warmup", type=non_negative_float, default=0.0,
                           help="warmup: a fraction of the steps if < 1, else a number of steps (default: 0)")
        group.add_argument("--weight-decay", type=non_negative_float, default=0.0, help="AdamW weight decay (0)")
        group.add_argument("--eval-fraction", type=fraction, default=0.05,
                           help="fraction of the data held out for evaluation (default: 0.05, at most 1000 examples)")
        group.add_argument("--eval-steps", type=positive_int, default=None,
                           help="also evaluate every N steps (default: only at the end)")
        group.add_argument("--logging-steps", type=positive_int, default=10, help="log the loss every N steps (10)")
        group.add_argument("--checkpoint-dir", type=Path, default=None,
                           help="keep trainer checkpoints here (default: none are kept)")
        group.add_argument("--save-steps", type=positive_int, default=500,
                           help="checkpoint every N steps when --checkpoint-dir is given (500)")
        group.add_argument("--resume", action="store_true",
                           help="resume from the last checkpoint in --checkpoint-dir")
        group.add_argument("--mixed-precision", choices=("no", "fp16", "bf16"), default="no",
                           help="mixed precision training on a GPU (default: no)")
        group.add_argument("--report-to", default="none",
                           help="logging integration(s) of the Trainer, e.g. tensorboard or wandb (default: none)")
        group.add_argument("--seed", type=int, default=0, help="random seed (default: 0)")
        group.add_argument("--no-progress", action="store_true", help="no progress bars")


def _add_use_commands(commands) -> None:
    generate = commands.add_parser(
        "generate", help="continue prompts with a GPT folder, streaming the tokens",
        description="Load a GPT folder with AutoModelForCausalLM and continue each prompt, printing tokens as they "
                    "are generated (TextStreamer). Greedy unless --sample.",
    )
    generate.add_argument("model", type=Path, metavar="DIR", help="a folder written by minitf train/quickstart/convert")
    generate.add_argument("prompts", nargs="+", metavar="PROMPT", help="text(s) to continue")
    generate.add_argument("--max-new-tokens", type=positive_int, default=64, help="tokens to add (default: 64)")
    generate.add_argument("--sample", action="store_true", help="sample instead of greedy decoding")
    generate.add_argument("--temperature", type=positive_float, default=1.0, help="sampling temperature (1.0)")
    generate.add_argument("--top-k", type=positive_int, default=None, help="sample from the k likeliest tokens")
    generate.add_argument("--seed", type=int, default=0, help="random seed for sampling (default: 0)")

    embed = commands.add_parser(
        "embed", help="embed texts with an embedding folder (vectors or a similarity table)",
        description="Encode texts with SentenceTransformer(DIR). Prints one JSON vector per line, or with "
                    "--similarity the table of cosine similarities between the texts.",
    )
    embed.add_argument("model", type=Path, metavar="DIR", help="an embedding model folder")
    embed.add_argument("texts", nargs="+", metavar="TEXT", help="text(s) to embed")
    embed.add_argument("--similarity", action="store_true", help="print the similarity table instead of vectors")

    translate = commands.add_parser(
        "translate", help="translate texts with a translation folder",
        description="Translate each text with pipeline('minitf-translation', model=DIR).",
    )
    translate.add_argument("model", type=Path, metavar="DIR", help="a translation model folder")
    translate.add_argument("texts", nargs="+", metavar="TEXT", help="text(s) to translate")
    translate.add_argument("--num-beams", type=positive_int, default=1, help="beam search width (default: 1, greedy)")
    translate.add_argument("--max-new-tokens", type=positive_int, default=None,
                           help="longest translation in tokens (default: up to the model's positions)")

    info = commands.add_parser(
        "info", help="describe a model folder: family, parameters, sizes, files, card metadata",
        description="Describe a saved model folder without loading its weights.",
    )
    info.add_argument("model", type=Path, metavar="DIR", help="a model folder")


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
        "quickstart", help="train, save, reload and evaluate one small model of each family (a few CPU minutes)",
        description="The main job, offline: train a GPT, an embedding model and a translation model on generated "
                    "tasks, save three complete folders (weights, tokenizer, model card, loss_curve.png), load them "
                    "back through pipeline('text-generation'), SentenceTransformer and "
                    "pipeline('minitf-translation'), and report held-out figures beside chance.",
    )
    _add_out(quickstart, default="quickstart_models", what="the three model folders")
    quickstart.add_argument("--steps-scale", type=positive_float, default=1.0,
                            help="multiply every model's training steps (default: 1; 0.5 halves the run)")
    quickstart.add_argument("--seed", type=int, default=0, help="seed of the tasks and the training (default: 0)")
    quickstart.add_argument("--no-progress", action="store_true", help="no progress bars")

    _add_train(commands)
    _add_use_commands(commands)
    # `convert` and `push` take their arguments from their own modules, loaded when they run.
    for name, summary in (("convert", "convert a checkpoint of the original code into a Hugging Face folder "
                                      "(`minitf convert --help` for the sources)"),
                          ("push", "upload a model folder with its card to the Hugging Face Hub "
                                   "(`minitf push --help` for the options)")):
        commands.add_parser(name, help=summary, add_help=False)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run `minitf ARGS` and return its exit status (0: done, 2: wrong arguments or unusable input)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv and argv[0] in DELEGATED:
        return getattr(_commands(), f"{argv[0]}_command")(argv[1:])
    args = build_parser().parse_args(argv)
    return getattr(_commands(), f"{args.command}_command")(args)


def _commands():
    """hf_minitf.cli, imported without the import-time chatter of optional dependencies."""
    for name in IMPORT_TIME_LOGGERS:
        logging.getLogger(name).setLevel(logging.ERROR)
    return importlib.import_module("hf_minitf.cli")


if __name__ == "__main__":
    sys.exit(main())
