"""The CTranslate2 runners: a GPT export in `ctranslate2.Generator`, a seq2seq export in `ctranslate2.Translator`,
an encoder export in `ctranslate2.Encoder` (its token states pooled as the SentenceTransformer folder pools them)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from hf_minitf.catalog.exports import EXPORT_FILE
from hf_minitf.engines.folders import (
    AGAIN,
    ExportFolderError,
    check_vocabulary,
    checked_field,
    end_ids,
    folder_json,
    load_tokenizer,
    needs_files,
    positions,
)
from hf_minitf.engines.onnx import mean_pool_normalize


def _vocabulary(folder: Path, name: str) -> list[str]:
    """A CTranslate2 vocabulary file: a JSON list of token strings."""
    tokens = folder_json(folder, name, list, required=True)
    if not all(isinstance(token, str) for token in tokens):
        raise ExportFolderError(f"{folder / name} holds entries that are not token strings; {AGAIN}")
    return tokens


def _ctranslate2(folder: Path, engine_class):
    """`engine_class` (ctranslate2.Generator or Translator) on the folder; a cut or corrupt model.bin is an
    ExportFolderError naming it."""
    try:
        return engine_class(str(folder), device="cpu")
    except (RuntimeError, ValueError) as error:
        raise ExportFolderError(f"{folder}: CTranslate2 cannot load model.bin ({error}); {AGAIN}") from None


class CTranslate2Generator:
    """A GPT export run by `ctranslate2.Generator`; ids in, ids out (CTranslate2 reads tokens as their text)."""

    FILES = ("model.bin", "config.json", "vocabulary.json")

    def __init__(self, folder: Path, info: dict) -> None:
        import ctranslate2

        needs_files(folder, info, self.FILES)
        self.tokenizer = load_tokenizer(folder)
        self.vocabulary = _vocabulary(folder, "vocabulary.json")
        check_vocabulary(folder, len(self.tokenizer), len(self.vocabulary), "vocabulary.json")
        self.end_ids = end_ids(folder)
        self.generator = _ctranslate2(folder, ctranslate2.Generator)
        self.max_positions, self.position_limit = positions(info)

    def generate(
        self,
        prompts: list[list[int]],
        max_new_tokens: int,
        sample: bool = False,
        temperature: float = 1.0,
        top_k: int | None = None,
        seed: int = 0,
    ) -> list[list[int]]:
        """The new token ids after each prompt (greedy unless `sample`); stops at the model's end token."""
        options = (
            {"sampling_topk": top_k or 0, "sampling_temperature": temperature, "random_seed": seed}
            if sample
            else {"sampling_topk": 1}
        )
        results = self.generator.generate_batch(
            [[self.vocabulary[index] for index in prompt] for prompt in prompts],
            max_length=max_new_tokens,
            include_prompt_in_result=False,
            end_token=self.end_ids,
            return_end_token=True,
            **options,
        )
        return [result.sequences_ids[0] for result in results]


class CTranslate2Translator:
    """A seq2seq export run by `ctranslate2.Translator`: texts in, translations out."""

    FILES = ("model.bin", "config.json", "source_vocabulary.json", "target_vocabulary.json")

    def __init__(self, folder: Path, info: dict) -> None:
        import ctranslate2

        needs_files(folder, info, self.FILES)
        self.tokenizer = load_tokenizer(folder)
        source = _vocabulary(folder, "source_vocabulary.json")
        check_vocabulary(folder, self.tokenizer.source_vocab_size, len(source), "source_vocabulary.json")
        target = _vocabulary(folder, "target_vocabulary.json")
        self.target_ids = {token: index for index, token in enumerate(target)}
        generation = folder_json(folder, "generation_config.json")
        length = checked_field(folder, generation, "generation_config.json", "max_length")
        self.default_length = length or info["max_position_embeddings"]
        self.translator = _ctranslate2(folder, ctranslate2.Translator)

    def translate(self, texts: list[str], num_beams: int = 1, max_new_tokens: int | None = None) -> list[str]:
        """Translate `texts` with `minitf-translation`'s defaults: until [EOS], `max_new_tokens` or the decoder's
        `max_position_embeddings` positions (start token included)."""
        for text in texts:
            if not text.strip():
                raise ValueError("Cannot translate an empty text; give at least one word.")
        sources = [self.tokenizer.convert_ids_to_tokens(self.tokenizer(text).input_ids) for text in texts]
        length = max_new_tokens if max_new_tokens is not None else self.default_length - 1
        results = self.translator.translate_batch(sources, beam_size=num_beams, max_decoding_length=length)
        return [
            self.tokenizer.decode([self.target_ids[token] for token in result.hypotheses[0]], skip_special_tokens=True)
            for result in results
        ]

    def new_ids(self, source: list[int], max_new_tokens: int, num_beams: int = 1) -> list[int]:
        """The target ids greedy search (or beam search over `num_beams`) gives after the start token, at most
        `max_new_tokens` (end token included)."""
        (result,) = self.translator.translate_batch(
            [self.tokenizer.convert_ids_to_tokens(source)],
            beam_size=num_beams,
            max_decoding_length=max_new_tokens,
            return_end_token=True,
        )
        return [self.target_ids[token] for token in result.hypotheses[0]]


class CTranslate2Embedder:
    """An encoder export run by `ctranslate2.Encoder`: tokenizer -> token states -> masked mean -> L2 normalize, as
    the SentenceTransformer folder it was exported from computes it."""

    FILES = ("model.bin", "config.json", "vocabulary.json")

    def __init__(self, folder: Path, info: dict) -> None:
        import ctranslate2

        needs_files(folder, info, self.FILES)
        self.tokenizer = load_tokenizer(folder)
        vocabulary = _vocabulary(folder, "vocabulary.json")
        check_vocabulary(folder, len(self.tokenizer), len(vocabulary), "vocabulary.json")
        trained = checked_field(folder, info, EXPORT_FILE, "max_position_embeddings")
        self.max_length = min(self.tokenizer.model_max_length, trained or self.tokenizer.model_max_length)
        self.encoder = _ctranslate2(folder, ctranslate2.Encoder)

    def encode(self, texts: list[str]) -> np.ndarray:
        """Unit-length embeddings of `texts`, one row each; texts cut at the model's position table."""
        ids = self.tokenizer(texts, truncation=True, max_length=self.max_length).input_ids
        states = np.array(self.encoder.forward_batch(ids).last_hidden_state, dtype=np.float32)
        mask = np.array([[1] * len(row) + [0] * (states.shape[1] - len(row)) for row in ids])
        return mean_pool_normalize(states, mask)
