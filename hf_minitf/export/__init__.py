"""Exports of MiniTF models to formats that run without this package: native transformers architectures
(`export_native`), GGUF for llama.cpp and Ollama (`export_gguf`), CTranslate2 (`export_ctranslate2`) and ONNX
Runtime (`export_onnx`), a static web page running the model with transformers.js (`export_web`);
`hf_minitf.engines` runs the engine exports. `hf_minitf.catalog.exports` lists the formats, each declared by its object in `formats`. Each function is
imported on first use, so importing the package loads no torch.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from hf_minitf.catalog.exports import EXPORTS

# Each format's writer `export_NAME` is in the module of its name (its object, in `formats`, calls it).
_MODULE_OF = {f"export_{name}": name for name in EXPORTS} | {"ExportRefused": "source"}

if TYPE_CHECKING:
    from hf_minitf.export.ctranslate2 import export_ctranslate2
    from hf_minitf.export.gguf import export_gguf
    from hf_minitf.export.native import export_native
    from hf_minitf.export.ollama import export_ollama
    from hf_minitf.export.onnx import export_onnx
    from hf_minitf.export.source import ExportRefused
    from hf_minitf.export.web import export_web


def __getattr__(name: str) -> Any:
    if name not in _MODULE_OF:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_MODULE_OF[name]}"), name)


__all__ = [
    "ExportRefused",
    "export_ctranslate2",
    "export_gguf",
    "export_native",
    "export_ollama",
    "export_onnx",
    "export_web",
]
