"""`minitf presets [FAMILY]`: the sizes `minitf train FAMILY --preset NAME` builds, a table per family from the one
place presets are declared (hf_minitf.catalog.presets), without torch."""

from __future__ import annotations

import argparse

from hf_minitf.catalog.families import FAMILIES, family_named
from hf_minitf.catalog.presets import PRESET_COLUMNS, PRESET_NOTE, PRESETS, preset_rows

HELP = "the model sizes `minitf train --preset` builds: layers, hidden size, heads, context, parameters, use"
DESCRIPTION = (
    "List each family's presets (`minitf train FAMILY --preset NAME`): layers, hidden size, attention heads, context "
    "length, vocabulary, parameters besides the embeddings, and what each is for."
)


def family_name(text: str) -> str:
    """The argparse type of FAMILY: a family's name or alias, as its name."""
    try:
        return family_named(text).name
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "family",
        nargs="?",
        type=family_name,
        metavar="FAMILY",
        help=f"only this family's presets ({', '.join(FAMILIES)}; default: all)",
    )


def table(rows: list[tuple[str, ...]]) -> list[str]:
    """Rows as lines of left-aligned columns two spaces apart, the last column as long as it is."""
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]) - 1)]
    return ["  ".join([*(cell.ljust(width) for cell, width in zip(row, widths)), row[-1]]) for row in rows]


def run(args: argparse.Namespace) -> int:
    families = [args.family] if args.family else list(PRESETS)
    blocks = []
    for family in families:
        rows = [PRESET_COLUMNS, *(tuple(map(str, row)) for row in preset_rows(family))]
        blocks.append("\n".join([f"{family} (minitf train {family} --preset NAME):", *table(rows)]))
    print("\n\n".join(blocks) + f"\n\n{PRESET_NOTE}")
    return 0
