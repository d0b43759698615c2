"""Convert checkpoints trained with the original codebases into Hugging Face folders that give the same numbers.

One module per source: `char_gpt` (the nanoGPT-style char GPT), `frawdllm` (FrawdLLM: checkpoints, its
published Hugging Face folders and Hub repo ids, its Embeddings layer), `miniembed` (MiniEmbed, and the
Transformer-embedding layer), `hkproj` (hkproj's pytorch-transformer). Checkpoints are read without running
pickled code (`checkpoint`), Hub repositories through huggingface_hub (`hf_minitf.hub.sources`), weights are streamed
into the output file (`output`) and the output folder is written whole (`hf_minitf.safety.output_folders`). `hf_minitf.catalog.converters`
names each source's function and module; `minitf convert SOURCE` runs them. `export_original` (`original`) is the way
back: a MiniTF folder as its original project's checkpoint and side files (`minitf export original`).
"""

import importlib

from hf_minitf.catalog.converters import CONVERTERS
from hf_minitf.conversion.checkpoint import ConversionError, open_checkpoint

# The converters, and the way back (`export_original`), each imported on first use.
_CONVERTERS = {converter.function: converter.module for converter in CONVERTERS.values()} | {
    "export_original": "original"
}


def __getattr__(name: str):
    if name in _CONVERTERS:
        return getattr(importlib.import_module(f"{__name__}.{_CONVERTERS[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["ConversionError", "open_checkpoint", *_CONVERTERS]
