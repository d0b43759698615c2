"""`minitf convert SOURCE CHECKPOINT --out DIR [...]`, one SOURCE per original codebase (and embedding layer).

The sources, their help and their arguments are defined in the `minitf_cli` module beside the package (so that
`minitf convert ... --help` and wrong arguments need no torch); this module runs a parsed command, and
`python -m hf_minitf.conversion` and `python -m hf_minitf.conversion.<module>` parse the same arguments on their own.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from minitf_cli import (
    CONVERT_DESCRIPTION, CONVERT_SOURCES, add_convert_arguments, add_convert_parser, add_convert_sources, sigterm_exits,
)

from .checkpoint import ConversionError
from .output import check_output_dir, input_paths


def run_conversion(source: str, args: argparse.Namespace) -> int:
    """Run a parsed `minitf convert SOURCE` command: 0 when the folder was written, 2 with one error line."""
    from transformers.utils import logging

    logging.disable_progress_bar()  # stderr holds the summary's notes or one error line, not save/load bars
    entry = CONVERT_SOURCES[source]
    try:
        check_output_dir(args.out, args.overwrite, input_paths(args))
        return getattr(importlib.import_module(f"{__package__}.{entry.module}"), entry.runner)(args)
    except ConversionError as error:
        print(f"minitf convert {source}: error: {error}", file=sys.stderr)
        return 2
    except OSError as error:  # disk full, a read-only folder: the output folder was left as it was
        reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        print(f"minitf convert {source}: error: cannot write {args.out}: {reason}", file=sys.stderr)
        return 2


def run_module(source: str, argv: list[str] | None = None) -> int:
    """Entry point of `python -m hf_minitf.conversion.<module>`: the one sub-command, on its own."""
    entry = CONVERT_SOURCES[source]
    parser = argparse.ArgumentParser(prog=f"python -m {__package__}.{entry.module}", description=entry.description,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_convert_arguments(parser, source)
    return run_conversion(source, parser.parse_args(argv))


def main(argv: list[str] | None = None) -> int:
    """Entry point of `python -m hf_minitf.conversion SOURCE ...` (the same as `minitf convert SOURCE ...`)."""
    parser = argparse.ArgumentParser(prog="python -m hf_minitf.conversion", description=CONVERT_DESCRIPTION)
    add_convert_sources(parser)
    args = parser.parse_args(argv)
    with sigterm_exits():
        return run_conversion(args.source, args)


__all__ = ["add_convert_parser", "main", "run_conversion", "run_module"]
