"""`minitf export FORMAT SRC OUT`: write a model in a format that runs without hf_minitf, one sub-command per format
of `hf_minitf.catalog.exports`, each read from its object (`hf_minitf.export.formats`: help, options, writer)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

from hf_minitf.catalog.exports import EXPORT_DESCRIPTION
from hf_minitf.catalog.publishing import CARRIED_LICENSE_DEFAULT
from hf_minitf.catalog.verification import NO_VERIFY_HELP
from hf_minitf.commands.common import add_catalog_commands, add_license, quiet_transformers, reports_errors
from hf_minitf.export.formats import export_formats

HELP = "export a model to run without hf_minitf: native transformers, GGUF, CTranslate2, ONNX, a web page (`minitf export --help`)"


def _add_export_source(parser: argparse.ArgumentParser, out_help: str, overwrite_help: str) -> None:
    """What every export takes: SRC, OUT, --revision, --license and --overwrite."""
    parser.add_argument(
        "source",
        metavar="SRC",
        help="a MiniTF model folder (saved, trained or converted) or a Hub repo id (owner/name; its "
        "code is never downloaded)",
    )
    parser.add_argument("out", type=Path, metavar="OUT", help=out_help)
    parser.add_argument("--revision", default=None, metavar="REV", help="branch, tag or commit of a Hub repo id")
    add_license(parser, CARRIED_LICENSE_DEFAULT)
    parser.add_argument("--overwrite", action="store_true", help=overwrite_help)


FORMATS = export_formats()
# Each format's own options and its writer (the export function called with the parsed arguments, returning the
# lines to print), as its object declares them.
FORMAT_ARGUMENTS: dict[str, Callable[[argparse.ArgumentParser], None]] = {
    name: export.add_arguments for name, export in FORMATS.items()
}
WRITERS: dict[str, Callable[[argparse.Namespace], str]] = {name: export.write for name, export in FORMATS.items()}


def add_format_arguments(parser: argparse.ArgumentParser, name: str) -> None:
    """The arguments of `minitf export NAME`: those of every export (OUT a file or a folder, as the format says),
    the format's own, then whether to verify the export."""
    _add_export_source(parser, *FORMATS[name].out)
    FORMAT_ARGUMENTS[name](parser)
    parser.add_argument("--no-verify", action="store_true", help=NO_VERIFY_HELP)


def add_parser(commands) -> argparse.ArgumentParser:
    """`export`, with one sub-command per format (its name is `args.format`)."""
    return add_catalog_commands(
        commands, "export", HELP, EXPORT_DESCRIPTION, "format", FORMATS, add_format_arguments, run
    )


@reports_errors(lambda args: f"export {args.format}", out="OUT")
def run(args: argparse.Namespace) -> int:
    """`minitf export FORMAT SRC OUT ...`: the format's writer, as its object names it."""
    quiet_transformers()  # loading bars and notes of the source model: nothing the user acts on
    print(WRITERS[args.format](args))
    if args.no_verify:
        return 0
    from hf_minitf.commands.verify import verify_after_export

    return verify_after_export(args.out, args.source, args.revision, f"export {args.format}")
