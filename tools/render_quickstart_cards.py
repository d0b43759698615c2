"""Render the quickstart's three model cards (GPT, encoder, translator) from a real `minitf quickstart` run into
docs/publishing.md, between the markers `<!-- quickstart-cards -->` and `<!-- /quickstart-cards -->`.

    python tools/render_quickstart_cards.py            # print the block
    python tools/render_quickstart_cards.py --write    # replace it in docs/publishing.md

Each card is shown as the run wrote its README.md, in a ```text block under a `<details>` line naming it; the card's
own code fences are written with tildes (~~~python, as Markdown allows), so that they do not close that block. The
run takes the quickstart's full steps (minutes on two cores); `--steps-scale` shortens it (tests/test_rendered_cards.py
compares the structure of a short run's cards with the page's).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import re
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "publishing.md"
START, END = "<!-- quickstart-cards -->", "<!-- /quickstart-cards -->"
OUT = "qs"
"""The quickstart's output folder, relative to the run's working folder (`minitf quickstart --out qs`)."""


def quickstart_cards(steps_scale: float = 1.0) -> dict[str, str]:
    """family folder -> its README.md, from `minitf quickstart --out qs` run in a fresh temporary folder."""
    from hf_minitf.training.quickstart import FOLDERS, QuickstartSteps, run

    previous = Path.cwd()
    with tempfile.TemporaryDirectory(prefix="quickstart_cards_") as work:
        os.chdir(work)
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                run(OUT, steps=QuickstartSteps().scaled(steps_scale), progress=False)
            return {
                folder: (Path(work) / OUT / folder / "README.md").read_text(encoding="utf-8")
                for folder in FOLDERS.values()
            }
        finally:
            os.chdir(previous)


BACKTICKS, TILDES = re.compile(r"^```", re.MULTILINE), re.compile(r"^~~~", re.MULTILINE)


def render_block(cards: dict[str, str]) -> str:
    """The Markdown between the markers: each card in a text block under a `<details>` line."""
    parts = [START, ""]
    for folder, card in cards.items():
        shown = BACKTICKS.sub("~~~", card.rstrip("\n"))
        parts += [
            f"<details><summary>{OUT}/{folder}/README.md</summary>",
            "",
            "```text",
            shown,
            "```",
            "",
            "</details>",
            "",
        ]
    return "\n".join([*parts, END])


def rendered_cards(page_text: str) -> dict[str, str] | None:
    """The cards the page shows between the markers (folder -> card text), or None where it has no markers."""
    if START not in page_text or END not in page_text:
        return None
    block = page_text.split(START, 1)[1].split(END, 1)[0]
    shown = re.findall(
        rf"<details><summary>{OUT}/(\w+)/README\.md</summary>\n\n```text\n(.*?)\n```\n", block, re.DOTALL
    )
    return {folder: TILDES.sub("```", card) + "\n" for folder, card in shown}


def replace_block(page_text: str, block: str) -> str:
    """`page_text` with the marked block replaced by `block`; a page without the markers is refused."""
    if START not in page_text or END not in page_text:
        raise SystemExit(f"{PAGE} has no {START} ... {END} markers: add them where the cards go, then run again.")
    before, rest = page_text.split(START, 1)
    return before + block + rest.split(END, 1)[1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--write", action="store_true", help=f"replace the block in {PAGE.relative_to(ROOT)}")
    parser.add_argument("--steps-scale", type=float, default=1.0, help="the quickstart's steps times this (default 1)")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))  # this checkout's hf_minitf, whatever is installed
    block = render_block(quickstart_cards(args.steps_scale))
    if not args.write:
        print(block)
        return 0
    text = replace_block(PAGE.read_text(encoding="utf-8"), block)
    staged = PAGE.with_name(f".{PAGE.name}.writing")
    staged.write_text(text, encoding="utf-8")
    os.replace(staged, PAGE)  # the page whole or as it was
    print(f"Wrote the quickstart's cards into {PAGE}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
