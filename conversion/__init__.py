"""Convert checkpoints trained with the original codebases into Hugging Face folders that give the same numbers.

One module per source: `char_gpt` (the nanoGPT-style char GPT), `frawdllm` (FrawdLLM: checkpoints, its
published Hugging Face folders and Hub repo ids, its Embeddings layer), `miniembed` (MiniEmbed, and the
Transformer-embedding layer), `hkproj` (hkproj's pytorch-transformer). Checkpoints are read without running
pickled code (`checkpoint`), Hub repositories through huggingface_hub (`hub_source`), weights are streamed
into the output file and the output folder is written atomically (`output`, `base`). `add_convert_parser`
adds `minitf convert ...` to a command line.
"""

import importlib

from .checkpoint import ConversionError, open_checkpoint
from .cli import add_convert_parser

# The converters, imported on first use (so `python -m hf_minitf.conversion.<module>` runs a fresh module).
_CONVERTERS = {
    "convert_char_gpt": "char_gpt",
    "convert_frawdllm": "frawdllm",
    "convert_frawdllm_embeddings": "frawdllm",
    "convert_hkproj": "hkproj",
    "convert_miniembed": "miniembed",
    "convert_transformer_embedding": "miniembed",
}


def __getattr__(name: str):
    if name in _CONVERTERS:
        return getattr(importlib.import_module(f"{__name__}.{_CONVERTERS[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["ConversionError", "add_convert_parser", "open_checkpoint", *_CONVERTERS]
