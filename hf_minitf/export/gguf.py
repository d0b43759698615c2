"""Export a MiniTF GPT as one GGUF file for llama.cpp (and Ollama, LM Studio), written with the `gguf` package,
llama.cpp's own writer library.

Learned positions become llama.cpp's `gpt2` architecture, rotary positions `gptneox` (sequential residual, rotary on
every feature). Layout, by tensor (GGUF stores each matrix as the (out, in) rows of a torch Linear weight):

| MiniTF | GGUF | change |
|---|---|---|
| model.embed_tokens | token_embd | - |
| model.embed_positions (learned) | position_embd | - |
| layers.N.self_attn_layer_norm / mlp_layer_norm | blk.N.attn_norm / ffn_norm | - |
| layers.N.self_attn.qkv_proj | blk.N.attn_qkv | `[q|k|v]` kept; rotary: q/k rows of each head permuted from interleaved pairs to rotate-half order when `rope_interleaved`; a missing bias (`attention_bias=False`) is written as zeros |
| layers.N.self_attn.o_proj | blk.N.attn_output | missing bias as zeros |
| layers.N.mlp.fc1 / fc2 | blk.N.ffn_up / ffn_down | - |
| model.norm | output_norm | - |
| lm_head | output | written when untied, and always for `gptneox` (llama.cpp requires it there) |

The tokenizer goes inside as llama.cpp's `gpt2` (byte-level BPE) model with the `gpt-2` pre-tokenizer: a byte-level
BPE as it is; a character tokenizer rewritten as a byte-level vocabulary (each character spelled in GPT-2's byte
alphabet) plus the merges that join the bytes of its multi-byte characters. Special tokens are CONTROL tokens.
Matrices are written in the chosen type (`f32`, `f16`, `q8_0`: llama.cpp's 8-bit blocks of 32 with one f16 scale,
quantized by the gguf package); norms and biases stay f32, as in llama.cpp's own converter.
"""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import torch

from hf_minitf.cards import export_card_data
from hf_minitf.catalog.limits import GGUF_DTYPES
from hf_minitf.export.source import ExportRefused, MiniTFSource, check_native, open_source, split_qkv_heads
from hf_minitf.safety.output_folders import OutputDiskFull, check_output_file, disk_full

GGUF_MAGIC = b"GGUF"  # the first four bytes of every GGUF file
GGUF_ARCHITECTURES = {"learned": "gpt2", "rope": "gptneox"}
# llama.cpp's GPT-2 and GPT-NeoX graphs apply GELU (tanh form) and nothing else.
GELU_NAMES = ("gelu", "gelu_new", "gelu_pytorch_tanh")
Q8_0_BLOCK = 32
TOKEN_NORMAL, TOKEN_CONTROL, TOKEN_USER_DEFINED, TOKEN_UNUSED = 1, 3, 4, 5


def gguf_refusal(config: Any) -> str | None:
    """Why this MiniTF GPT config has no exact llama.cpp form, or None (the native refusals apply too)."""
    if config.hidden_act not in GELU_NAMES:
        return (
            f"hidden_act={config.hidden_act!r}: llama.cpp's gpt2 and gptneox graphs compute GELU only; this "
            "model needs `minitf export native`."
        )
    return None


# --------------------------------------------------------------------------------------------------- tokenizer
def byte_alphabet() -> dict[int, str]:
    """GPT-2's printable spelling of each byte (the `bytes_to_unicode` table of byte-level BPE)."""
    printable = (
        list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    )
    spelled, extra = {}, 0
    for byte in range(256):
        if byte in printable:
            spelled[byte] = chr(byte)
        else:
            spelled[byte] = chr(256 + extra)
            extra += 1
    return spelled


def _merges(model: dict[str, Any]) -> list[str]:
    return [merge if isinstance(merge, str) else " ".join(merge) for merge in model.get("merges", [])]


def gguf_vocabulary(tokenizer_json: dict[str, Any], vocab_size: int) -> tuple[list[str], list[int], list[str]]:
    """(tokens, token types, merges) of llama.cpp's `gpt2` tokenizer model for a MiniTF GPT tokenizer.

    Rows past the tokenizer's vocabulary (a model with spare embedding rows) are UNUSED `[PADn]` tokens.
    Raises ExportRefused for a tokenizer llama.cpp cannot reproduce (not BPE, a normalizer, another pre-tokenizer).
    """
    model = tokenizer_json.get("model") or {}
    if model.get("type") != "BPE":
        raise ExportRefused(
            f"cannot export to GGUF: the tokenizer is {model.get('type')!r}, not BPE; llama.cpp's "
            "gpt2 tokenizer model is a byte-level BPE."
        )
    if tokenizer_json.get("normalizer"):
        raise ExportRefused(
            "cannot export to GGUF: the tokenizer has a normalizer "
            f"({tokenizer_json['normalizer'].get('type')}), which llama.cpp's gpt2 tokenizer lacks."
        )
    for option in ("continuing_subword_prefix", "end_of_word_suffix"):
        if model.get(option):
            raise ExportRefused(
                f"cannot export to GGUF: the BPE sets {option}={model[option]!r}, which llama.cpp's "
                "byte-level BPE does not have."
            )
    pre_tokenizer = tokenizer_json.get("pre_tokenizer")
    added = {entry["id"]: entry for entry in tokenizer_json.get("added_tokens", [])}
    vocab = dict(model.get("vocab", {}))
    vocab.update({entry["content"]: index for index, entry in added.items()})
    if pre_tokenizer is None:  # a character tokenizer: spell each character in the byte alphabet
        if _merges(model):
            raise ExportRefused(
                "cannot export to GGUF: a BPE without a byte-level pre-tokenizer and with merges has no llama.cpp form."
            )
        spelled = byte_alphabet()
        tokens_by_id: dict[int, str] = {}
        first_seen: dict[str, None] = {}  # the merges, once each, in first-seen order (a dict keeps it)
        for token, index in vocab.items():
            if index in added:
                tokens_by_id[index] = token
                continue
            spelling = "".join([spelled[byte] for byte in token.encode("utf-8")])  # one character per byte
            tokens_by_id[index] = spelling
            for end in range(1, len(spelling)):  # join the bytes of a multi-byte character, left to right
                first_seen[f"{spelling[:end]} {spelling[end]}"] = None  # a repeat keeps its first place
        merges = list(first_seen)
    elif (
        pre_tokenizer.get("type") == "ByteLevel"
        and pre_tokenizer.get("use_regex", True)
        and not pre_tokenizer.get("add_prefix_space", False)
    ):
        tokens_by_id, merges = {index: token for token, index in vocab.items()}, _merges(model)
    else:
        raise ExportRefused(
            f"cannot export to GGUF: the tokenizer's pre-tokenizer {json.dumps(pre_tokenizer)} is not "
            "GPT-2's byte-level one (ByteLevel, regex on, no prefix space), the only one the gpt2 "
            "tokenizer of llama.cpp reproduces."
        )
    if not merges:
        merges = [inert_merge(tokens_by_id)]
    largest = max(tokens_by_id, default=-1)
    if largest >= vocab_size:
        raise ExportRefused(
            f"cannot export to GGUF: the tokenizer has token id {largest}, past the model's vocab_size={vocab_size}."
        )
    tokens, types = [], []
    for index in range(vocab_size):
        if index not in tokens_by_id:
            tokens.append(f"[PAD{index}]")
            types.append(TOKEN_UNUSED)
        elif index in added:
            tokens.append(tokens_by_id[index])
            types.append(TOKEN_CONTROL if added[index].get("special", True) else TOKEN_USER_DEFINED)
        else:
            tokens.append(tokens_by_id[index])
            types.append(TOKEN_NORMAL)
    return tokens, types, merges


def inert_merge(tokens_by_id: dict[int, str]) -> str:
    """A merge that never applies, for a vocabulary without merges (llama.cpp refuses a gpt2 tokenizer with none).

    Its left piece is two copies of the longest token, which no merge of the vocabulary can build.
    """
    longest = max((token for token in tokens_by_id.values() if " " not in token), key=len, default="Ġ")
    return f"{longest * 2} {longest}"


# ----------------------------------------------------------------------------------------------------- weights
def gguf_tensors(state: dict[str, torch.Tensor], config: Any) -> dict[str, torch.Tensor]:
    """MiniTF GPT weights under llama.cpp's tensor names, in its layout (see the module docstring)."""
    hidden = config.hidden_size
    rotary = config.position_embedding_type == "rope"
    out = {"token_embd.weight": state["model.embed_tokens.weight"]}
    if not rotary:
        out["position_embd.weight"] = state["model.embed_positions.weight"]
    for index in range(config.num_hidden_layers):
        prefix, block = f"model.layers.{index}.", f"blk.{index}."
        qkv = state[prefix + "self_attn.qkv_proj.weight"]
        qkv_bias = state.get(prefix + "self_attn.qkv_proj.bias", torch.zeros(3 * hidden, dtype=qkv.dtype))
        qkv, qkv_bias = (split_qkv_heads(tensor, config).reshape(tensor.shape) for tensor in (qkv, qkv_bias))
        out |= {
            block + "attn_norm.weight": state[prefix + "self_attn_layer_norm.weight"],
            block + "attn_norm.bias": state[prefix + "self_attn_layer_norm.bias"],
            block + "attn_qkv.weight": qkv,
            block + "attn_qkv.bias": qkv_bias,
            block + "attn_output.weight": state[prefix + "self_attn.o_proj.weight"],
            block + "attn_output.bias": state.get(
                prefix + "self_attn.o_proj.bias", torch.zeros(hidden, dtype=qkv.dtype)
            ),
            block + "ffn_norm.weight": state[prefix + "mlp_layer_norm.weight"],
            block + "ffn_norm.bias": state[prefix + "mlp_layer_norm.bias"],
            block + "ffn_up.weight": state[prefix + "mlp.fc1.weight"],
            block + "ffn_up.bias": state[prefix + "mlp.fc1.bias"],
            block + "ffn_down.weight": state[prefix + "mlp.fc2.weight"],
            block + "ffn_down.bias": state[prefix + "mlp.fc2.bias"],
        }
    out["output_norm.weight"] = state["model.norm.weight"]
    out["output_norm.bias"] = state["model.norm.bias"]
    if rotary or not config.tie_word_embeddings:
        out["output.weight"] = state["lm_head.weight"]
    return out


def _encoded(array: np.ndarray, dtype: str):
    """(data, GGML type) of one tensor: matrices in `dtype` (q8_0 needs rows of whole blocks of 32, else f16),
    vectors in f32."""
    from gguf import GGMLQuantizationType, quants

    if array.ndim == 1 or dtype == "f32":
        return array.astype(np.float32), GGMLQuantizationType.F32
    if dtype == "q8_0" and array.shape[-1] % Q8_0_BLOCK == 0:
        return quants.quantize(array.astype(np.float32), GGMLQuantizationType.Q8_0), GGMLQuantizationType.Q8_0
    return array.astype(np.float16), GGMLQuantizationType.F16


# ---------------------------------------------------------------------------------------------------- the file
def _write_gguf(
    path: Path,
    source: MiniTFSource,
    config: Any,
    tensors: dict[str, torch.Tensor],
    dtype: str,
    tokenizer,
    vocabulary: tuple[list[str], list[int], list[str]],
    license: str,
) -> None:
    from gguf import GGUFWriter, LlamaFileType

    arch = GGUF_ARCHITECTURES[config.position_embedding_type]
    writer = GGUFWriter(str(path), arch)
    writer.add_name(Path(source.name).name or source.name)
    writer.add_license(license)  # general.license: a GGUF file's card
    writer.add_context_length(config.max_position_embeddings)
    writer.add_embedding_length(config.hidden_size)
    writer.add_block_count(config.num_hidden_layers)
    writer.add_feed_forward_length(config.intermediate_size)
    writer.add_head_count(config.num_attention_heads)
    writer.add_layer_norm_eps(config.layer_norm_eps)
    if arch == "gptneox":
        writer.add_rope_dimension_count(config.hidden_size // config.num_attention_heads)
        writer.add_rope_freq_base(float(config.rope_theta))
        writer.add_parallel_residual(False)
    writer.add_file_type(
        {"f32": LlamaFileType.ALL_F32, "f16": LlamaFileType.MOSTLY_F16, "q8_0": LlamaFileType.MOSTLY_Q8_0}[dtype]
    )

    tokens, types, merges = vocabulary
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("gpt-2")
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    writer.add_token_merges(merges)  # llama.cpp requires the key, even empty (a character vocabulary)
    special = {
        "bos": (tokenizer.bos_token_id, config.bos_token_id),
        "eos": (tokenizer.eos_token_id, config.eos_token_id),
        "unk": (tokenizer.unk_token_id, None),
        "pad": (tokenizer.pad_token_id, config.pad_token_id),
    }
    for name, (from_tokenizer, from_config) in special.items():
        token_id = from_tokenizer if from_tokenizer is not None else from_config
        if isinstance(token_id, list):
            token_id = token_id[0]
        if token_id is not None:
            getattr(writer, f"add_{name}_token_id")(token_id)
    writer.add_add_bos_token(False)  # MiniTF's GPT tokenizers add no special tokens to a text
    writer.add_add_eos_token(False)
    if getattr(tokenizer, "chat_template", None):
        writer.add_chat_template(tokenizer.chat_template)

    for name, tensor in tensors.items():
        data, qtype = _encoded(tensor.detach().float().numpy(), dtype)
        writer.add_tensor(name, data, raw_dtype=qtype)  # a quantized row's shape is read from its bytes
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def export_gguf(
    source: str | os.PathLike,
    out: str | os.PathLike,
    *,
    dtype: str = "f16",
    overwrite: bool = False,
    revision: str | None = None,
    license: str | None = None,
) -> Path:
    """Write the MiniTF GPT `source` (a folder or a Hub repo id) as the GGUF file `out` with its tokenizer inside;
    returns `out`. `dtype`: f32, f16 or q8_0 for the matrices. Its `general.license` is the source card's (`license`
    overrides it; `DEFAULT_LICENSE` when the source names none).

    Raises ExportRefused (a ValueError) naming the field when llama.cpp has no exact form for the model. The file
    appears whole or not at all (written beside `out`, then renamed); `overwrite` replaces a GGUF file only, and
    `out` is checked before any work (`check_output_file`: no folder, no symbolic link, no path under a file).
    """
    from hf_minitf.modeling.configuration_minitf_gpt import MiniTFGPTConfig

    if dtype not in GGUF_DTYPES:
        raise ValueError(f"dtype must be one of {GGUF_DTYPES}, got {dtype!r}.")
    out = check_output_file(out, overwrite, GGUF_MAGIC, "GGUF")
    opened = open_source(source, revision)
    if opened.family != "gpt":
        raise ExportRefused(
            f"cannot export to GGUF: model_type={opened.config['model_type']!r}: GGUF export covers "
            "the GPT family (llama.cpp's gpt2 and gptneox); use `minitf export native`."
        )
    file_license = export_card_data(opened.folder, license)["license"]
    config = MiniTFGPTConfig.from_pretrained(opened.folder)
    reason = gguf_refusal(config)
    if reason is not None:
        raise ExportRefused(f"cannot export to GGUF: {reason}")
    check_native(config)
    model = opened.load_model()
    tokenizer = opened.load_tokenizer()
    vocabulary = gguf_vocabulary(json.loads(tokenizer.backend_tokenizer.to_str()), config.vocab_size)
    tensors = gguf_tensors(model.state_dict(), config)
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.parent / f".{out.name}.writing-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    try:
        _write_gguf(partial, opened, config, tensors, dtype, tokenizer, vocabulary, file_license)
        os.replace(partial, out)
    except Exception as error:
        if disk_full(error):
            raise OutputDiskFull(out, "the output file") from error
        raise
    finally:
        partial.unlink(missing_ok=True)
    return out


__all__ = [
    "GGUF_ARCHITECTURES",
    "GGUF_DTYPES",
    "byte_alphabet",
    "export_gguf",
    "gguf_refusal",
    "gguf_tensors",
    "gguf_vocabulary",
]
