"""docs/publishing.md shows the quickstart's three cards as a real run renders them (tools/render_quickstart_cards.py).

A full quickstart takes minutes, so the test runs a short one (the same code, a hundredth of the steps) and compares
each card's structure with the page's: the same cards, the same metadata keys, the same headings. A page that shows
cards a changed template no longer writes fails; `python tools/render_quickstart_cards.py --write` renders them anew.
"""

import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

from card_lint import sections  # noqa: E402
from render_quickstart_cards import (  # noqa: E402
    END,
    PAGE,
    START,
    quickstart_cards,
    render_block,
    rendered_cards,
    replace_block,
)


def structure(card: str) -> tuple[list[str], list[str]]:
    """The card's top-level metadata keys and its headings (level and title)."""
    _, metadata, body = card.split("---\n", 2)
    headings = [f"{'#' * section.level} {section.title}" for section in sections(body)[1:]]
    return sorted(yaml.safe_load(metadata) or {}), headings


def test_the_rendered_block_reads_back_as_the_cards_it_holds():
    """The cards' own code fences and `<details>` (sentence-transformers' template has one) survive the round trip,
    and no line of the block closes its text block early (tests/test_docs.py reads the page's blocks)."""
    cards = {
        "gpt": "---\nlicense: mit\n---\n\n# A\n\n```python\nprint(1)\n```\n",
        "encoder": "---\n---\n# B\n\n<details><summary>Click</summary>\n\n</details>\n\n```\nplain\n```\n",
    }
    block = render_block(cards)
    assert rendered_cards(block) == cards
    assert [line for line in block.splitlines() if line.strip().startswith("```")] == ["```text", "```"] * 2


def test_publishing_page_shows_the_quickstart_cards_as_a_run_renders_them():
    shown = rendered_cards(PAGE.read_text(encoding="utf-8"))
    assert shown is not None, (
        f"{PAGE.name} has no rendered quickstart cards: run tools/render_quickstart_cards.py --write"
    )
    rendered = quickstart_cards(steps_scale=0.01)
    assert list(shown) == list(rendered)
    for folder, card in rendered.items():
        assert structure(shown[folder]) == structure(card), folder


def test_write_replaces_only_the_marked_block_and_refuses_a_page_without_markers():
    page = f"# Publishing\n\nbefore\n\n{START}\nold cards\n{END}\n\nafter\n"
    block = render_block({"gpt": "# new card\n"})
    assert replace_block(page, block) == f"# Publishing\n\nbefore\n\n{block}\n\nafter\n"
    with pytest.raises(SystemExit, match="has no <!-- quickstart-cards --> ... <!-- /quickstart-cards --> markers"):
        replace_block("# Publishing\n", block)
