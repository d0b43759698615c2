"""The GGUF file every MiniTF export writes (a GPT by `hf_minitf.export.gguf`, an encoder by
`hf_minitf.export.gguf_encoder`): each tensor's type by llama.cpp's rules for the chosen dtype, the header every
file starts with, and the tensors written in their types with the `gguf` package, llama.cpp's own writer library.
The types the gguf package cannot quantize (the K-quants) are written by llama.cpp's own quantizer, through
llama-cpp-python (the `llama` extra), from the f16 file: `write_gguf_file`.
"""

from __future__ import annotations

import functools
import importlib.util
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from hf_minitf.catalog.packaging import EXTRAS, installed_version
from hf_minitf.catalog.verification import GGUF_SOURCE_HASH_KEYS, GGUF_SOURCE_KEY
from hf_minitf.export.source import ExportRefused, MiniTFSource

GGUF_MAGIC = b"GGUF"  # the first four bytes of every GGUF file
# llama.cpp's GPT-2 and GPT-NeoX graphs apply GELU (tanh form) and nothing else.
GELU_NAMES = ("gelu", "gelu_new", "gelu_pytorch_tanh")


# ------------------------------------------------------------------------------------------------ tensor types
# Each dtype's llama.cpp file type (gguf's `LlamaFileType` member, llama.cpp's `LLAMA_FTYPE_` + it) and the tensor type
# of its matrices (a mix's base type).
FILE_TYPES = {
    "f32": ("ALL_F32", "F32"),
    "f16": ("MOSTLY_F16", "F16"),
    "q8_0": ("MOSTLY_Q8_0", "Q8_0"),
    "q4_0": ("MOSTLY_Q4_0", "Q4_0"),
    "q4_1": ("MOSTLY_Q4_1", "Q4_1"),
    "q5_0": ("MOSTLY_Q5_0", "Q5_0"),
    "q5_1": ("MOSTLY_Q5_1", "Q5_1"),
    "q4_k_m": ("MOSTLY_Q4_K_M", "Q4_K"),
    "q5_k_m": ("MOSTLY_Q5_K_M", "Q5_K"),
    "q6_k": ("MOSTLY_Q6_K", "Q6_K"),
}
# llama.cpp's `tensor_type_fallback`: the type a matrix gets when its rows are no multiple of its type's block; a
# type without one (and a fallback that does not fit either) gives f16, as the f16 file a quantization starts from.
FALLBACK_TYPES = {"Q4_K": "Q5_0", "Q5_K": "Q5_1", "Q6_K": "Q8_0"}
MORE_BITS_MIXES = ("q4_k_m", "q5_k_m")  # the _M mixes: Q6_K for attn_qkv and ffn_down of some layers


def block_size(type_name: str) -> int:
    """Values per block of a GGML type (1 for f32 / f16)."""
    from gguf import GGML_QUANT_SIZES, GGMLQuantizationType

    return GGML_QUANT_SIZES[GGMLQuantizationType[type_name]][0]


def use_more_bits(layer: int, layers: int) -> bool:
    """llama.cpp's choice of the layers an _M mix stores with more bits: the first and last eighth, and every third
    layer between."""
    return layer < layers // 8 or layer >= 7 * layers // 8 or (layer - layers // 8) % 3 == 2


def _mix_type(name: str, dtype: str, columns: int, layers: int, tied: bool) -> str:
    """The type llama.cpp's `dtype` mix gives the matrix `name` before the shape is checked."""
    base = FILE_TYPES[dtype][1]
    if name == "output.weight" or (tied and name == "token_embd.weight"):  # the output head keeps more bits
        if columns % block_size(base):
            return "Q8_0"
        return base if base == "Q8_0" else "Q6_K"
    if dtype in MORE_BITS_MIXES and name.endswith((".attn_qkv.weight", ".ffn_down.weight")):
        if use_more_bits(int(name.split(".")[1]), layers):
            return "Q6_K"
    return base


def _fallback(type_name: str, columns: int) -> str:
    fallback = FALLBACK_TYPES.get(type_name, "F16")
    return fallback if columns % block_size(fallback) == 0 else "F16"


@dataclass(frozen=True)
class TensorType:
    """The GGML type of one tensor of the file, the type its mix asked for (`wanted`), and why they differ: "rows"
    (its rows are no multiple of the wanted type's block) or "writer" (the gguf package cannot quantize it)."""

    name: str
    type: str
    wanted: str
    columns: int
    reason: str = ""

    @property
    def fell_back(self) -> bool:
        return self.type != self.wanted

    def describe(self) -> str:
        """`name wanted -> type (why)`, as the export prints a fallback."""
        if self.reason == "writer":
            why = f"the gguf package cannot write {self.wanted}"
        else:
            why = f"{self.columns} columns, not a multiple of {block_size(self.wanted)}"
        return f"{self.name} {self.wanted} -> {self.type} ({why})"


def tensor_types(
    shapes: dict[str, tuple[int, ...]], dtype: str, layers: int, unwritable: tuple[str, ...] = ()
) -> dict[str, TensorType]:
    """The type of each tensor (llama.cpp's name -> its shape, rows first) in a `dtype` file, by llama.cpp's rules
    (llama-quant.cpp, `llama_tensor_get_type` for the gpt2 / gptneox architectures): vectors f32; f32 / f16 files
    every matrix in that type; a quantization: the position table f16 (llama.cpp leaves it unquantized), the
    output head (the token embedding when tied) Q6_K, or Q8_0 where its rows do not fit the base type's blocks,
    or the base type for q8_0; in the _M mixes attn_qkv and ffn_down Q6_K in `use_more_bits` layers; every other
    matrix the base type. Each then falls back as llama.cpp's `tensor_type_fallback` does where its rows do not fit
    the blocks, and, for a type of `unwritable` other than the mix's base type, as if they did not (Q6_K -> Q8_0).
    A base type of `unwritable` is kept: `export_gguf` refuses the file."""
    tied = "output.weight" not in shapes
    base = FILE_TYPES[dtype][1]
    types = {}
    for name, shape in shapes.items():
        columns = shape[-1]
        if len(shape) == 1:
            wanted = "F32"
        elif dtype in ("f32", "f16"):
            wanted = base
        elif name == "position_embd.weight":
            wanted = "F16"
        else:
            wanted = _mix_type(name, dtype, columns, layers, tied)
        if columns % block_size(wanted):
            types[name] = TensorType(name, _fallback(wanted, columns), wanted, columns, "rows")
        elif wanted in unwritable and wanted != base:
            types[name] = TensorType(name, _fallback(wanted, columns), wanted, columns, "writer")
        else:
            types[name] = TensorType(name, wanted, wanted, columns)
    return types


QUANTIZED_TYPES = ("Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q4_K", "Q5_K", "Q6_K")
"""The quantized tensor types the mixes use."""


@functools.cache
def unwritable_types() -> tuple[str, ...]:
    """The types of `QUANTIZED_TYPES` that the installed gguf package cannot quantize (0.19: the K-quants)."""
    from gguf import GGMLQuantizationType, quants

    missing = []
    for type_name in QUANTIZED_TYPES:
        try:
            quants.quantize(np.zeros((1, block_size(type_name)), np.float32), GGMLQuantizationType[type_name])
        except NotImplementedError:
            missing.append(type_name)
    return tuple(missing)


def _encoded(array: np.ndarray, type_name: str) -> tuple[np.ndarray, Any]:
    """(data, GGML type) of one tensor in the type `tensor_types` chose."""
    from gguf import GGMLQuantizationType, quants

    qtype = GGMLQuantizationType[type_name]
    if type_name == "F32":
        return array.astype(np.float32), qtype
    if type_name == "F16":
        return array.astype(np.float16), qtype
    return quants.quantize(array.astype(np.float32), qtype), qtype


def llama_quantizer_installed() -> bool:
    """Whether llama.cpp's quantizer is importable (llama-cpp-python, the `llama` extra); nothing is imported."""
    return importlib.util.find_spec("llama_cpp") is not None


def needs_llama_quantizer(dtype: str) -> bool:
    """Whether a `dtype` file's matrices take a type only llama.cpp's quantizer writes (the K mixes), where their rows
    fit its blocks."""
    return FILE_TYPES[dtype][1] in unwritable_types()


def writable_types(tensors: dict[str, torch.Tensor], dtype: str, layers: int) -> dict[str, TensorType]:
    """`tensor_types` of `tensors` in a `dtype` file of `layers` blocks, as they will be written: llama.cpp's own mix
    where llama.cpp's quantizer is installed (`write_gguf_file` has it write what the gguf package cannot);
    otherwise with the types the gguf package cannot write falling back, and ExportRefused, naming the extra to
    install, when a tensor keeps a base type it cannot quantize."""
    shapes = {name: tuple(tensor.shape) for name, tensor in tensors.items()}
    if llama_quantizer_installed():
        return tensor_types(shapes, dtype, layers)
    missing = unwritable_types()
    types = tensor_types(shapes, dtype, layers, missing)
    needing = [tensor for tensor in types.values() if tensor.type in missing]
    if not needing:
        return types
    from importlib.metadata import version

    raise ExportRefused(
        f"cannot export to GGUF at {dtype}: {len(needing)} tensor(s) (first {needing[0].name}) take "
        f"{needing[0].type}, which the gguf package {version('gguf')} cannot quantize; install llama.cpp's quantizer "
        f"({EXTRAS['llama'].install}) and export again, or choose q8_0, q5_1, q5_0, q4_1 or q4_0."
    )


LLAMA_QUANTIZE = """\
import sys
import llama_cpp
params = llama_cpp.llama_model_quantize_default_params()
params.ftype = getattr(llama_cpp, sys.argv[3])
sys.exit(llama_cpp.llama_model_quantize(sys.argv[1].encode(), sys.argv[2].encode(), params))
"""
"""llama.cpp's quantizer (`llama_model_quantize`) on the file argv[1] into argv[2] at the file type argv[3]."""


def llama_quantize(f16: Path, out: Path, dtype: str) -> None:
    """Quantize the GGUF file `f16` into `out` at `dtype` with llama.cpp's own quantizer, in a process of its own (it
    logs every tensor, and a failed assertion of llama.cpp ends its process); a RuntimeError with its last words when
    it fails."""
    ftype = f"LLAMA_FTYPE_{FILE_TYPES[dtype][0]}"
    completed = subprocess.run(
        [sys.executable, "-c", LLAMA_QUANTIZE, str(f16), str(out), ftype], capture_output=True, text=True
    )
    if completed.returncode != 0:
        said = (completed.stderr.strip().splitlines() or [f"exit status {completed.returncode}"])[-1]
        raise RuntimeError(f"llama.cpp's quantizer (llama-cpp-python) failed to write {dtype} ({ftype}): {said}")


def write_gguf_file(
    path: Path,
    tensors: dict[str, torch.Tensor],
    types: dict[str, TensorType],
    dtype: str,
    layers: int,
    write: Callable[[Path, str, dict[str, TensorType]], None],
) -> str | None:
    """Write the GGUF file `path` of `tensors` in `types` (`writable_types`): `write(file, dtype, types)` writes a
    file with the gguf package. Where `types` hold a type it cannot quantize (a K-quant, planned because llama.cpp's
    quantizer is installed), `write` writes the f16 file llama.cpp's converter would, in a scratch folder beside
    `path`, and llama.cpp's quantizer writes `path` from it (`llama_quantize`), as llama.cpp's own pipeline does.
    Returns what quantized the file in that case (llama.cpp's quantizer and its version), else None."""
    if not any(tensor.type in unwritable_types() for tensor in types.values()):
        write(path, dtype, types)
        return None
    with tempfile.TemporaryDirectory(prefix=f".{path.name}.f16-", dir=path.parent) as scratch:
        f16 = Path(scratch) / "f16.gguf"
        write(f16, "f16", tensor_types({name: tuple(tensor.shape) for name, tensor in tensors.items()}, "f16", layers))
        llama_quantize(f16, path, dtype)
    return f"llama.cpp's quantizer (llama-cpp-python {installed_version('llama-cpp-python')})"


# ---------------------------------------------------------------------------------------------------- the file
def gguf_writer(path: Path, arch: str, source: MiniTFSource, config: Any, license: str):
    """A GGUFWriter for `arch` holding what every MiniTF GGUF file says first: its name, license and source with its
    hashes (`MiniTFSource.recorded`: what `minitf verify` measures it against; none in a published file made from a
    folder of this machine), and the transformer's sizes."""
    from gguf import GGUFWriter

    writer = GGUFWriter(str(path), arch)
    writer.add_name(Path(source.name).name or source.name)
    writer.add_license(license)  # general.license: a GGUF file's card
    if source.recorded is not None:  # a published file made from a folder of this machine records no source
        writer.add_string(GGUF_SOURCE_KEY, source.recorded)
        for part, digest in source.hashes().items():
            writer.add_string(GGUF_SOURCE_HASH_KEYS[part], digest)
    writer.add_context_length(config.max_position_embeddings)
    writer.add_embedding_length(config.hidden_size)
    writer.add_block_count(config.num_hidden_layers)
    writer.add_feed_forward_length(config.intermediate_size)
    writer.add_head_count(config.num_attention_heads)
    writer.add_layer_norm_eps(config.layer_norm_eps)
    return writer


def write_tensors(writer: Any, tensors: dict[str, torch.Tensor], types: dict[str, TensorType]) -> None:
    """Add `tensors` in the types `tensor_types` chose, write the file (header, metadata, tensors) and close it."""
    for name, tensor in tensors.items():
        data, qtype = _encoded(tensor.detach().float().numpy(), types[name].type)
        writer.add_tensor(name, data, raw_dtype=qtype)  # a quantized row's shape is read from its bytes
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


__all__ = [
    "FILE_TYPES",
    "GELU_NAMES",
    "GGUF_MAGIC",
    "QUANTIZED_TYPES",
    "TensorType",
    "gguf_writer",
    "llama_quantize",
    "needs_llama_quantizer",
    "llama_quantizer_installed",
    "tensor_types",
    "unwritable_types",
    "writable_types",
    "write_gguf_file",
    "write_tensors",
]
