"""docs/ say what the commands do: a page that says what `minitf export gguf` refuses names no family the export
takes (docs/export.md said GGUF refuses encoders, then showed one exported)."""

import re
from pathlib import Path

from hf_minitf.export.formats import export_format

EXPORT_PAGE = Path(__file__).resolve().parents[2] / "docs" / "export.md"
# How a page names each family, as a word (a plural too): GPT-2 and GPT-NeoX are llama.cpp's graphs, not the family.
FAMILY_WORDS = {"gpt": r"GPTs?(?![-\w])", "encoder": r"encoders?\b", "seq2seq": r"(seq2seq|translators?)\b"}


def gguf_section(text: str) -> str:
    return text.split("\n## GGUF", 1)[1].split("\n## ", 1)[0]


def refused_families(section: str) -> set[str]:
    """The families named by the section's `Refused:` sentences, before their first parenthesis or comma."""
    named = set()
    for sentence in re.findall(r"Refused: ([^(,.]*)", " ".join(section.split())):
        named |= {family for family, word in FAMILY_WORDS.items() if re.search(rf"\b{word}", sentence)}
    return named


def test_the_gguf_page_refuses_only_what_the_export_refuses():
    section = gguf_section(EXPORT_PAGE.read_text())
    takes = set(export_format("gguf").families)
    refused = refused_families(section)
    assert refused and not refused & takes, f"docs/export.md says GGUF refuses {sorted(refused & takes)}"
    assert refused == {"gpt", "encoder", "seq2seq"} - takes
    assert not re.search(r"\bfamily only\b", section), "docs/export.md says GGUF takes one family"


def test_the_check_finds_the_contradiction():
    """The sentence the page had: encoders refused, which `export gguf` takes."""
    old = "\n## GGUF\nThe GPT family only, ...\nRefused: encoders and seq2seq models, and activations other than GELU"
    assert refused_families(gguf_section(old)) == {"encoder", "seq2seq"}
    assert re.search(r"\bfamily only\b", gguf_section(old))
