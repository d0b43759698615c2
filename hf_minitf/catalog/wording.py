"""How messages say things, once: the article before a word."""

from __future__ import annotations


def with_article(word: str) -> str:
    """`word` after "a" or "an", by its first letter: `an encoder model`, `a gpt model`, `an ONNX export`."""
    return f"{'an' if word[:1].lower() in 'aeiou' else 'a'} {word}"


__all__ = ["with_article"]
