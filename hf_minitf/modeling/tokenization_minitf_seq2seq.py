"""The paired tokenizer of the seq2seq family: a source vocabulary for inputs, a target one for labels and decoding.

hkproj's pytorch-transformer training code builds one `tokenizers` WordLevel + Whitespace tokenizer per
language (`tokenizer_en.json`, `tokenizer_it.json`) with `[UNK] [PAD] [SOS] [EOS]` = ids 0..3, feeds the encoder
`[SOS] x [EOS]` and trains the decoder on labels `y [EOS]` (decoder input `[SOS] y`). `MiniTFSeq2SeqTokenizer`
wraps such a pair like transformers' FSMT/Marian tokenizers: `tokenizer(text)` encodes with the source side,
`tokenizer(text_target=...)` with the target side, and `decode` always reads target ids.

This file is copied beside a saved tokenizer, so it imports only tokenizers and transformers.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from typing import Any

from tokenizers import AddedToken, Tokenizer, models, pre_tokenizers, processors, trainers
from transformers import PreTrainedTokenizerFast

SPECIAL_TOKENS = {"unk_token": "[UNK]", "pad_token": "[PAD]", "bos_token": "[SOS]", "eos_token": "[EOS]"}
VOCAB_FILES_NAMES = {
    "source_tokenizer_file": "source_tokenizer.json",
    "target_tokenizer_file": "target_tokenizer.json",
}


def _load(tokenizer: Tokenizer | str | os.PathLike | None, side: str) -> Tokenizer:
    """A private copy of the given `tokenizers.Tokenizer`, or the one a JSON file holds (errors name the file)."""
    if isinstance(tokenizer, Tokenizer):
        return Tokenizer.from_str(tokenizer.to_str())
    if tokenizer is None or not os.path.isfile(tokenizer):
        raise ValueError(
            f"The {side} tokenizer is missing: pass a `tokenizers.Tokenizer` or the path of its JSON file "
            f"(e.g. tokenizer_en.json), got {tokenizer!r}."
        )
    try:
        return Tokenizer.from_file(str(tokenizer))
    except Exception as error:  # tokenizers raises a bare Exception for malformed files
        raise ValueError(
            f"The {side} tokenizer file {tokenizer} is not a valid `tokenizers` JSON file ({error}); "
            "pass the tokenizer_<lang>.json that `tokenizers` saved (Tokenizer.save)."
        ) from error


def _reject_lone_surrogates(texts) -> None:
    """A clear error for text holding a lone UTF-16 surrogate (e.g. from bytes decoded with 'surrogateescape'),
    which `tokenizers` cannot take: it would raise an unexplained TypeError."""
    for text in texts if isinstance(texts, (list, tuple)) else [texts]:
        if isinstance(text, (list, tuple)):
            _reject_lone_surrogates(text)
        elif isinstance(text, str):
            try:
                text.encode("utf-8")
            except UnicodeEncodeError as error:
                raise ValueError(
                    f"The text has a lone surrogate {text[error.start]!r} at character {error.start}, which is not "
                    "valid Unicode and cannot be tokenized; fix how it was decoded, or drop such characters with "
                    "text.encode('utf-8', 'replace').decode('utf-8')."
                ) from None


class MiniTFSeq2SeqTokenizer(PreTrainedTokenizerFast):
    """Source and target `tokenizers` vocabularies behind one transformers tokenizer.

    Inputs are encoded as `[SOS] x [EOS]` with the source vocabulary; `text_target=` gives labels `y [EOS]` in the
    target vocabulary (the model turns them into the decoder input `[SOS] y`); `decode`/`batch_decode` map target
    ids back to text. Both vocabularies must hold the four special tokens at the same ids. Saved as
    `source_tokenizer.json` + `target_tokenizer.json` + `tokenizer_config.json`.
    """

    vocab_files_names = VOCAB_FILES_NAMES
    model_input_names = ["input_ids", "attention_mask"]
    _tokenizer: Tokenizer  # type: ignore[assignment]  # transformers declares it `= None` until __init__ sets it

    def __init__(
        self,
        source_tokenizer_file: str | os.PathLike | Tokenizer | None = None,
        target_tokenizer_file: str | os.PathLike | Tokenizer | None = None,
        unk_token: str = SPECIAL_TOKENS["unk_token"],
        pad_token: str = SPECIAL_TOKENS["pad_token"],
        bos_token: str = SPECIAL_TOKENS["bos_token"],
        eos_token: str = SPECIAL_TOKENS["eos_token"],
        **kwargs,
    ) -> None:
        source = _load(source_tokenizer_file, "source")
        target = _load(target_tokenizer_file, "target")
        specials = [unk_token, pad_token, bos_token, eos_token]
        for side, tokenizer in (("source", source), ("target", target)):
            missing = [token for token in specials if tokenizer.token_to_id(str(token)) is None]
            if missing:
                raise ValueError(f"The {side} vocabulary lacks the special tokens {missing}; add them first.")
        source_ids = [source.token_to_id(str(token)) for token in specials]
        target_ids = [target.token_to_id(str(token)) for token in specials]
        if source_ids != target_ids:
            raise ValueError(
                f"The special tokens {specials} have ids {source_ids} in the source vocabulary but {target_ids} in "
                "the target one; both sides must give them the same ids (the original's are 0, 1, 2, 3)."
            )
        source.post_processor = processors.TemplateProcessing(
            single=f"{bos_token} $A {eos_token}",
            special_tokens=[(str(bos_token), source_ids[2]), (str(eos_token), source_ids[3])],
        )
        target.post_processor = processors.TemplateProcessing(
            single=f"$A {eos_token}", special_tokens=[(str(eos_token), target_ids[3])]
        )
        for tokenizer in (source, target):
            tokenizer.no_padding()
            tokenizer.no_truncation()
            # hkproj's files may hold the specials as plain vocabulary entries: register them (at their ids) so
            # that decode(skip_special_tokens=True) drops them and a "[EOS]" in a text is one token.
            tokenizer.add_special_tokens([AddedToken(str(token), special=True, normalized=False) for token in specials])
        kwargs.setdefault("clean_up_tokenization_spaces", False)
        self._target_tokenizer = target
        super().__init__(
            tokenizer_object=source,
            unk_token=unk_token,
            pad_token=pad_token,
            bos_token=bos_token,
            eos_token=eos_token,
            **kwargs,
        )
        self._source_tokenizer = self._tokenizer

    @property
    def source_vocab_size(self) -> int:
        """Size of the source vocabulary (the model's `src_vocab_size`)."""
        return self._source_tokenizer.get_vocab_size(with_added_tokens=True)

    @property
    def target_vocab_size(self) -> int:
        """Size of the target vocabulary (the model's `vocab_size`)."""
        return self._target_tokenizer.get_vocab_size(with_added_tokens=True)

    def _switch_to_input_mode(self) -> None:
        self._tokenizer = self._source_tokenizer

    def _switch_to_target_mode(self) -> None:
        self._tokenizer = self._target_tokenizer

    def _encode_plus(self, text, text_pair=None, *args, **kwargs):
        """Check the texts for lone surrogates, then encode with the vocabulary of the current side."""
        _reject_lone_surrogates(text)
        if text_pair is not None:
            _reject_lone_surrogates(text_pair)
        return super()._encode_plus(text, text_pair, *args, **kwargs)

    def _decode(self, token_ids, skip_special_tokens: bool = False, clean_up_tokenization_spaces=None, **kwargs):
        """Target ids to text (the model generates target ids)."""
        if isinstance(token_ids, int):
            token_ids = [token_ids]
        text = self._target_tokenizer.decode(list(token_ids), skip_special_tokens=skip_special_tokens)
        if clean_up_tokenization_spaces is None:
            clean_up_tokenization_spaces = self.clean_up_tokenization_spaces
        return self.clean_up_tokenization(text) if clean_up_tokenization_spaces else text

    def _save_pretrained(self, save_directory, file_names, legacy_format=None, filename_prefix=None):
        """Write both vocabularies (without any padding/truncation state left over from calls)."""
        prefix = f"{filename_prefix}-" if filename_prefix else ""
        written = []
        for key, tokenizer in (
            ("source_tokenizer_file", self._source_tokenizer),
            ("target_tokenizer_file", self._target_tokenizer),
        ):
            clean = Tokenizer.from_str(tokenizer.to_str())
            clean.no_padding()
            clean.no_truncation()
            path = os.path.join(str(save_directory), prefix + VOCAB_FILES_NAMES[key])
            clean.save(path)
            written.append(path)
        return tuple(file_names) + tuple(written)


def train_translation_tokenizers(
    pairs: Iterable[tuple[str, str]] | None = None,
    *,
    source_texts: Sequence[str] | None = None,
    target_texts: Sequence[str] | None = None,
    min_frequency: int = 2,
    vocab_size: int | None = None,
    model_max_length: int | None = None,
) -> MiniTFSeq2SeqTokenizer:
    """Train a source and a target word-level vocabulary from parallel texts, as hkproj's `train.py` does.

    Give either `pairs` of (source sentence, target sentence) or `source_texts` and `target_texts`. Words are
    split on whitespace and punctuation (`Whitespace` pre-tokenizer); a word enters a vocabulary when it occurs
    `min_frequency` times (the original's 2); `[UNK] [PAD] [SOS] [EOS]` take ids 0..3 on both sides.
    """
    if pairs is not None:
        if source_texts is not None or target_texts is not None:
            raise ValueError("Pass either pairs or source_texts/target_texts, not both.")
        pairs = list(pairs)
        if any(not isinstance(pair, (tuple, list)) or len(pair) != 2 for pair in pairs):
            raise ValueError("pairs must be (source sentence, target sentence) tuples.")
        source_texts = [pair[0] for pair in pairs]
        target_texts = [pair[1] for pair in pairs]
    if source_texts is None or target_texts is None:
        raise ValueError("Pass pairs, or both source_texts and target_texts.")
    if len(source_texts) != len(target_texts) or not source_texts:
        raise ValueError(
            f"Parallel texts need the same, non-zero number of sentences per side; got {len(source_texts)} source "
            f"and {len(target_texts)} target sentences."
        )
    trained = []
    for texts in (source_texts, target_texts):
        tokenizer = Tokenizer(models.WordLevel(unk_token=SPECIAL_TOKENS["unk_token"]))
        tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
        options = {"vocab_size": vocab_size} if vocab_size else {}
        trainer = trainers.WordLevelTrainer(
            special_tokens=list(SPECIAL_TOKENS.values()), min_frequency=min_frequency, show_progress=False, **options
        )
        tokenizer.train_from_iterator(texts, trainer=trainer)
        trained.append(tokenizer)
    extra: dict[str, Any] = {"model_max_length": model_max_length} if model_max_length else {}
    return MiniTFSeq2SeqTokenizer(trained[0], trained[1], **extra)


MiniTFSeq2SeqTokenizer.register_for_auto_class("AutoTokenizer")

__all__ = ["MiniTFSeq2SeqTokenizer", "train_translation_tokenizers"]
