"""The "Runs in" table of a card: one row per runtime and file that `minitf verify` measured (how it agrees with the
MiniTF model, how fast it ran, with which versions), in the card's marked section `runs_in`, rendered from
model_cards/runs_in.md. A new measurement replaces the row of the same runtime and file and keeps the others; the
card is saved whole or not at all.
"""

from __future__ import annotations

import os
from dataclasses import astuple, dataclass, fields
from pathlib import Path

from huggingface_hub import ModelCard

from hf_minitf.cards.facts import read_card
from hf_minitf.cards.render import assemble_card, card_data, card_template, sections, set_section
from hf_minitf.cards.update import save_card
from hf_minitf.catalog.verification import RUNS_IN_SECTION, RUNS_IN_TEMPLATE, SPEED_MEASURE


@dataclass(frozen=True)
class RunRow:
    """One row of the table, as its cells' text, in the order of the columns."""

    runtime: str
    file: str
    precision: str
    size: str
    agreement: str
    speed: str
    date: str
    versions: str

    @property
    def key(self) -> tuple[str, str]:
        """What a later row replaces it by: the same runtime and file."""
        return self.runtime, self.file

    def cleaned(self) -> RunRow:
        """The row with each cell on one line and without the `|` that would split it."""
        return RunRow(*(" ".join(cell.replace("|", "/").split()) for cell in astuple(self)))


def render_runs_in(rows: list[RunRow]) -> str:
    """The section's Markdown: the heading, what was measured, the table."""
    import jinja2

    template = jinja2.Environment(autoescape=False, keep_trailing_newline=False).from_string(
        card_template(RUNS_IN_TEMPLATE)
    )
    return template.render(rows=[row.cleaned() for row in rows], speed_measure=SPEED_MEASURE)


def runs_in_rows(card: ModelCard | str) -> list[RunRow]:
    """The rows of the card's table (none when it has no such section)."""
    text = card.text if isinstance(card, ModelCard) else card
    lines = [line.strip() for line in sections(text).get(RUNS_IN_SECTION, "").splitlines()]
    table = [line for line in lines if line.startswith("|") and line.endswith("|")]
    cells = [[cell.strip() for cell in line[1:-1].split(" | ")] for line in table[2:]]  # after header, separator
    return [RunRow(*row) for row in cells if len(row) == len(fields(RunRow))]


def merged_rows(old: list[RunRow], new: list[RunRow]) -> list[RunRow]:
    """`old` with each row of `new` in place of the one of its runtime and file, or after them."""
    replacing = {row.key: row.cleaned() for row in new}
    rows = [replacing.pop(row.key, row) for row in old]
    return rows + list(replacing.values())


def with_runs_in(card: ModelCard, rows: list[RunRow]) -> ModelCard:
    """`card` with `rows` merged into its table (`merged_rows`)."""
    table = render_runs_in(merged_rows(runs_in_rows(card), rows))
    return assemble_card(card_data(card), set_section(card.text, RUNS_IN_SECTION, table))


def write_runs_in(path: str | os.PathLike, rows: list[RunRow]) -> bool:
    """Merge `rows` into the table of the card at `path`, saved whole (`save_card`); False when there is no card."""
    card = read_card(Path(path))
    if card is None:
        return False
    save_card(with_runs_in(card, rows), path)
    return True


__all__ = ["RunRow", "merged_rows", "render_runs_in", "runs_in_rows", "with_runs_in", "write_runs_in"]
