"""Run an export folder with its engine: CTranslate2 for the GPT and seq2seq families, ONNX Runtime for the GPT and
the encoder.

`load_engine(folder)` tells an export folder (written by `export_ctranslate2` or `export_onnx`, named in its
`minitf_export.json`) from a MiniTF folder (None) and returns a runner with the interface the `minitf generate`,
`translate` and `embed` commands use, so the same command prints the same text or vectors from either folder.
Greedy decoding gives the MiniTF model's tokens; sampling draws from the same distribution with the engine's own
random numbers.

An export folder may come from elsewhere, so nothing in it is trusted: `minitf_export.json` is checked against the
fields `hf_minitf.catalog.exports.EXPORT_INFO_FIELDS` declares, every path it (or an ONNX graph's external data)
names must stay inside the folder, no link may lead out of it, the files the engine needs must be there and agree
with the metadata (the graph's inputs and outputs, a vocabulary at least as large as the tokenizer's), and every
file that does not parse is an ExportFolderError naming the folder and the file or field.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Literal, overload

import numpy as np

from hf_minitf.catalog.exports import EVERY_KIND, EXPORT_FILE, EXPORT_INFO_FIELDS
from hf_minitf.catalog.wording import with_article
from hf_minitf.safety.files import JSON_KINDS, UnsafeFileError, confined_path, links_leaving, read_json

AGAIN = "export the model again with minitf export"
# The ONNX decoder's cache: inputs `past_key_values.{layer}.key/.value`, the outputs that feed them next call
# `present.{layer}.key/.value` (the names of optimum and transformers.js; hf_minitf.export.onnx_decoder writes them).
PAST_PREFIX, PRESENT_PREFIX = "past_key_values.", "present."


class ExportFolderError(ValueError):
    """An export folder the engine cannot run as it is; the message names the folder and the file or field."""


def _json(folder: Path, name: str, expected: type = dict, required: bool = False) -> Any:
    """The JSON value of the folder's file `name` (`expected()` when it is absent and not `required`); an
    ExportFolderError naming the file when it is missing, not JSON, or not a JSON `expected` (dict: an object)."""
    path = confined_path(folder, name, "the file")
    if not path.is_file():
        if required:
            raise ExportFolderError(f"{folder} has no {name}, which the export needs; {AGAIN}")
        return expected()
    wanted = "an object" if expected is dict else f"a JSON {JSON_KINDS.get(expected, expected.__name__)}"
    return read_json(path, expected, wanted, AGAIN, ExportFolderError)


def _field(folder: Path, config: dict, file: str, key: str, kind: str = "count") -> Any:
    """`config[key]` from the folder's `file` (None when absent) when it is a positive integer (`kind` "count"), or
    a token id or list of them ("ids": a list, possibly empty); an ExportFolderError naming file and field else."""
    value = config.get(key)
    if value is None:
        return [] if kind == "ids" else None
    values = value if kind == "ids" and isinstance(value, list) else [value]
    if not all(isinstance(item, int) and not isinstance(item, bool) and item >= (kind == "count") for item in values):
        wanted = "a positive integer" if kind == "count" else "a token id or a list of token ids"
        raise ExportFolderError(f"{folder / file}: {key} is {json.dumps(value)}, not {wanted}; {AGAIN}")
    return values if kind == "ids" else value


def _tokenizer(folder: Path):
    """The export's tokenizer: a family's own class where its tokenizer_config names one (the translator's), else
    its tokenizer.json. No model classes and no torch: an export runs without them."""
    from transformers import PreTrainedTokenizerFast

    from hf_minitf.catalog import FAMILIES

    named = _json(folder, "tokenizer_config.json").get("tokenizer_class")
    for family in FAMILIES.values():
        if family.tokenizer_class and family.tokenizer_class.rpartition(".")[2] == named:
            tokenizer_class = family.load(family.tokenizer_class)  # it names its own files in its errors
            break
    else:
        _json(folder, "tokenizer.json", required=True)
        tokenizer_class = PreTrainedTokenizerFast
    try:
        return tokenizer_class.from_pretrained(folder)
    except ValueError:
        raise
    except Exception as error:  # the tokenizers library's parse errors are bare Exceptions
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise ExportFolderError(f"{folder}: its tokenizer does not load ({first}); {AGAIN}") from None


def _check_vocabulary(folder: Path, tokenizer_size: int, model_size: int | None, file: str) -> None:
    """Refuse a tokenizer with ids past the model's vocabulary (`model_size` rows, read from `file`)."""
    if model_size is not None and tokenizer_size > model_size:
        raise ExportFolderError(
            f"{folder}: the tokenizer has {tokenizer_size} tokens but {file} holds a vocabulary of {model_size}, "
            f"so some token ids lie past the model's; {AGAIN}"
        )


def _needs_files(folder: Path, info: dict, names: tuple[str, ...]) -> None:
    """Refuse a folder whose metadata names an export (engine and kind) without the files such an export holds."""
    for name in names:
        if not confined_path(folder, name, "the file").is_file():
            raise ExportFolderError(
                f"{folder}: its {EXPORT_FILE} says it is {with_article(str(info.get('engine')))} {info.get('kind')} export, but it has no "
                f"{name}, which such an export holds; {AGAIN} (or, if this is a model folder, remove {EXPORT_FILE})"
            )


def _vocabulary(folder: Path, name: str) -> list[str]:
    """A CTranslate2 vocabulary file: a JSON list of token strings."""
    tokens = _json(folder, name, list, required=True)
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

        _needs_files(folder, info, self.FILES)
        self.tokenizer = _tokenizer(folder)
        self.vocabulary = _vocabulary(folder, "vocabulary.json")
        _check_vocabulary(folder, len(self.tokenizer), len(self.vocabulary), "vocabulary.json")
        generation = _json(folder, "generation_config.json")
        self.end_ids = _field(folder, generation, "generation_config.json", "eos_token_id", "ids")
        self.generator = _ctranslate2(folder, ctranslate2.Generator)
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

    FILES = ("model.bin", "config.json", "source_vocabulary.json", "target_vocabulary.json")

    def __init__(self, folder: Path, info: dict) -> None:
        import ctranslate2

        _needs_files(folder, info, self.FILES)
        self.tokenizer = _tokenizer(folder)
        source = _vocabulary(folder, "source_vocabulary.json")
        _check_vocabulary(folder, self.tokenizer.source_vocab_size, len(source), "source_vocabulary.json")
        target = _vocabulary(folder, "target_vocabulary.json")
        self.target_ids = {token: index for index, token in enumerate(target)}
        generation = _json(folder, "generation_config.json")
        length = _field(folder, generation, "generation_config.json", "max_length")
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

    name = file_name or info.get("default_file", "onnx/model.onnx")
    path = confined_path(folder, name, "the file" if file_name else f"{EXPORT_FILE}'s default_file")
    _needs_files(folder, info, (name,))
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
        self.tokenizer = _tokenizer(folder)
        # sentence-transformers 6 truncates at the tokenizer's model_max_length; earlier versions wrote max_seq_length.
        sentence_bert = _json(folder, "sentence_bert_config.json")
        self.max_length = (
            _field(folder, sentence_bert, "sentence_bert_config.json", "max_seq_length")
            or self.tokenizer.model_max_length
        )
        self.session, rows = onnx_session(
            folder, info, file_name, "embedder", {"input_ids", "attention_mask"}, {"last_hidden_state"}
        )
        _check_vocabulary(folder, len(self.tokenizer), rows, file_name or info.get("default_file", "onnx/model.onnx"))

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
        self.tokenizer = _tokenizer(folder)
        self.session, rows = onnx_session(
            folder, info, file_name, "generator", {"input_ids", "attention_mask", "position_ids"}, {"logits"}
        )
        _check_vocabulary(folder, len(self.tokenizer), rows, file_name or info.get("default_file", "onnx/model.onnx"))
        self.cache_inputs = [
            graph_input for graph_input in self.session.get_inputs() if graph_input.name.startswith(PAST_PREFIX)
        ]
        self.output_names = [output.name for output in self.session.get_outputs()]
        generation = _json(folder, "generation_config.json")
        self.end_ids = set(_field(folder, generation, "generation_config.json", "eos_token_id", "ids"))
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
    an ExportFolderError naming the file and the field when it is not a JSON object of the fields
    `EXPORT_INFO_FIELDS` declares (`check_export_info`)."""
    folder = Path(folder)
    if not (folder / EXPORT_FILE).exists() and not (folder / EXPORT_FILE).is_symlink():
        return None
    return check_export_info(_json(folder, EXPORT_FILE), folder)


def check_export_info(info: dict, folder: Path) -> dict:
    """`info` (the folder's minitf_export.json) when every field `EXPORT_INFO_FIELDS` declares is there where its
    kind needs it, of its type, among its values and, for a path, inside the folder; its engine and kind name a
    runner (`ENGINES`) and its family is a MiniTF model type whose exports are of that kind. Unknown fields are
    left alone (a later version may add some). An ExportFolderError naming the file and the field otherwise."""
    from hf_minitf.catalog import FAMILIES

    path = folder / EXPORT_FILE
    kind = info.get("kind")
    for key, field in EXPORT_INFO_FIELDS.items():
        value = info.get(key)
        if value is None:
            if field.required_for == EVERY_KIND or kind in field.required_for:
                needed = "every export" if field.required_for == EVERY_KIND else f"{with_article(str(kind))} export"
                raise ExportFolderError(f"{path} has no {key}, which {needed} has; {AGAIN}")
            continue
        entries = value if isinstance(value, list) else [value]
        if (
            not isinstance(value, field.json_type)
            or isinstance(value, bool)
            or (isinstance(value, int) and value < 1)
            or (field.path and not all(isinstance(entry, str) and entry for entry in entries))
        ):
            wanted = {int: "a positive integer", str: "a string", list: "a list of file names"}[field.json_type]
            raise ExportFolderError(f"{path}: {key} is {json.dumps(value)}, not {wanted}; {AGAIN}")
        if field.choices and value not in field.choices:
            raise ExportFolderError(f"{path}: {key} is {value!r}, not one of {', '.join(field.choices)}; {AGAIN}")
        if field.path:
            for entry in entries:
                confined_path(folder, entry, f"{EXPORT_FILE}'s {key}")
    if (info["engine"], kind) not in ENGINES:
        runners = ", ".join(f"{engine} {name}" for engine, name in ENGINES)
        raise ExportFolderError(
            f"{path}: engine {info['engine']!r} with kind {kind!r} is no export minitf runs ({runners}); {AGAIN}"
        )
    family = next((family for family in FAMILIES.values() if family.model_type == info["family"]), None)
    if family is None or family.engine_kind != kind:
        fitting = ", ".join(f"{family.model_type} ({family.engine_kind})" for family in FAMILIES.values())
        raise ExportFolderError(
            f"{path}: family {info['family']!r} does not make {with_article(str(kind))} export (the families and the "
            f"kind of their exports: {fitting}); {AGAIN}"
        )
    return info


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
    if info["kind"] != kind:
        raise ValueError(
            f"{folder} is an export for the {info['engine']} {info['kind']}; this command needs a "
            f"MiniTF model folder or an export for the {kind}."
        )
    leaving = "; ".join(f"{name} -> {target}" for name, target in links_leaving(folder).items())
    if leaving:
        raise UnsafeFileError(
            f"{folder} holds links to files outside it ({leaving}); an export runs only its own files: "
            "replace each link with a copy of the file it should hold"
        )
    return ENGINES[(info["engine"], kind)](Path(folder), info)


__all__ = [
    "CTranslate2Generator",
    "CTranslate2Translator",
    "ExportFolderError",
    "OnnxEmbedder",
    "OnnxGenerator",
    "check_export_info",
    "export_info",
    "load_engine",
    "mean_pool_normalize",
]
