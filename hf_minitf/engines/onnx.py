"""The ONNX Runtime runners: a GPT export's decoder graph with its KV cache (`OnnxGenerator`), an encoder export's
graph pooled as its SentenceTransformer folder pools it (`OnnxEmbedder`), and the numpy steps they add to the
session (sampling a token, mean pooling), which CTranslate2 does itself.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from hf_minitf.catalog.exports import EXPORT_FILE, PAST_PREFIX, PRESENT_PREFIX
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
from hf_minitf.safety.files import confined_path


def _graph_file(info: dict, file_name: str | None) -> str:
    """The graph a runner loads: `file_name` when given, else the metadata's default_file."""
    return file_name or info.get("default_file", "onnx/model.onnx")


def _graph_tensors(graph) -> list:
    """Every tensor an ONNX graph holds: its initializers and its nodes' tensor attributes, subgraphs included."""
    tensors = list(graph.initializer)
    for node in graph.node:
        for attribute in node.attribute:
            tensors += ([attribute.t] if attribute.HasField("t") else []) + list(attribute.tensors)
            for subgraph in ([attribute.g] if attribute.HasField("g") else []) + list(attribute.graphs):
                tensors += _graph_tensors(subgraph)
    return tensors


def _embedding_rows(graph) -> int | None:
    """The rows of the table the graph looks `input_ids` up in (its vocabulary), None when it has no such Gather."""
    shapes = {tensor.name: list(tensor.dims) for tensor in graph.initializer}
    for node in graph.node:
        if node.op_type.startswith("Gather") and node.input[1:2] == ["input_ids"] and shapes.get(node.input[0]):
            return shapes[node.input[0]][0]
    return None


def onnx_session(folder: Path, info: dict, file_name: str | None, kind: str, inputs: set[str], outputs: set[str]):
    """An ONNX Runtime session of the folder's graph (`file_name`, else the metadata's default_file) and the rows of
    its embedding table, once the graph's file and every external data location it names are inside the folder,
    and it has the `inputs` and `outputs` of a `kind` export; an ExportFolderError naming the file otherwise."""
    import onnx
    import onnxruntime
    from onnx.external_data_helper import uses_external_data

    name = _graph_file(info, file_name)
    path = confined_path(folder, name, "the file" if file_name else f"{EXPORT_FILE}'s default_file")
    needs_files(folder, info, (name,))
    try:
        model = onnx.load(str(path), load_external_data=False)
    except Exception as error:  # protobuf's DecodeError and onnx's own have no common base with ValueError
        raise ExportFolderError(f"{path} is not an ONNX model ({error or type(error).__name__}); {AGAIN}") from None
    for tensor in _graph_tensors(model.graph):
        if uses_external_data(tensor):
            location = next((entry.value for entry in tensor.external_data if entry.key == "location"), "")
            what = f"{name}'s external data location of tensor {tensor.name}"
            confined_path(folder, location, what, within=os.path.dirname(name))
    names = {"input": {item.name for item in model.graph.input}, "output": {item.name for item in model.graph.output}}
    for side, wanted in (("input", inputs), ("output", outputs)):
        missing = sorted(wanted - names[side])
        if missing:
            raise ExportFolderError(
                f"{path} has no {side} {', '.join(missing)}, which the graph of an ONNX {kind} has: its "
                f"{EXPORT_FILE} says kind {kind!r}, which does not match the graph; {AGAIN}"
            )
    options = onnxruntime.SessionOptions()
    options.log_severity_level = 3
    try:
        session = onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    except Exception as error:  # ONNX Runtime's errors (Fail, InvalidGraph, ...) share no base class
        raise ExportFolderError(f"{path}: ONNX Runtime cannot load it ({error}); {AGAIN}") from None
    return session, _embedding_rows(model.graph)


class OnnxEmbedder:
    """An encoder export run by ONNX Runtime: tokenizer -> session -> masked mean -> L2 normalize, as the
    SentenceTransformer folder it was copied from computes it."""

    def __init__(self, folder: Path, info: dict, file_name: str | None = None) -> None:
        self.tokenizer = load_tokenizer(folder)
        # sentence-transformers 6 truncates at the tokenizer's model_max_length; earlier versions wrote max_seq_length.
        sentence_bert = folder_json(folder, "sentence_bert_config.json")
        self.max_length = (
            checked_field(folder, sentence_bert, "sentence_bert_config.json", "max_seq_length")
            or self.tokenizer.model_max_length
        )
        self.session, rows = onnx_session(
            folder, info, file_name, "embedder", {"input_ids", "attention_mask"}, {"last_hidden_state"}
        )
        check_vocabulary(folder, len(self.tokenizer), rows, _graph_file(info, file_name))

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
        self.tokenizer = load_tokenizer(folder)
        self.session, rows = onnx_session(
            folder, info, file_name, "generator", {"input_ids", "attention_mask", "position_ids"}, {"logits"}
        )
        check_vocabulary(folder, len(self.tokenizer), rows, _graph_file(info, file_name))
        self.cache_inputs = [
            graph_input for graph_input in self.session.get_inputs() if graph_input.name.startswith(PAST_PREFIX)
        ]
        self.output_names = [output.name for output in self.session.get_outputs()]
        self.end_ids = set(end_ids(folder))
        self.max_positions, self.position_limit = positions(info)

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
        return [list(self.tokens(prompt, max_new_tokens, sample, temperature, top_k, generator)) for prompt in prompts]

    def tokens(
        self,
        prompt: list[int],
        max_new_tokens: int,
        sample: bool = False,
        temperature: float = 1.0,
        top_k: int | None = None,
        generator: np.random.Generator | None = None,
    ) -> Iterator[int]:
        """The new token ids after `prompt`, one at a time as each is decoded (greedy unless `sample`), up to the
        model's end token: what `minitf serve` streams."""
        generator = generator or np.random.default_rng(0)
        ids, cache, past_length = list(prompt), self.empty_cache(), 0
        for _ in range(max_new_tokens):
            logits, cache = self.step(ids, cache, past_length)
            past_length += len(ids)
            token = sample_token(logits, temperature, top_k, generator) if sample else int(logits.argmax())
            yield token
            if token in self.end_ids:
                return
            ids = [token]


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
