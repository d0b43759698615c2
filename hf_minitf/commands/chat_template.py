"""`minitf chat-template FOLDER NAME|FILE`: give a trained or converted GPT folder a chat template
(hf_minitf.tokenization.chat_templates)."""

from __future__ import annotations

import argparse
from pathlib import Path

from hf_minitf.catalog.chat_templates import CHAT_TEMPLATE_HELP
from hf_minitf.commands.common import model_folder, quiet_transformers, reports_errors

NAME = "chat-template"
HELP = "give a GPT folder a chat template (for chat fine-tuning and /v1/chat/completions)"
DESCRIPTION = (
    "Give a GPT folder (trained or converted) a chat template its vocabulary can spell, saved in its tokenizer. "
    "The special tokens a named template needs are added (with embedding rows for them when the model has too "
    "few), and the token that ends an assistant turn joins the generation config's eos_token_id, so generation "
    "stops at the end of an answer. The folder is rewritten whole or not at all. `minitf train gpt "
    "--chat-template` does the same while training."
)


def add_parser(commands) -> argparse.ArgumentParser:
    """`chat-template` (a module name cannot hold its hyphen, so the command is added here)."""
    parser = commands.add_parser(NAME, help=HELP, description=DESCRIPTION)
    parser.add_argument("folder", type=Path, metavar="FOLDER", help="a GPT folder")
    parser.add_argument("template", metavar="NAME|FILE", help=CHAT_TEMPLATE_HELP)
    parser.add_argument("--replace", action="store_true", help="replace the chat template the folder already has")
    parser.set_defaults(run=run)
    return parser


@reports_errors(NAME, out="FOLDER")
def run(args: argparse.Namespace) -> int:
    from hf_minitf.tokenization.chat_templates import set_chat_template

    quiet_transformers()
    folder = model_folder(args.folder)
    change = set_chat_template(folder, args.template, replace=args.replace)
    added = f"; added {', '.join(change.added_tokens)} as special tokens" if change.added_tokens else ""
    print(
        f"Gave {folder} the chat template {change.name}{added}; an assistant turn ends with {change.end_of_turn} "
        f"(id {change.end_of_turn_id}), where generation stops"
    )
    return 0
