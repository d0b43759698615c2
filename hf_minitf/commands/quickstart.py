"""`minitf quickstart`: train, save, reload and evaluate one small model of each family (hf_minitf.training.quickstart)."""

from __future__ import annotations

import argparse

from hf_minitf.catalog.publishing import QUICKSTART_LICENSE_DEFAULT
from hf_minitf.commands.common import add_license, add_out, random_seed, reports_errors, steps_scale

HELP = "train, save, reload and evaluate one small model of each family"
DESCRIPTION = (
    "The main job, offline: train a gpt, an encoder (sentence embeddings) and a seq2seq (translation) model on "
    "generated tasks, save three complete folders (weights, tokenizer, model card, and loss_curve.png with the plot "
    "extra), load them back through pipeline('text-generation'), SentenceTransformer and "
    "pipeline('minitf-translation'), and report held-out figures beside chance."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_out(parser, default="quickstart_models", what="the three model folders")
    add_license(parser, QUICKSTART_LICENSE_DEFAULT)
    parser.add_argument(
        "--steps-scale",
        type=steps_scale,
        default=1.0,
        help="multiply every model's training steps (default: 1; 0.5 halves the run)",
    )
    parser.add_argument("--seed", type=random_seed, default=0, help="seed of the tasks and the training (default: 0)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")


@reports_errors("quickstart")
def run(args: argparse.Namespace) -> int:
    from hf_minitf.training.quickstart import QuickstartSteps, run

    run(
        args.out,
        steps=QuickstartSteps().scaled(args.steps_scale),
        overwrite=args.overwrite,
        progress=not args.no_progress,
        seed=args.seed,
        license=args.license,
    )
    return 0
