"""Run an export folder with its engine: CTranslate2 for the GPT and seq2seq families, ONNX Runtime for the GPT and
the encoder.

`load_engine(folder)` tells an export folder (written by `export_ctranslate2` or `export_onnx`, named in its
`minitf_export.json`) from a MiniTF folder (None) and returns a runner with the interface the `minitf generate`,
`translate` and `embed` commands use, so the same command prints the same text or vectors from either folder.
Greedy decoding gives the MiniTF model's tokens; sampling draws from the same distribution with the engine's own
random numbers.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Literal, overload

import numpy as np

EXPORT_FILE = "minitf_export.json"
# The ONNX decoder's cache: inputs `past_key_values.{layer}.key/.value`, the outputs that feed them next call
# `present.{layer}.key/.value` (the names of optimum and transformers.js; hf_minitf.export.onnx_decoder writes them).
PAST_PREFIX, PRESENT_PREFIX = "past_key_values.", "present."


def _read_json(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


def _tokenizer(folder: Path):
    """The export's tokenizer: a family's own class where its tokenizer_config names one (the translator's), else
    its tokenizer.json. No model classes and no torch: an export runs without them."""
    from transformers import PreTrainedTokenizerFast

    from hf_minitf.catalog import FAMILIES

    named = _read_json(folder / "tokenizer_config.json").get("tokenizer_class")
    for family in FAMILIES.values():
        if family.tokenizer_class and family.tokenizer_class.rpartition(".")[2] == named:
            return family.load(family.tokenizer_class).from_pretrained(folder)
    return PreTrainedTokenizerFast.from_pretrained(folder)


class CTranslate2Generator:
    """A GPT export run by `ctranslate2.Generator`; ids in, ids out (CTranslate2 reads tokens as their text)."""

    def __init__(self, folder: Path, info: dict) -> None:
        import ctranslate2

        self.generator = ctranslate2.Generator(str(folder), device="cpu")
        self.tokenizer = _tokenizer(folder)
        self.vocabulary = json.loads((folder / "vocabulary.json").read_text(encoding="utf-8"))
        generation = _read_json(folder / "generation_config.json")
        eos = generation.get("eos_token_id")
        self.end_ids = [] if eos is None else eos if isinstance(eos, list) else [eos]
        learned = info.get("position_embedding_type") == "learned"
        self.max_positions = info["max_position_embeddings"]  # trained on; rotary positions go on past them
        self.position_limit = self.max_positions if learned else None

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

    def __init__(self, folder: Path, info: dict) -> None:
        import ctranslate2

        self.translator = ctranslate2.Translator(str(folder), device="cpu")
        self.tokenizer = _tokenizer(folder)
        target = json.loads((folder / "target_vocabulary.json").read_text(encoding="utf-8"))
        self.target_ids = {token: index for index, token in enumerate(target)}
        generation = _read_json(folder / "generation_config.json")
        self.default_length = generation.get("max_length") or info["max_position_embeddings"]

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


class OnnxEmbedder:
    """An encoder export run by ONNX Runtime: tokenizer -> session -> masked mean -> L2 normalize, as the
    SentenceTransformer folder it was copied from computes it."""

    def __init__(self, folder: Path, info: dict, file_name: str | None = None) -> None:
        import onnxruntime

        self.tokenizer = _tokenizer(folder)
        # sentence-transformers 6 truncates at the tokenizer's model_max_length; earlier versions wrote max_seq_length.
        self.max_length = (
            _read_json(folder / "sentence_bert_config.json").get("max_seq_length") or self.tokenizer.model_max_length
        )
        options = onnxruntime.SessionOptions()
        options.log_severity_level = 3
        model_file = folder / (file_name or info.get("default_file", "onnx/model.onnx"))
        self.session = onnxruntime.InferenceSession(str(model_file), options, providers=["CPUExecutionProvider"])

    def encode(self, texts: list[str]) -> np.ndarray:
        batch = self.tokenizer(texts, padding=True, truncation=True, max_length=self.max_length, return_tensors="np")
        feeds = {
            "input_ids": batch["input_ids"].astype(np.int64),
            "attention_mask": batch["attention_mask"].astype(np.int64),
        }
        (states,) = self.session.run(["last_hidden_state"], feeds)
        return mean_pool_normalize(states, feeds["attention_mask"])


class OnnxGenerator:
    """A GPT export run by ONNX Runtime: the decoder graph with its KV cache, one call for the prompt and one per
    new token, as transformers.js and optimum run it; ids in, ids out."""

    def __init__(self, folder: Path, info: dict, file_name: str | None = None) -> None:
        import onnxruntime

        self.tokenizer = _tokenizer(folder)
        options = onnxruntime.SessionOptions()
        options.log_severity_level = 3
        model_file = folder / (file_name or info.get("default_file", "onnx/model.onnx"))
        self.session = onnxruntime.InferenceSession(str(model_file), options, providers=["CPUExecutionProvider"])
        self.cache_inputs = [
            graph_input for graph_input in self.session.get_inputs() if graph_input.name.startswith(PAST_PREFIX)
        ]
        self.output_names = [output.name for output in self.session.get_outputs()]
        eos = _read_json(folder / "generation_config.json").get("eos_token_id")
        self.end_ids = set() if eos is None else set(eos if isinstance(eos, list) else [eos])
        learned = info.get("position_embedding_type") == "learned"
        self.max_positions = info["max_position_embeddings"]  # trained on; rotary positions go on past them
        self.position_limit = self.max_positions if learned else None

    def empty_cache(self) -> dict[str, np.ndarray]:
        """The first call's cache: length 0, in the graph's float type (float16 for the fp16 file)."""
        dtypes = {"tensor(float)": np.float32, "tensor(float16)": np.float16}
        return {
            graph_input.name: np.zeros((1, graph_input.shape[1], 0, graph_input.shape[3]), dtypes[graph_input.type])
            for graph_input in self.cache_inputs
        }

    def step(self, ids: list[int], cache: dict[str, np.ndarray], past_length: int):
        """The logits after `ids` (the tokens after the `past_length` cached ones) and the cache that includes them."""
        total = past_length + len(ids)
        feeds = {
            "input_ids": np.array([ids], dtype=np.int64),
            "attention_mask": np.ones((1, total), dtype=np.int64),
            "position_ids": np.arange(past_length, total, dtype=np.int64)[None],
            **cache,
        }
        outputs = dict(zip(self.output_names, self.session.run(self.output_names, feeds)))
        logits = outputs.pop("logits")[0, -1].astype(np.float32)
        return logits, {name.replace(PRESENT_PREFIX, PAST_PREFIX, 1): value for name, value in outputs.items()}

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
        generator = np.random.default_rng(seed)
        results = []
        for prompt in prompts:
            new_ids, ids, cache, past_length = [], list(prompt), self.empty_cache(), 0
            for _ in range(max_new_tokens):
                logits, cache = self.step(ids, cache, past_length)
                past_length += len(ids)
                token = sample_token(logits, temperature, top_k, generator) if sample else int(logits.argmax())
                new_ids.append(token)
                if token in self.end_ids:
                    break
                ids = [token]
            results.append(new_ids)
        return results


def sample_token(logits: np.ndarray, temperature: float, top_k: int | None, generator: np.random.Generator) -> int:
    """A token drawn from softmax(logits / temperature), among the `top_k` likeliest when given."""
    scaled = logits.astype(np.float64) / temperature
    if top_k:
        scaled = np.where(scaled < np.sort(scaled)[-min(top_k, scaled.size)], -np.inf, scaled)
    probabilities = np.exp(scaled - scaled.max())
    return int(generator.choice(scaled.size, p=probabilities / probabilities.sum()))


def mean_pool_normalize(states: np.ndarray, attention_mask: np.ndarray) -> np.ndarray:
    """Masked mean over the real tokens (count clamped at 1e-9), then L2 normalization (norm clamped at 1e-12),
    as sentence-transformers' Pooling(mean) and Normalize compute it."""
    mask = attention_mask[..., None].astype(states.dtype)
    pooled = (states * mask).sum(axis=1) / np.clip(mask.sum(axis=1), 1e-9, None)
    return pooled / np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)


Engine = CTranslate2Generator | CTranslate2Translator | OnnxEmbedder | OnnxGenerator

ENGINES: dict[tuple[str, str], type[Engine]] = {
    ("ctranslate2", "generator"): CTranslate2Generator,
    ("ctranslate2", "translator"): CTranslate2Translator,
    ("onnxruntime", "embedder"): OnnxEmbedder,
    ("onnxruntime", "generator"): OnnxGenerator,
}


def export_info(folder: str | os.PathLike) -> dict | None:
    """What `minitf_export.json` says of an export folder (engine, kind, family, ...), or None for other folders;
    a ValueError naming the file when it is not a JSON object."""
    path = Path(folder) / EXPORT_FILE
    try:
        info = _read_json(path)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(f"{path} is not JSON ({error}); export the model again with minitf export") from None
    if not isinstance(info, dict):
        raise ValueError(
            f"{path} holds a JSON {type(info).__name__}, not an object; export the model again with minitf export"
        )
    return info or None


@overload
def load_engine(
    folder: str | os.PathLike, kind: Literal["generator"]
) -> CTranslate2Generator | OnnxGenerator | None: ...
@overload
def load_engine(folder: str | os.PathLike, kind: Literal["translator"]) -> CTranslate2Translator | None: ...
@overload
def load_engine(folder: str | os.PathLike, kind: Literal["embedder"]) -> OnnxEmbedder | None: ...
def load_engine(folder: str | os.PathLike, kind: str) -> Engine | None:
    """The runner of the export folder `folder` when it is one, None for a MiniTF folder; a ValueError when it is
    an export of another kind (`kind`: generator, translator or embedder)."""
    info = export_info(folder)
    if info is None:
        return None
    key = (info.get("engine"), info.get("kind"))
    if key not in ENGINES:
        raise ValueError(f"{folder} names an unknown export {key} in {EXPORT_FILE}; re-export it with minitf export.")
    if info["kind"] != kind:
        raise ValueError(
            f"{folder} is an export for the {info['engine']} {info['kind']}; this command needs a "
            f"MiniTF model folder or an export for the {kind}."
        )
    return ENGINES[key](Path(folder), info)


__all__ = [
    "CTranslate2Generator",
    "CTranslate2Translator",
    "OnnxEmbedder",
    "OnnxGenerator",
    "export_info",
    "load_engine",
    "mean_pool_normalize",
]
