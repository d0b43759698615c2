"""The example texts a card's snippets run on, chosen so that the model's own tokenizer can spell them: a held-out
(or training) text the trainer gives when there is one, else a common word the vocabulary spells, else words or
characters of the vocabulary itself. "Hello" is no example for a character model whose corpus has no capital H,
nor for a translator whose source vocabulary has 15 words.

Read from the folder's tokenizer file with `tokenizers` (no transformers tokenizer is loaded); a card written
without one (a model saved or pushed before its tokenizer is beside it) promises no example it cannot check: its
snippets run on PLACEHOLDER_TEXTS, which its text says to replace, until the next card written with the tokenizer
beside the model (a `save_pretrained` again, `minitf push`) chooses a spelled one.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path

GENERIC_PROMPTS = ("hello", "the", "a")
"""Words tried, in order, when no text of the model's data is known: lowercase, which a character vocabulary of
almost any English text spells (a capital H it often lacks), as a lowercased word vocabulary does."""
PROMPT_WORDS = 8
"""At most this many words of a known text make a generation prompt (the first half of its first line)."""
SENTENCE_WORDS = 16
"""At most this many words of a known text make an example sentence (its first line)."""
GENERIC_SENTENCES = ("the weather is lovely today", "it is so sunny outside", "he drove to the stadium")
"""Sentences tried first when a card needs several (an encoder's, to compare) and no text of the data is known."""
VOCABULARY_WORDS = 3
"""Words of a word-level vocabulary (its most frequent) that make an example when no known text is spelled."""
VOCABULARY_CHARACTERS = 5
"""Letters or digits of a character vocabulary that make an example when no known text or common word is spelled."""
PLACEHOLDER_TEXTS = ("YOUR TEXT", "YOUR SECOND TEXT", "YOUR THIRD TEXT")
"""What a card's snippets run on when no tokenizer can check an example (model_cards/use.md says to replace them)."""


def spelling_files() -> tuple[str, ...]:
    """The tokenizer files that read a prompt, in order: tokenizer.json, or a translator's source side."""
    from hf_minitf.modeling.tokenization_minitf_seq2seq import VOCAB_FILES_NAMES

    return ("tokenizer.json", VOCAB_FILES_NAMES["source_tokenizer_file"])


def _tokenizer_file(folder: Path) -> Path | None:
    """The first of `spelling_files` in `folder`, or None."""
    return next((folder / name for name in spelling_files() if (folder / name).is_file()), None)


class Speller:
    """Whether a text is written by a tokenizer without unknown tokens: no unknown id, and every character that is
    not white space is given back by decoding (a character vocabulary without an unknown token drops the others)."""

    def __init__(self, path: Path, max_tokens: int | None = None) -> None:
        from tokenizers import Tokenizer

        self.max_tokens = max_tokens

        self.tokenizer = Tokenizer.from_file(str(path))
        model = json.loads(self.tokenizer.to_str()).get("model", {})
        self.word_level = model.get("type") == "WordLevel"
        unknown = model.get("unk_token")
        self.unknown_id = self.tokenizer.token_to_id(unknown) if isinstance(unknown, str) else None

    def spells(self, text: str) -> bool:
        ids = self.tokenizer.encode(text, add_special_tokens=False).ids
        if not ids or self.unknown_id in ids:
            return False
        if self.max_tokens is not None and len(self.tokenizer.encode(text).ids) > self.max_tokens:
            return False
        normalizer = self.tokenizer.normalizer
        expected = normalizer.normalize_str(text) if normalizer is not None else text
        decoded = self.tokenizer.decode(ids, skip_special_tokens=True)
        return "".join(decoded.split()) == "".join(expected.split())

    @property
    def kind(self) -> str:
        """What one token of the vocabulary is: "word", "character" (every entry but the special ones one character,
        no merges) or "subword"."""
        if self.word_level:
            return "word"
        special = {token.content for token in self.tokenizer.get_added_tokens_decoder().values()}
        entries = [token for token in self.tokenizer.get_vocab() if token not in special]
        return "character" if entries and all(len(token) == 1 for token in entries) else "subword"

    def vocabulary_texts(self, count: int) -> list[str]:
        """`count` texts made of the vocabulary's own entries: its most frequent words (a word-level vocabulary lists
        them by frequency), else its letters and digits."""
        special = {token.content for token in self.tokenizer.get_added_tokens_decoder().values()}
        entries = sorted(self.tokenizer.get_vocab().items(), key=lambda item: item[1])
        words = [token for token, _ in entries if token not in special and token.isalnum()]
        if not self.word_level:
            words = [token for token in words if len(token) == 1]
        size = max(1, min(VOCABULARY_WORDS if self.word_level else VOCABULARY_CHARACTERS, len(words) // count))
        separator = " " if self.word_level else ""
        chunks = [separator.join(words[index : index + size]) for index in range(0, size * count, size)]
        return [chunk for chunk in chunks if chunk and self.spells(chunk)]


def data_examples(texts: Iterable[str], generation: bool) -> list[str]:
    """Texts of a model's data as examples: each one's first non-blank line; for a generation prompt the first
    half of its words (the model writes the rest), at most PROMPT_WORDS, else at most SENTENCE_WORDS."""
    examples = []
    for text in texts:
        line = next((line.strip() for line in text.splitlines() if line.strip()), "")
        words = line.split()
        keep = min(PROMPT_WORDS, max(1, len(words) // 2)) if generation else SENTENCE_WORDS
        if words:
            examples.append(" ".join(words[:keep]))
    return examples


def has_tokenizer(folder: str | os.PathLike | None) -> bool:
    """Whether `folder` holds a tokenizer file a card's example is checked with."""
    return folder is not None and _tokenizer_file(Path(folder)) is not None


def folder_speller(folder: str | os.PathLike | None, max_tokens: int | None = None) -> Speller | None:
    """The `Speller` of the folder's tokenizer file, refusing texts longer than `max_tokens` (special tokens
    included: what fits the model with the snippet's new tokens); None without a folder or one."""
    path = _tokenizer_file(Path(folder)) if folder is not None else None
    return Speller(path, max_tokens) if path is not None else None


def example_texts(speller: Speller | None, candidates: Iterable[str] = (), *, count: int = 1) -> list[str]:
    """`count` example texts the tokenizer spells (`Speller`), different from each other (in any case): the first
    `candidates` it spells (a given prompt, `data_examples`, a card's earlier ones), then GENERIC_SENTENCES (for
    several) and GENERIC_PROMPTS, then entries of the vocabulary. Without a tokenizer, the `candidates` (which the
    caller gives only where someone vouched for them: a given prompt, an earlier card's), then PLACEHOLDER_TEXTS (at
    most three): no text is promised that nothing checked. Fewer than `count` only when the vocabulary spells
    fewer."""
    if speller is None:
        vouched = list(dict.fromkeys(text for text in candidates if text.strip()))
        return [*vouched, *PLACEHOLDER_TEXTS][:count]
    chosen: list[str] = []
    seen: set[str] = set()
    generic = (*GENERIC_SENTENCES, *GENERIC_PROMPTS) if count > 1 else GENERIC_PROMPTS
    for group in (candidates, generic, speller.vocabulary_texts(count)):
        for text in group:
            if len(chosen) == count:
                return chosen
            if text.lower() not in seen and speller.spells(text):
                seen.add(text.lower())
                chosen.append(text)
    return chosen
