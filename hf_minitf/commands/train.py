"""`minitf train FAMILY`: train a model from scratch on a local file or a `datasets` dataset
(hf_minitf.training.trainers)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from hf_minitf.catalog.chat_templates import CHAT_TEMPLATE_HELP
from hf_minitf.catalog.families import FAMILIES
from hf_minitf.catalog.packaging import docs_page
from hf_minitf.catalog.presets import PRESETS
from hf_minitf.catalog.publishing import TRAINED_LICENSE_DEFAULT, check_language
from hf_minitf.commands.common import (
    CommandError,
    add_license,
    add_out,
    count,
    epochs,
    fraction,
    non_negative_float,
    positive_float,
    random_seed,
    reports_errors,
    vocab_size,
    warmup,
)

if TYPE_CHECKING:
    from hf_minitf.training.interrupts import TrainingInterrupted

HELP = "train a gpt, encoder (sentence embeddings) or seq2seq (translation) model on your data"
DESCRIPTION = (
    "Train a model from scratch on a local file or a `datasets` dataset through the ecosystem's trainers "
    "(transformers' Trainer for gpt, sentence-transformers' trainer for encoder, Seq2SeqTrainer for seq2seq), then "
    "write one complete folder: weights, tokenizer, model card with held-out figures, and loss_curve.png with the "
    "plot extra. Runs unchanged under `torchrun` or `accelerate launch`."
)


def add_parser(commands) -> argparse.ArgumentParser:
    """`train`, with one sub-command per family (its name is `args.family`, also when an alias was given)."""
    train = commands.add_parser("train", help=HELP, description=DESCRIPTION)
    families = train.add_subparsers(dest="family", required=True, metavar="FAMILY")
    for family in FAMILIES.values():
        parser = families.add_parser(
            family.name, aliases=family.aliases, help=family.summary, description=f"Train {family.summary}."
        )
        parser.set_defaults(family=family.name, run=run)
        add_family_arguments(parser, family.name)
    return train


def language_code(text: str) -> str:
    """The argparse type of `--source-language` and `--target-language`: an ISO 639 code, lowercased."""
    try:
        return check_language(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error).removeprefix("language ")) from None


def add_family_arguments(parser: argparse.ArgumentParser, name: str) -> None:
    family = FAMILIES[name]
    parser.add_argument("--data", required=True, metavar="PATH", help=f"training data: {family.training_data}")
    add_out(parser)
    add_license(parser, TRAINED_LICENSE_DEFAULT)
    parser.add_argument(
        "--preset",
        default="tiny",
        choices=tuple(PRESETS[name]),
        help="model size (default: tiny); `minitf presets` lists each one's sizes and what it is for",
    )
    columns = "column holding the text" if name == "gpt" else "the two columns of each pair, comma-separated"
    parser.add_argument(
        "--columns",
        default=family.default_columns,
        help=f"{columns} in jsonl/datasets data (default: {family.default_columns})",
    )
    parser.add_argument("--split", default="train", help="dataset split to train on (default: train)")
    if name == "gpt":
        parser.add_argument(
            "--tokenizer",
            choices=("char", "bpe"),
            default=None,
            help="char: one token per character; bpe: byte-level BPE trained on the data (default: the preset's)",
        )
        parser.add_argument("--vocab-size", type=vocab_size, default=None, help="BPE vocabulary size")
        parser.add_argument(
            "--block-size", type=count, default=None, help="tokens per training example (default: the preset's context)"
        )
        parser.add_argument("--chat-template", metavar="NAME|FILE", default=None, help=CHAT_TEMPLATE_HELP)
    elif name == "encoder":
        parser.add_argument("--vocab-size", type=vocab_size, default=None, help="word vocabulary size")
    else:
        for side in ("source", "target"):
            parser.add_argument(
                f"--{side}-language",
                type=language_code,
                default=None,
                metavar="CODE",
                help=f"ISO 639 code of the {side} language (en, it, ...): the card's `language:` and text name it "
                "(give both or neither)",
            )
    add_training_arguments(parser.add_argument_group("training"))


def add_training_arguments(group) -> None:
    group.add_argument("--epochs", type=epochs, default=1.0, help="passes over the data (default: 1)")
    group.add_argument(
        "--max-steps", type=count, default=None, help="stop after this many optimizer steps (overrides --epochs)"
    )
    group.add_argument("--batch-size", type=count, default=32, help="examples per device and step (32)")
    group.add_argument("--learning-rate", type=positive_float, default=1e-3, help="peak learning rate (1e-3)")
    group.add_argument(
        "--warmup",
        type=warmup,
        default=0.0,
        help="warmup: a fraction of the steps if < 1, else a number of steps (default: 0)",
    )
    group.add_argument("--weight-decay", type=non_negative_float, default=0.0, help="AdamW weight decay (0)")
    group.add_argument(
        "--eval-fraction",
        type=fraction,
        default=0.05,
        help="fraction of the data held out for evaluation (default: 0.05, at most 1000 examples)",
    )
    group.add_argument(
        "--eval-steps", type=count, default=None, help="also evaluate every N steps (default: only at the end)"
    )
    group.add_argument("--logging-steps", type=count, default=10, help="log the loss every N steps (10)")
    group.add_argument(
        "--checkpoint-dir",
        type=Path,
        default=None,
        help="keep trainer checkpoints here, and one at the step where Ctrl-C or SIGTERM stops the run (default: none "
        "are kept)",
    )
    group.add_argument(
        "--save-steps", type=count, default=500, help="checkpoint every N steps when --checkpoint-dir is given (500)"
    )
    group.add_argument("--resume", action="store_true", help="resume from the last checkpoint in --checkpoint-dir")
    group.add_argument(
        "--mixed-precision",
        choices=("no", "fp16", "bf16"),
        default="no",
        help="mixed precision training: fp16 on a GPU, bf16 on a GPU or a CPU with bf16 instructions (default: no)",
    )
    group.add_argument(
        "--compile",
        action="store_true",
        help="torch.compile the model for training (inductor): faster steps once the first ones have compiled "
        f"(tens of seconds, more for larger models); {docs_page('performance.md')} has the measured speed-up",
    )
    group.add_argument(
        "--report-to",
        default="none",
        help="logging integration(s) of the Trainer, e.g. tensorboard or wandb (default: none)",
    )
    group.add_argument("--seed", type=random_seed, default=0, help="random seed (default: 0)")
    group.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="progress bars on stderr (default: when stderr is a terminal); the log lines are written either way",
    )


def interrupted_line(interrupted: TrainingInterrupted, family: str, checkpoint_dir: Path | None) -> str:
    """What a run stopped by SIGINT or SIGTERM kept, and how to go on from it or keep something next time."""
    where = f"interrupted at step {interrupted.step} of {interrupted.max_steps}"
    if interrupted.checkpoint is not None:
        return (
            f"{where}: checkpoint saved to {interrupted.checkpoint}; resume with the same command plus --resume "
            f"(`minitf train {family} ... --checkpoint-dir {checkpoint_dir} --resume`)"
        )
    if checkpoint_dir is not None:  # the signal came after the last step's end: no step left to save at
        return f"{where}: no checkpoint saved at this step; --resume continues from the last one in {checkpoint_dir}"
    return (
        f"{where}: nothing was kept (no --checkpoint-dir); run again with --checkpoint-dir DIR to keep a checkpoint "
        "that Ctrl-C or SIGTERM saves and --resume continues from"
    )


@reports_errors("train")
def run(args: argparse.Namespace) -> int:
    from hf_minitf.safety.output_folders import OutputFolder, existing_paths, working_folder_refusal

    # The folders to write, checked before torch is imported (seconds) and before any work.
    out = OutputFolder(args.out, args.overwrite, [*existing_paths(args.data), args.checkpoint_dir])
    refusal = working_folder_refusal(args.checkpoint_dir) if args.checkpoint_dir is not None else None
    if refusal is not None:
        raise CommandError(refusal.format(out=f"--checkpoint-dir {args.checkpoint_dir}"))

    languages = [getattr(args, f"{side}_language", None) for side in ("source", "target")]
    if (languages[0] is None) != (languages[1] is None):
        raise CommandError(
            "--source-language and --target-language go together: give both ISO 639 codes (e.g. --source-language "
            "en --target-language it) or neither"
        )

    from hf_minitf.training import trainers as training
    from hf_minitf.training.data import hub_dataset_name, load_pairs, open_texts
    from hf_minitf.training.interrupts import TrainingInterrupted

    progress = sys.stderr is not None and sys.stderr.isatty() if args.progress is None else args.progress
    if not progress:  # also the bars of saving and loading weights
        from transformers.utils import logging

        logging.disable_progress_bar()
    data = Path(args.data)
    settings = training.TrainSettings(
        epochs=args.epochs,
        max_steps=args.max_steps or -1,
        batch_size=args.batch_size,
        learning_rate=args.learning_rate,
        warmup=args.warmup,
        weight_decay=args.weight_decay,
        seed=args.seed,
        logging_steps=args.logging_steps,
        eval_steps=args.eval_steps,
        save_steps=args.save_steps,
        checkpoint_dir=args.checkpoint_dir,
        resume=args.resume,
        mixed_precision=args.mixed_precision,
        compile=args.compile,
        report_to=args.report_to,
        progress=progress,
    )
    columns = [column.strip() for column in args.columns.split(",")]
    hub_id = hub_dataset_name(args.data)
    common = dict(
        preset=args.preset,
        settings=settings,
        eval_fraction=args.eval_fraction,
        dataset_name=hub_id or data.name or str(args.data),
        dataset_id=hub_id,
        license=args.license,
    )
    try:
        if args.family == "gpt":
            texts = open_texts(args.data, columns[0], args.split)
            result = training.train_gpt(
                texts,
                out,
                tokenizer=args.tokenizer,
                vocab_size=args.vocab_size,
                block_size=args.block_size,
                chat_template=args.chat_template,
                **common,
            )
        elif args.family == "encoder":
            pairs = load_pairs(args.data, columns, args.split)
            result = training.train_encoder(pairs, out, vocab_size=args.vocab_size, **common)
        else:
            pairs = load_pairs(args.data, columns, args.split)
            result = training.train_seq2seq(pairs, out, languages=[code for code in languages if code], **common)
    except TrainingInterrupted as interrupted:
        print(f"minitf train: {interrupted_line(interrupted, args.family, args.checkpoint_dir)}", file=sys.stderr)
        return interrupted.exit_status
    finally:
        training.end_distributed_training()
    if result.folder is not None:
        figures = ", ".join(f"{key} {value:.4g}" for key, value in result.eval_results.items())
        print(
            f"Saved {args.family} model ({result.model.num_parameters():,} parameters) to {result.folder}"
            + (f"; held out: {figures}" if figures else "")
        )
    return 0
