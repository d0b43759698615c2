"""The `minitf` commands, one module each: its help, its arguments and its `run(args) -> int` (0 done, 2 a one-line
error on stderr). Every module is light to import (heavy modules are imported inside `run`), so the parser that
`hf_minitf.cli` builds from them answers `--help` and wrong arguments without torch.

A command is either `HELP`, `DESCRIPTION`, `add_arguments(parser)` and `run(args)`, or `add_parser(commands)` for one
with sub-commands (`train FAMILY`, `convert SOURCE`, `export FORMAT`), which sets `run` on each sub-command.
"""

from __future__ import annotations

import argparse
import importlib

# The commands, in the order `minitf --help` lists them.
COMMANDS = (
    "quickstart",
    "train",
    "presets",
    "chat_template",
    "generate",
    "embed",
    "translate",
    "eval",
    "info",
    "convert",
    "export",
    "verify",
    "push",
    "serve",
)


def add_commands(commands: argparse._SubParsersAction) -> None:
    """Add every command to the `minitf` parser's sub-parsers; each parsed command's `args.run` runs it."""
    for name in COMMANDS:
        module = importlib.import_module(f"{__name__}.{name}")
        if hasattr(module, "add_parser"):
            module.add_parser(commands)
            continue
        parser = commands.add_parser(
            name, help=module.HELP, description=module.DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter
        )
        module.add_arguments(parser)
        parser.set_defaults(run=module.run)


__all__ = ["COMMANDS", "add_commands"]
