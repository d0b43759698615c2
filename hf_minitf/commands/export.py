"""`minitf export FORMAT SRC OUT`: write a model in a format that runs without hf_minitf, one sub-command per format
of `hf_minitf.catalog.exports`, each read from its object (`hf_minitf.export.formats`: help, options, writer)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

from hf_minitf.catalog.converters import CONVERTERS, ORIGINAL_EXPORT
from hf_minitf.catalog.exports import EXPORT_DESCRIPTION
from hf_minitf.catalog.publishing import CARRIED_LICENSE_DEFAULT
from hf_minitf.catalog.verification import NO_VERIFY_HELP
from hf_minitf.commands.common import (
    CatalogEntry,
    add_catalog_commands,
    add_license,
    quiet_transformers,
    reports_errors,
)
from hf_minitf.export.format import FOLDER_OUT
from hf_minitf.export.formats import export_formats

HELP = "export a model to run without hf_minitf: native transformers, GGUF, CTranslate2, ONNX, a web page, or back to its original project's files (`minitf export --help`)"


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


ORIGINAL = "original"
"""`minitf export original`: back to an original project's files, written by `hf_minitf.conversion.export_original`
(the conversion library knows the originals' layouts; no export format object, as `minitf verify` cannot run the
original code: the round trip through `minitf convert` is what the tests check)."""


def add_original_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments of `minitf export original`."""
    parser.add_argument(
        "source",
        metavar="FOLDER",
        help="a MiniTF model folder (converted, fine-tuned or trained), or the folder `minitf convert "
        "transformer-embedding/frawdllm-embeddings` wrote",
    )
    parser.add_argument("out", type=Path, metavar="OUT", help=FOLDER_OUT[0])
    parser.add_argument(
        "--format",
        dest="original_format",
        choices=tuple(CONVERTERS),
        help="the original project's format (default: the one the conversion recorded, else the one whose layout "
        "the folder fits)",
    )
    parser.add_argument("--overwrite", action="store_true", help=FOLDER_OUT[1])


def add_format_arguments(parser: argparse.ArgumentParser, name: str) -> None:
    """The arguments of `minitf export NAME`: those of every export (OUT a file or a folder, as the format says),
    the format's own, then whether to verify the export."""
    if name == ORIGINAL:
        add_original_arguments(parser)
        return
    _add_export_source(parser, *FORMATS[name].out)
    FORMAT_ARGUMENTS[name](parser)
    parser.add_argument("--no-verify", action="store_true", help=NO_VERIFY_HELP)


def add_parser(commands) -> argparse.ArgumentParser:
    """`export`, with one sub-command per format (its name is `args.format`)."""
    entries: dict[str, CatalogEntry] = {**FORMATS, ORIGINAL: ORIGINAL_EXPORT}
    return add_catalog_commands(
        commands, "export", HELP, EXPORT_DESCRIPTION, "format", entries, add_format_arguments, run
    )


@reports_errors(lambda args: f"export {args.format}", out="OUT")
def run(args: argparse.Namespace) -> int:
    """`minitf export FORMAT SRC OUT ...`: the format's writer, as its object names it."""
    quiet_transformers()  # loading bars and notes of the source model: nothing the user acts on
    if args.format == ORIGINAL:
        from hf_minitf.conversion import export_original

        exported = export_original(args.source, args.out, format=args.original_format, overwrite=args.overwrite)
        print(exported.summary(args.source))
        return 0
    print(WRITERS[args.format](args))
    if args.no_verify:
        return 0
    from hf_minitf.commands.verify import verify_after_export

    return verify_after_export(args.out, args.source, args.revision, f"export {args.format}")
