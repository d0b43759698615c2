"""Tokenizers for the GPT family: character level and byte-level BPE, both as `PreTrainedTokenizerFast`.

Each is a plain `tokenizers` pipeline saved as `tokenizer.json`, so `AutoTokenizer.from_pretrained` loads it
anywhere, with or without hf_minitf installed. Being plain `PreTrainedTokenizerFast` objects, they take text as
`tokenizers` does: a text holding a lone UTF-16 surrogate (such as bytes decoded with `errors="surrogateescape"`)
is not valid Unicode and fails inside `tokenizers` with "TypeError: TextEncodeInput must be ..."; clean such text
first, e.g. `text.encode("utf-8", "replace").decode("utf-8")`. (The seq2seq tokenizer, a class of this package,
refuses it with a ValueError that says so.)
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

from hf_minitf.catalog.limits import MAX_VOCAB_SIZE

CHAR_SPECIAL_TOKENS = {"pad_token": "<pad>", "unk_token": "<unk>", "bos_token": "<bos>", "eos_token": "<eos>"}
BPE_SPECIAL_TOKENS = {"pad_token": "<|pad|>", "unk_token": "<|unk|>", "bos_token": "<|bos|>", "eos_token": "<|eos|>"}


def wrap_tokenizer(
    tokenizer: Tokenizer, special_tokens: dict[str, str], model_max_length: int | None = None, **kwargs
) -> PreTrainedTokenizerFast:
    """Wrap a `tokenizers.Tokenizer` as a transformers fast tokenizer with the given special tokens.

    `special_tokens` maps transformers' names (`pad_token`, `unk_token`, `bos_token`, `eos_token`) to tokens
    that must already be in the vocabulary.
    """
    vocab = tokenizer.get_vocab()
    missing = [token for token in special_tokens.values() if token not in vocab]
    if missing:
        raise ValueError(f"Special tokens {missing} are not in the tokenizer's vocabulary; add them first.")
    extra = {"model_max_length": model_max_length} if model_max_length else {}
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, clean_up_tokenization_spaces=False, **special_tokens, **extra, **kwargs
    )


def char_tokenizer(
    text_or_chars: str | Sequence[str],
    special_tokens: dict[str, str] | None = CHAR_SPECIAL_TOKENS,
    model_max_length: int | None = None,
) -> PreTrainedTokenizerFast:
    """One token per character: from a text (its sorted distinct characters) or an ordered character list.

    Special tokens take the first ids, then the characters in order. Pass `special_tokens=None` to give the
    characters ids 0..n-1 exactly, as a character model trained without specials expects (characters not in
    the list are then dropped, as there is no unknown token). Decoding gives back the exact text: spaces,
    newlines and any unicode character in the vocabulary.
    """
    chars = sorted(set(text_or_chars)) if isinstance(text_or_chars, str) else list(text_or_chars)
    if not chars:
        raise ValueError("A character tokenizer needs at least one character; got an empty text or list.")
    if any(len(char) != 1 for char in chars):
        bad = next(char for char in chars if len(char) != 1)
        raise ValueError(f"Every vocabulary entry must be one character; got {bad!r}.")
    surrogates = [char for char in chars if "\ud800" <= char <= "\udfff"]
    if surrogates:
        raise ValueError(
            f"The characters {surrogates[:5]} are lone surrogates, not valid Unicode, and cannot be tokenized; "
            "fix how the text was decoded or drop them (text.encode('utf-8', 'replace').decode('utf-8'))."
        )
    if len(set(chars)) != len(chars):
        raise ValueError("The character list has duplicates; each character needs exactly one id.")
    specials = list((special_tokens or {}).values())
    vocab = {token: index for index, token in enumerate(specials + chars)}
    unk = (special_tokens or {}).get("unk_token")
    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token=unk))
    tokenizer.decoder = decoders.Fuse()
    return wrap_tokenizer(tokenizer, special_tokens or {}, model_max_length)


def check_vocab_size_limit(vocab_size: int) -> None:
    """A ValueError naming vocab_size when it is past MAX_VOCAB_SIZE."""
    if vocab_size > MAX_VOCAB_SIZE:
        raise ValueError(
            f"vocab_size={vocab_size} is more than the {MAX_VOCAB_SIZE:,} tokens a vocabulary trained "
            "here may have; ask for a smaller vocabulary."
        )


def train_bpe_tokenizer(
    texts: Iterable[str],
    vocab_size: int,
    special_tokens: dict[str, str] = BPE_SPECIAL_TOKENS,
    min_frequency: int = 2,
    model_max_length: int | None = None,
) -> PreTrainedTokenizerFast:
    """Train a byte-level BPE (GPT-2 style, FrawdLLM's specials by default, ids 0..3) on `texts`.

    Every byte has a token, so no text is ever unknown.
    """
    check_vocab_size_limit(vocab_size)
    specials = list(special_tokens.values())
    byte_alphabet = pre_tokenizers.ByteLevel.alphabet()
    if vocab_size < len(byte_alphabet) + len(specials):
        raise ValueError(
            f"vocab_size={vocab_size} is too small for byte-level BPE: it needs at least "
            f"{len(byte_alphabet) + len(specials)} (256 bytes + {len(specials)} special tokens)."
        )
    tokenizer = Tokenizer(models.BPE(unk_token=special_tokens.get("unk_token")))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, min_frequency=min_frequency, special_tokens=specials, initial_alphabet=byte_alphabet
    )
    tokenizer.train_from_iterator(texts, trainer=trainer)
    return wrap_tokenizer(tokenizer, special_tokens, model_max_length)


def load_bpe_tokenizer(
    path: str | Path, special_tokens: dict[str, str] = BPE_SPECIAL_TOKENS, model_max_length: int | None = None
) -> PreTrainedTokenizerFast:
    """Wrap a `tokenizers` JSON file (e.g. FrawdLLM's BPE) as a fast tokenizer with the given specials."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"Tokenizer file {path} does not exist.")
    try:
        tokenizer = Tokenizer.from_file(str(path))
    except Exception as error:
        raise ValueError(f"{path} is not a `tokenizers` JSON file: {error}") from error
    return wrap_tokenizer(tokenizer, special_tokens, model_max_length)


__all__ = ["char_tokenizer", "train_bpe_tokenizer", "load_bpe_tokenizer", "wrap_tokenizer"]
