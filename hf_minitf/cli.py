"""`minitf`: the command line of hf_minitf."""

from __future__ import annotations

import argparse
from pathlib import Path


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="minitf",
        description="Small from-scratch transformers as Hugging Face models: demo and checkpoint conversion.",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    demo = commands.add_parser(
        "demo",
        help="build a small GPT, save it, reload it with AutoModelForCausalLM and pipeline, print a generation",
        description="Train a tiny character GPT on a rhyme (seconds on a CPU), save it as a Hugging Face folder, "
        "load it back through AutoModelForCausalLM and pipeline('text-generation') and print what it generates.",
    )
    demo.add_argument("--out", type=Path, default=Path("demo_model"),
                      help="folder to save the model and tokenizer in (default: ./demo_model)")
    demo.add_argument("--steps", type=int, default=300, help="training steps (default: 300)")
    demo.add_argument("--prompt", default="Twinkle", help="text to continue (default: 'Twinkle')")

    from .conversion import add_convert_parser

    add_convert_parser(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "demo":
        from .demo import run

        run(args.out, steps=args.steps, prompt=args.prompt)
        return 0
    return args.handler(args)


if __name__ == "__main__":
    raise SystemExit(main())
