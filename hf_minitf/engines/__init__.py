"""Running export folders without torch: CTranslate2 for the GPT and seq2seq families, ONNX Runtime for every family, with the interface the `minitf generate`, `translate` and `embed` commands use (`load_engine`).
Greedy decoding gives the MiniTF model's tokens; sampling draws from the same distribution with the engine's own
random numbers.

`folders` reads and checks an export folder's files, `ctranslate2`, `onnx` and `onnx_translator` hold the runners, `dispatch` reads a
folder's `minitf_export.json` and picks its runner. The engines sit above `hf_minitf.export` (whose folders they
run) and below `hf_minitf.serving` and the commands.
"""

from hf_minitf.engines.ctranslate2 import CTranslate2Generator, CTranslate2Translator
from hf_minitf.engines.dispatch import check_export_info, export_info, load_engine
from hf_minitf.engines.folders import ExportFolderError
from hf_minitf.engines.onnx import OnnxEmbedder, OnnxGenerator, mean_pool_normalize
from hf_minitf.engines.onnx_translator import OnnxTranslator

__all__ = [
    "CTranslate2Generator",
    "CTranslate2Translator",
    "ExportFolderError",
    "OnnxEmbedder",
    "OnnxGenerator",
    "OnnxTranslator",
    "check_export_info",
    "export_info",
    "load_engine",
    "mean_pool_normalize",
]
