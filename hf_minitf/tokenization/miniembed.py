"""MiniEmbed's word-level tokenizer as a Hugging Face fast tokenizer, and trainers for new encoder tokenizers.

MiniEmbed's `SimpleTokenizer` lowercases with Python's `str.lower`, strips, splits with Python's
`re.findall(r"\\b\\w+\\b|[^\\w\\s]", text)`, maps unknown words to [UNK] and wraps the ids as `[CLS] ... [SEP]`.
Built here from `tokenizers` parts only (normalizers, a Split pre-tokenizer, WordLevel, a template), so the saved
`tokenizer.json` loads with `AutoTokenizer` without this package. Two places where Rust and Python differ
are rewritten to agree with Python:

- `\\w` and `\\s`: Python's `\\w` is `str.isalnum()` or `_` (letters and numbers), Oniguruma's also takes
  combining marks and every connector punctuation; Python's `\\s` also takes the separators U+001C..U+001F.
  The split pattern spells Python's classes out (`[\\p{L}\\p{N}_]`, `[\\s\\x1C-\\x1F]`).
- `str.lower` turns a word-final capital sigma into `ς`; `tokenizers`' Lowercase maps each character alone
  (`σ`). A Replace normalizer with Python's Final_Sigma rule runs first.

Leftover differences are the Unicode versions of Python and of the Rust crates, for characters assigned in
one and not the other.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path

from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
from transformers import PreTrainedTokenizerFast

from hf_minitf.safety.json_files import read_json
from hf_minitf.tokenization.gpt import check_vocab_size_limit, wrap_tokenizer

TOKENIZER_ADVICE = "pass the tokenizer.json MiniEmbed saved, a JSON object with 'word_to_id'."

PAD, UNK, CLS, SEP = "[PAD]", "[UNK]", "[CLS]", "[SEP]"
SPECIAL_TOKENS = {PAD: 0, UNK: 1, CLS: 2, SEP: 3}

# Python's `\w` (str.isalnum() or "_") and `\s` (str.isspace()) written for Oniguruma, whose own classes differ.
_WORD = r"\p{L}\p{N}_"
_SPACE = r"\s\x{1C}-\x{1F}"
SPLIT_PATTERN = rf"[{_WORD}]+|[^{_WORD}{_SPACE}]"
# str.lower's Final_Sigma: a capital sigma becomes the final form when, skipping case-ignorable characters,
# the character before it is cased and the one after it is not (or there is none).
_CASED_NOT_IGNORABLE = r"[\p{Cased}&&\P{Case_Ignorable}]"
FINAL_SIGMA_PATTERN = (
    rf"(?<={_CASED_NOT_IGNORABLE}\p{{Case_Ignorable}}*)Σ(?!\p{{Case_Ignorable}}*{_CASED_NOT_IGNORABLE})"
)
# Subword pieces that continue a word (trained BPE tokenizers); decoded back onto the previous piece.
CONTINUING_SUBWORD_PREFIX = "##"


def _normalizer() -> normalizers.Normalizer:
    return normalizers.Sequence(
        [normalizers.Replace(Regex(FINAL_SIGMA_PATTERN), "ς"), normalizers.Lowercase(), normalizers.Strip()]
    )


def _pre_tokenizer() -> pre_tokenizers.PreTokenizer:
    return pre_tokenizers.Split(Regex(SPLIT_PATTERN), behavior="removed", invert=True)


def _wrap(tokenizer: Tokenizer, max_length: int, source: str = "The vocabulary") -> PreTrainedTokenizerFast:
    """Add the `[CLS] $A [SEP]` template and wrap as a transformers fast tokenizer that pads on the right.

    Special tokens written in the text are split like any other text (`split_special_tokens=True`), as the
    original does; only the template adds [CLS] and [SEP]. Padding and truncation are left to each call
    (`padding="max_length", truncation=True, max_length=...` gives the original's fixed-length rows).
    """
    if max_length < 2:
        raise ValueError(f"max_length must leave room for [CLS] and [SEP] (at least 2), got {max_length}.")
    for token, token_id in SPECIAL_TOKENS.items():
        if tokenizer.token_to_id(token) != token_id:
            raise ValueError(
                f"{source} must map {token} to {token_id} (MiniEmbed's special ids "
                f"{SPECIAL_TOKENS}), got {tokenizer.token_to_id(token)}."
            )
    tokenizer.post_processor = processors.TemplateProcessing(
        single=f"{CLS} $A {SEP}",
        pair=f"{CLS} $A {SEP} $B:1 {SEP}:1",
        special_tokens=[(CLS, SPECIAL_TOKENS[CLS]), (SEP, SPECIAL_TOKENS[SEP])],
    )
    tokenizer.no_padding()
    tokenizer.no_truncation()
    return wrap_tokenizer(
        tokenizer,
        {"pad_token": PAD, "unk_token": UNK, "cls_token": CLS, "sep_token": SEP},
        max_length,
        padding_side="right",
        truncation_side="right",
        split_special_tokens=True,
        model_input_names=["input_ids", "attention_mask"],
    )


def _empty_tokenizer(model: models.Model) -> Tokenizer:
    tokenizer = Tokenizer(model)
    tokenizer.normalizer = _normalizer()
    tokenizer.pre_tokenizer = _pre_tokenizer()
    return tokenizer


def miniembed_tokenizer(path_or_dict: str | os.PathLike | Mapping, max_length: int = 128) -> PreTrainedTokenizerFast:
    """A fast tokenizer equal to MiniEmbed's `SimpleTokenizer` for its `tokenizer.json` (`{vocab_size, word_to_id}`).

    `max_length` (the original's `encode` default, 128) becomes `model_max_length`. Calling the result with
    `padding="max_length", truncation=True` gives the original's rows: words cut to `max_length - 2`, then
    `[CLS] ... [SEP]`, then [PAD] up to `max_length`.
    """
    if isinstance(path_or_dict, Mapping):
        data, source = path_or_dict, "The MiniEmbed vocabulary"
    else:
        source = f"MiniEmbed tokenizer file {os.fspath(path_or_dict)}"
        try:
            data = read_json(Path(path_or_dict), object, advice=TOKENIZER_ADVICE)
        except FileNotFoundError:
            raise ValueError(f"{source} does not exist; pass the tokenizer.json MiniEmbed saved.") from None
        except OSError as error:
            raise ValueError(f"{source} cannot be read ({error}); {TOKENIZER_ADVICE}") from error
    if not isinstance(data, Mapping) or not isinstance(data.get("word_to_id"), Mapping):
        found = f"keys {sorted(data)}" if isinstance(data, Mapping) else f"a JSON {type(data).__name__}"
        raise ValueError(
            f"{source} must be a JSON object with a 'word_to_id' mapping of words to ids (and 'vocab_size'); "
            f"got {found}."
        )
    bad = [
        (word, index)
        for word, index in data["word_to_id"].items()
        if not isinstance(index, int) or isinstance(index, bool) or index < 0
    ]
    if bad:
        raise ValueError(f"{source}: word_to_id must map each word to an integer id >= 0; got {bad[:5]}.")
    vocab = {str(word): index for word, index in data["word_to_id"].items()}
    if len(set(vocab.values())) != len(vocab):
        raise ValueError(f"{source}: word_to_id maps two words to the same id; each id must belong to one word.")
    return _wrap(_empty_tokenizer(models.WordLevel(vocab=vocab, unk_token=UNK)), max_length, source)


def train_wordlevel_tokenizer(
    texts: Iterable[str], vocab_size: int = 30000, min_frequency: int = 2, max_length: int = 128
) -> PreTrainedTokenizerFast:
    """Train a MiniEmbed-style word-level tokenizer: the `vocab_size - 4` most frequent words seen at least
    `min_frequency` times, after the four special tokens."""
    if vocab_size <= len(SPECIAL_TOKENS):
        raise ValueError(f"vocab_size must exceed the {len(SPECIAL_TOKENS)} special tokens, got {vocab_size}.")
    check_vocab_size_limit(vocab_size)
    tokenizer = _empty_tokenizer(models.WordLevel(unk_token=UNK))
    trainer = trainers.WordLevelTrainer(
        vocab_size=vocab_size, min_frequency=min_frequency, special_tokens=list(SPECIAL_TOKENS), show_progress=False
    )
    tokenizer.train_from_iterator(texts, trainer=trainer)
    return _wrap(tokenizer, max_length)


def train_encoder_bpe_tokenizer(
    texts: Iterable[str], vocab_size: int = 30000, min_frequency: int = 2, max_length: int = 128
) -> PreTrainedTokenizerFast:
    """Train a subword (BPE) tokenizer with MiniEmbed's normalization, word split, special ids and template.

    Words the vocabulary lacks become pieces (continuations prefixed with `##`) instead of [UNK]; decoding
    joins the pieces of a word and puts spaces between words, as the word-level tokenizer does.
    """
    if vocab_size <= len(SPECIAL_TOKENS):
        raise ValueError(f"vocab_size must exceed the {len(SPECIAL_TOKENS)} special tokens, got {vocab_size}.")
    check_vocab_size_limit(vocab_size)
    tokenizer = _empty_tokenizer(models.BPE(unk_token=UNK, continuing_subword_prefix=CONTINUING_SUBWORD_PREFIX))
    tokenizer.decoder = decoders.WordPiece(prefix=CONTINUING_SUBWORD_PREFIX, cleanup=False)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=list(SPECIAL_TOKENS),
        continuing_subword_prefix=CONTINUING_SUBWORD_PREFIX,
        show_progress=False,
    )
    tokenizer.train_from_iterator(texts, trainer=trainer)
    return _wrap(tokenizer, max_length)


__all__ = [
    "SPECIAL_TOKENS",
    "SPLIT_PATTERN",
    "miniembed_tokenizer",
    "train_encoder_bpe_tokenizer",
    "train_wordlevel_tokenizer",
]
