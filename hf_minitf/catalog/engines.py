"""The engines a MiniTF folder can run on in `minitf generate / translate / embed --engine` and `minitf serve
--engine`: torch (transformers' `generate()`, SentenceTransformer), or an engine export of the folder made on first
use into a cache beside it (`ENGINE_CACHE_FOLDER`), checked with `minitf verify`'s comparison before it answers and
reused while the folder's config and weights hash as they did (`hf_minitf.serving.engine_cache`).
"""

from __future__ import annotations

from dataclasses import dataclass

TORCH = "torch"
"""The engine of a MiniTF folder as saved: transformers in PyTorch, no start-up cost."""
AUTO = "auto"
"""`minitf serve`'s default: per model, the fastest exact engine the installed extras allow (`AUTO_ORDER`)."""
ENGINE_CACHE_FOLDER = ".minitf-engines"
"""Where a folder's engine exports live, one subfolder per engine (FOLDER/.minitf-engines/onnx)."""
ENGINE_CACHE_FILE = "minitf_engine_cache.json"
"""In each cached export: the hashes of the folder it was made from, the package version, the verification."""


@dataclass(frozen=True)
class CachedEngine:
    """An engine a MiniTF folder runs on through an export made at start-up."""

    name: str
    """The `--engine` value."""
    export_format: str
    """The `minitf export` format it runs (`hf_minitf.export.export_NAME`)."""
    modules: tuple[str, ...]
    """What must import to export to it and run it (the engines extra provides them)."""
    runtime: str
    """The runtime's name, as `minitf_export.json` and the start-up line name it."""


CACHED_ENGINES: dict[str, CachedEngine] = {
    engine.name: engine
    for engine in (
        CachedEngine("onnx", "onnx", ("onnxruntime", "onnx", "onnxscript"), "onnxruntime"),
        CachedEngine("ctranslate2", "ctranslate2", ("ctranslate2",), "ctranslate2"),
    )
}
AUTO_ORDER = ("onnx",)
"""What `auto` tries, fastest first (measured in benchmarks/speed.py and docs/serving.md): ONNX Runtime runs the
quickstart GPT ~5x faster than `generate()` per greedy token; CTranslate2 only on an explicit --engine."""
COMMAND_ENGINES = (TORCH, *CACHED_ENGINES)
"""The `--engine` choices of `minitf generate / translate / embed` (default: torch, or an export folder's own)."""


__all__ = [
    "AUTO",
    "AUTO_ORDER",
    "CACHED_ENGINES",
    "COMMAND_ENGINES",
    "ENGINE_CACHE_FILE",
    "ENGINE_CACHE_FOLDER",
    "TORCH",
    "CachedEngine",
]
