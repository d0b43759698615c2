"""Which runtime runs which file of an export: `RUNNERS`, keyed by (engine, kind) as an engine export's
minitf_export.json names them, and `find_export`, which reads an export (a folder or a GGUF file) into the files to
run, the cards to write and the MiniTF folder it came from.

Both are read from the export formats' objects (`hf_minitf.export.formats`): each names its runners (a loader of
`runs` per runtime and kind) and the reader of `LAYOUTS` that finds what it wrote. A file whose (engine, kind) has no
runner is reported as not run.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from hf_minitf.catalog.exports import (
    NATIVE_MODEL_TYPES,
    NATIVE_POSITIONS,
    NATIVE_TRANSLATOR_MODEL_TYPE,
    ONNX_DTYPE_SUFFIXES,
    ONNX_TRANSLATOR_GRAPHS,
    onnx_variant_file,
)
from hf_minitf.catalog.verification import (
    GGUF_SOURCE_HASH_KEYS,
    GGUF_SOURCE_KEY,
    SOURCE_CARD_FIELD,
    SOURCE_HASHES_FIELD,
)
from hf_minitf.export.format import LAYOUTS as LAYOUT_NAMES
from hf_minitf.export.formats import export_format, export_formats
from hf_minitf.safety.gguf_files import gguf_file_type, read_gguf
from hf_minitf.safety.json_files import read_json

RUNS = "hf_minitf.verification.runs"


class Runner(NamedTuple):
    """How `minitf verify` runs one kind of file."""

    runtime: str
    """Its runtime (a key of `catalog.verification.RUNTIMES`): the table's first column."""
    kind: str
    """generator, embedder or translator: what is compared with the MiniTF model."""
    export_format: str
    """The format (`hf_minitf.export.formats`) whose `exact_precisions` say which of its files claim exactness."""
    loader: str
    """`module:function` returning the file's run (see `runs`)."""
    exact: bool = True
    """Whether the runtime can give the MiniTF outputs at all: False where its graph computes something else (so
    none of its files claims exactness, whatever its precision)."""


RUNNERS: dict[tuple[str, str], Runner] = {
    (runner.runtime, runner.kind): Runner(runner.runtime, runner.kind, name, f"{RUNS}:{runner.loader}", runner.exact)
    for name, export in export_formats().items()
    for runner in export.runners
}


@dataclass
class Target:
    """One file of an export to run: its runner (None: no runner for its engine and kind), where it lies, its
    precision, the export's metadata, and its name in the export's card (relative to the export)."""

    engine: str
    kind: str
    folder: Path
    file: str
    precision: str
    info: dict = field(default_factory=dict)
    label: str = ""
    companions: tuple[str, ...] = ()
    """The files run with `file` (an ONNX translator's decoder graphs beside its encoder graph)."""

    @property
    def runner(self) -> Runner | None:
        return RUNNERS.get((self.engine, self.kind))

    @property
    def logit_bound(self) -> float:
        """How far the file's logits may lie from MiniTF's where it claims exactness (its format's bound)."""
        runner = self.runner
        return export_format(runner.export_format).logit_bound if runner is not None else 0.0

    @property
    def claims_exact(self) -> bool:
        runner = self.runner
        return (
            runner is not None
            and runner.exact
            and self.precision in export_format(runner.export_format).exact_precisions
        )


@dataclass
class Export:
    """An export as `minitf verify` reads it."""

    path: Path
    targets: list[Target]
    cards: list[Path]
    """The cards (README.md) that get its table: none for a GGUF file alone."""
    source: str | None
    """The MiniTF folder or Hub repo id it names as its source."""
    source_hashes: dict[str, str] | None = None
    """The sha256 of that source's config.json and weights at export time (None: an export made before they were
    recorded)."""


# ---------------------------------------------------------------------------------------------------- precisions
def onnx_precision(file: str) -> str:
    """An ONNX export's file by transformers.js's dtype names: fp32 for a graph, else its variant's name."""
    from hf_minitf.export.onnx import SENTENCE_TRANSFORMERS_Q8_FILE

    if file == SENTENCE_TRANSFORMERS_Q8_FILE:
        return "q8"
    stem = file.removesuffix(".onnx")
    return next((dtype for dtype, suffix in ONNX_DTYPE_SUFFIXES.items() if suffix and stem.endswith(suffix)), "fp32")


def onnx_translator_graphs(files: list[str]) -> list[tuple[str, tuple[str, ...]]]:
    """An ONNX translator's files as what runs together: per dtype, its encoder graph and its two decoder graphs."""
    runs = []
    for dtype in ONNX_DTYPE_SUFFIXES:
        encoder, *decoders = (onnx_variant_file(graph, dtype) for graph in ONNX_TRANSLATOR_GRAPHS.values())
        if encoder in files:
            runs.append((encoder, tuple(decoders)))
    return runs


def recorded_hashes(value: object) -> dict[str, str] | None:
    """The source's hashes an export recorded (`SOURCE_HASHES_FIELD`), or None where it recorded none (or not an
    object of strings)."""
    if not isinstance(value, dict) or not value or not all(isinstance(item, str) for item in value.values()):
        return None
    return {str(part): digest for part, digest in value.items()}


def gguf_facts(path: Path) -> tuple[str, str, str | None, int, dict[str, str] | None]:
    """A GGUF file's kind (an embedder where it pools its states, else a generator), precision (its file type: f32,
    f16, q8_0, ...), the source it names, its context length, and the source's hashes it records."""
    reader = read_gguf(path)

    def value(key: str):
        found = reader.get_field(key)
        return None if found is None else found.contents()

    precision = gguf_file_type(path, reader)
    architecture = value("general.architecture")
    kind = "embedder" if value(f"{architecture}.pooling_type") else "generator"
    hashes = recorded_hashes({part: value(key) for part, key in GGUF_SOURCE_HASH_KEYS.items() if value(key)})
    return kind, precision, value(GGUF_SOURCE_KEY), int(value(f"{architecture}.context_length") or 512), hashes


# ------------------------------------------------------------------------------------------------------- layouts
def gguf_targets(
    folder: Path, names: list[str], prefix: str = ""
) -> tuple[list[Target], str | None, dict[str, str] | None]:
    """The GGUF files `names` of `folder`, and the source the first one names with its hashes."""
    targets: list[Target] = []
    source, hashes = None, None
    for name in names:
        kind, precision, named, context, recorded = gguf_facts(folder / name)
        if source is None:
            source, hashes = named, recorded
        targets.append(Target("llama.cpp", kind, folder, name, precision, {"context": context}, prefix + name))
    return targets, source, hashes


def gguf_file(path: Path) -> Export | None:
    from hf_minitf.export.gguf_file import GGUF_MAGIC

    if not path.is_file():
        return None
    with path.open("rb") as handle:
        if handle.read(4) != GGUF_MAGIC:
            return None
    targets, source, hashes = gguf_targets(path.parent, [path.name])
    return Export(path, targets, [], source, hashes)


def engine_folder(path: Path, prefix: str = "") -> Export | None:
    """A folder with minitf_export.json (ONNX, CTranslate2): each file it lists (else its default file)."""
    from hf_minitf.engines import export_info

    info = export_info(path) if path.is_dir() else None
    if info is None:
        return None
    engine, kind = info["engine"], info["kind"]
    files = info.get("files") or [info.get("default_file") or "model.bin"]
    runs: list[tuple[str, tuple[str, ...]]] = [(name, ()) for name in files]
    if engine == "onnxruntime" and kind == "translator":
        runs = onnx_translator_graphs(files)
    targets = [
        Target(
            engine,
            kind,
            path,
            name,
            onnx_precision(name) if engine == "onnxruntime" else info.get("quantization", "float32"),
            info,
            prefix + name + (" + decoders" if companions else ""),
            companions,
        )
        for name, companions in runs
    ]
    return Export(
        path, targets, [path / "README.md"], info.get("source"), recorded_hashes(info.get(SOURCE_HASHES_FIELD))
    )


def web_page(path: Path) -> Export | None:
    """A page of `minitf export web`: its model/ folder is an ONNX export."""
    from hf_minitf.export.web import MODEL_FOLDER, SITE_FILE

    if not (path / SITE_FILE).is_file():
        return None
    inner = engine_folder(path / MODEL_FOLDER, f"{MODEL_FOLDER}/")
    if inner is None:
        return None
    return Export(path, inner.targets, [path / "README.md", *inner.cards], inner.source, inner.source_hashes)


def native_folder(path: Path) -> Export | None:
    """A native export (transformers' GPT-2 / GPT-NeoX, or a SentenceTransformer folder), with the GGUF files
    beside it; or a folder of GGUF files with a card (an Ollama folder)."""
    from hf_minitf.cards import read_card

    if not path.is_dir():
        return None
    ggufs = sorted(item.name for item in path.glob("*.gguf"))
    targets, source, hashes = gguf_targets(path, ggufs)
    config_path = path / "config.json"
    config = read_json(config_path, object) if config_path.is_file() else {}
    if not isinstance(config, dict):
        return None
    model_type = config.get("model_type")
    weights = "model.safetensors"
    precision = str(config.get("dtype") or config.get("torch_dtype") or "float32")
    if model_type in NATIVE_POSITIONS and (path / weights).is_file():
        targets.insert(0, Target("transformers", "generator", path, weights, precision, label=weights))
    elif model_type == NATIVE_TRANSLATOR_MODEL_TYPE and (path / weights).is_file():
        targets.insert(0, Target("transformers", "translator", path, weights, precision, label=weights))
    elif (path / "modules.json").is_file() and model_type == NATIVE_MODEL_TYPES["encoder"]:
        targets.insert(0, Target("sentence-transformers", "embedder", path, weights, precision, label=weights))
    if not targets:
        return None
    card = read_card(path / "README.md")
    data = card.data.to_dict() if card is not None else {}
    if data.get(SOURCE_CARD_FIELD):
        source, hashes = data[SOURCE_CARD_FIELD], recorded_hashes(data.get(SOURCE_HASHES_FIELD))
    return Export(path, targets, [path / "README.md"], source, hashes)


READERS: dict[str, Callable[[Path], Export | None]] = {
    "gguf_file": gguf_file,
    "web_page": web_page,
    "engine_folder": engine_folder,
    "native_folder": native_folder,
}
LAYOUTS: list[Callable[[Path], Export | None]] = [
    READERS[name] for name in LAYOUT_NAMES if any(export.layout == name for export in export_formats().values())
]
"""The readers of the formats' exports, tried in turn (in `hf_minitf.export.format.LAYOUTS`' order); the first that
recognizes the path reads it."""


def find_export(path: Path) -> Export:
    """The export at `path`; a ValueError saying what it is otherwise."""
    if not path.exists():
        raise ValueError(f"{path} does not exist; give an export folder or GGUF file written by minitf export.")
    for layout in LAYOUTS:
        export = layout(path)
        if export is not None:
            return export
    raise ValueError(
        f"{path} is no export minitf verify reads (an ONNX or CTranslate2 folder with minitf_export.json, a "
        "native folder, a GGUF file, a web page); a MiniTF folder is what an export is verified against: "
        "give it with --source"
    )


__all__ = ["Export", "LAYOUTS", "RUNNERS", "Runner", "Target", "find_export"]
