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
Matrices are written in the chosen type: `f32`, `f16`, or a llama.cpp quantization whose tensor types follow
llama.cpp's rules (`tensor_types`, after llama-quant.cpp's `llama_tensor_get_type`), quantized by the gguf package,
or, for the K-quants it cannot write, by llama.cpp's own quantizer from the f16 file (`write_gguf_file`, with
llama-cpp-python installed); norms and biases stay f32, as in llama.cpp's own converter. `export_gguf_report` also has the written file read back
and measured by `hf_minitf.evaluation.agreement`: how far its rounded weights move the model (`GGUFAgreement`).
"""

from __future__ import annotations

import copy
import functools
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from hf_minitf.cards import export_card_data
from hf_minitf.catalog.exports import (
    GGUF_AGREEMENT_NEW_TOKENS,
    GGUF_AGREEMENT_PROMPT_TOKENS,
    GGUF_AGREEMENT_PROMPTS,
    GGUF_AGREEMENT_TEXT,
)
from hf_minitf.catalog.limits import GGUF_DTYPES
from hf_minitf.catalog.verification import gguf_advice
from hf_minitf.evaluation.agreement import (
    GGUFAgreement,
    agreement_prompts,
    load_weights,
    measure_agreement,
    read_gguf_weights,
)
from hf_minitf.export.gguf_encoder import export_encoder_gguf
from hf_minitf.export.gguf_file import (
    FILE_TYPES,
    GELU_NAMES,
    GGUF_MAGIC,
    TensorType,
    gguf_writer,
    writable_types,
    write_gguf_file,
    write_tensors,
)
from hf_minitf.export.source import ExportRefused, MiniTFSource, check_native, open_source, split_qkv_heads
from hf_minitf.safety.output_folders import check_output_file, output_file

GGUF_ARCHITECTURES = {"learned": "gpt2", "rope": "gptneox"}
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
# llama.cpp's name of each tensor in block N: MiniTF's name in layer N (a missing bias is written as zeros).
LAYER_TENSORS = {
    "attn_norm.weight": "self_attn_layer_norm.weight",
    "attn_norm.bias": "self_attn_layer_norm.bias",
    "attn_qkv.weight": "self_attn.qkv_proj.weight",
    "attn_qkv.bias": "self_attn.qkv_proj.bias",
    "attn_output.weight": "self_attn.o_proj.weight",
    "attn_output.bias": "self_attn.o_proj.bias",
    "ffn_norm.weight": "mlp_layer_norm.weight",
    "ffn_norm.bias": "mlp_layer_norm.bias",
    "ffn_up.weight": "mlp.fc1.weight",
    "ffn_up.bias": "mlp.fc1.bias",
    "ffn_down.weight": "mlp.fc2.weight",
    "ffn_down.bias": "mlp.fc2.bias",
}


def gguf_names(config: Any) -> dict[str, str]:
    """llama.cpp's name of each tensor of the file -> the MiniTF weight it holds, in the file's order."""
    rotary = config.position_embedding_type == "rope"
    names = {"token_embd.weight": "model.embed_tokens.weight"}
    if not rotary:
        names["position_embd.weight"] = "model.embed_positions.weight"
    for index in range(config.num_hidden_layers):
        names |= {f"blk.{index}.{ours}": f"model.layers.{index}.{theirs}" for ours, theirs in LAYER_TENSORS.items()}
    names |= {"output_norm.weight": "model.norm.weight", "output_norm.bias": "model.norm.bias"}
    if rotary or not config.tie_word_embeddings:
        names["output.weight"] = "lm_head.weight"
    return names


def qkv_rows(config: Any) -> torch.Tensor:
    """The MiniTF row of each row of the file's attn_qkv (the rotary q/k permutation of `split_qkv_heads`)."""
    return split_qkv_heads(torch.arange(3 * config.hidden_size), config).reshape(-1)


def gguf_tensors(state: dict[str, torch.Tensor], config: Any) -> dict[str, torch.Tensor]:
    """MiniTF GPT weights under llama.cpp's tensor names, in its layout (see the module docstring)."""
    rows = qkv_rows(config)
    out = {}
    for gguf_name, name in gguf_names(config).items():
        tensor = state.get(name)
        if tensor is None:  # attention_bias=False: llama.cpp's graphs add a bias, so it is written as zeros
            weight = state[name.removesuffix(".bias") + ".weight"]
            tensor = torch.zeros(weight.shape[0], dtype=weight.dtype)
        out[gguf_name] = tensor[rows] if ".attn_qkv." in gguf_name else tensor
    return out


def minitf_weights(arrays: dict[str, np.ndarray], config: Any) -> dict[str, torch.Tensor]:
    """The inverse of `gguf_tensors`: the file's tensors (as float arrays) under MiniTF's names and layout (with the
    zero biases written for a model without attention biases)."""
    rows = qkv_rows(config)
    weights = {}
    for gguf_name, name in gguf_names(config).items():
        tensor = torch.from_numpy(np.ascontiguousarray(arrays[gguf_name], dtype=np.float32))
        if ".attn_qkv." in gguf_name:
            tensor = torch.empty_like(tensor).index_copy_(0, rows, tensor)
        weights[name] = tensor
    return weights


# ---------------------------------------------------------------------------------------------------- the file
def _write_gguf(
    source: MiniTFSource,
    config: Any,
    tensors: dict[str, torch.Tensor],
    tokenizer,
    vocabulary: tuple[list[str], list[int], list[str]],
    license: str,
    path: Path,
    dtype: str,
    types: dict[str, TensorType],
) -> None:
    from gguf import LlamaFileType

    arch = GGUF_ARCHITECTURES[config.position_embedding_type]
    writer = gguf_writer(path, arch, source, config, license)
    if arch == "gptneox":
        writer.add_rope_dimension_count(config.hidden_size // config.num_attention_heads)
        writer.add_rope_freq_base(float(config.rope_theta))
        writer.add_parallel_residual(False)
    writer.add_file_type(LlamaFileType[FILE_TYPES[dtype][0]])

    tokens, token_types, merges = vocabulary
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("gpt-2")
    writer.add_token_list(tokens)
    writer.add_token_types(token_types)
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

    write_tensors(writer, tensors, types)


# ------------------------------------------------------------------------------------------------ agreement
def dequantized_model(path: str | os.PathLike, model: Any) -> Any:
    """`model` (a MiniTF GPT in float32) with the weights of the GGUF file `path` as llama.cpp reads them: each
    tensor dequantized (`evaluation.agreement.read_gguf_weights`), put back in MiniTF's layout (`minitf_weights`).
    A tied head is untied when the file stores the head apart (gptneox files always do), since llama.cpp then reads
    the embedding and the head each in its own type."""
    return load_weights(model, minitf_weights(read_gguf_weights(path), model.config))


# ---------------------------------------------------------------------------------------------------- export
@dataclass
class GGUFExport:
    """What `export_gguf_report` wrote: the file, its type, each tensor's type, the agreement measured, and what
    quantized it where llama.cpp's quantizer did (the K-quants; None: the gguf package wrote every tensor)."""

    path: Path
    dtype: str
    types: dict[str, TensorType]
    agreement: GGUFAgreement | None = None
    size: int = 0
    fallbacks: list[TensorType] = field(default_factory=list)
    quantizer: str | None = None

    @classmethod
    def written(
        cls,
        path: Path,
        dtype: str,
        types: dict[str, TensorType],
        agreement: GGUFAgreement | None = None,
        quantizer: str | None = None,
    ) -> GGUFExport:
        """What was written at `path` (now in place): its size and the tensors that fell back, from `types`."""
        fallbacks = [tensor for tensor in types.values() if tensor.fell_back]
        return cls(path, dtype, types, agreement, path.stat().st_size, fallbacks, quantizer)

    def report_lines(self) -> list[str]:
        """What `minitf export gguf` prints after the file's name: who quantized it (llama.cpp), the fallbacks,
        then the agreement."""
        lines = []
        if self.quantizer is not None:
            lines.append(f"quantized by {self.quantizer} from the f16 file")
        if self.fallbacks:
            lines.append(
                f"{len(self.fallbacks)} tensor(s) fell back from their type in llama.cpp's {self.dtype} mix: "
                + "; ".join(tensor.describe() for tensor in self.fallbacks)
            )
        if self.agreement is not None:
            lines.append(self.rounding_line())
        return lines

    def advised_summary(self) -> str:
        """The agreement measured (`GGUFAgreement.summary`), followed by what it means for the user in one sentence
        (`catalog.verification.gguf_advice`)."""
        agreement = self.agreement
        if agreement is None:
            raise ValueError("no agreement was measured for this file")
        advice = gguf_advice(self.dtype, agreement.prompts, agreement.equal_prompts, agreement.first_difference)
        return f"{agreement.summary()}; {advice}"

    def rounding_line(self) -> str:
        """`advised_summary`, labelled as what it is: the file's weights dequantized and run in PyTorch, not a run
        in llama.cpp (`minitf verify` runs llama.cpp)."""
        return (
            "weights' rounding, measured in PyTorch (the file's weights dequantized into the MiniTF model in "
            f"float32; not a llama.cpp run): {self.advised_summary()}"
        )


def _export_gpt_gguf(
    opened: MiniTFSource, out: Path, dtype: str, license: str | None, agreement_text: str | None
) -> GGUFExport:
    """`export_gguf_report` for a GPT folder (`opened`; `out` already checked)."""
    from hf_minitf.modeling.configuration_minitf_gpt import MiniTFGPTConfig

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
    types = writable_types(tensors, dtype, config.num_hidden_layers)
    if agreement_text is not None:  # a text without prompts is refused before the file is written
        agreement_prompts(tokenizer, agreement_text, GGUF_AGREEMENT_PROMPTS, GGUF_AGREEMENT_PROMPT_TOKENS)
    with output_file(out) as partial:
        write = functools.partial(_write_gguf, opened, config, tensors, tokenizer, vocabulary, file_license)
        quantizer = write_gguf_file(partial, tensors, types, dtype, config.num_hidden_layers, write)
        agreement = None
        if agreement_text is not None:  # measured by hf_minitf.evaluation on the loaded model and the file's weights
            reference = opened.load_model(torch.float32)
            rounded = dequantized_model(partial, copy.deepcopy(reference))
            counts = (GGUF_AGREEMENT_PROMPTS, GGUF_AGREEMENT_PROMPT_TOKENS, GGUF_AGREEMENT_NEW_TOKENS)
            agreement = measure_agreement(reference, rounded, tokenizer, agreement_text, *counts)
    return GGUFExport.written(out, dtype, types, agreement, quantizer)


def check_gguf_dtype(dtype: str) -> None:
    """Refuse a GGUF type that is not one of `GGUF_DTYPES`, before any work."""
    if dtype not in GGUF_DTYPES:
        raise ValueError(f"dtype must be one of {GGUF_DTYPES}, got {dtype!r}.")


def export_gguf_report(
    source: str | os.PathLike,
    out: str | os.PathLike,
    *,
    dtype: str = "f16",
    overwrite: bool = False,
    revision: str | None = None,
    license: str | None = None,
    agreement_text: str | None = GGUF_AGREEMENT_TEXT,
    source_repo: str | None = None,
    published: bool = False,
) -> GGUFExport:
    """`export_gguf`, returning what was written (`GGUFExport`): each tensor's type, the tensors that fell back,
    and, for a GPT unless `agreement_text` is None, the file's agreement measured on that text
    (`evaluation.agreement.measure_agreement`; an encoder's is measured by `minitf verify` in llama.cpp). A file
    written to be uploaded (`published`) records its source as `source_repo` (the Hub repo the source is published
    as), else `source` when that is a repo id, else not at all: no folder of this machine (`MiniTFSource.recorded`)."""
    check_gguf_dtype(dtype)
    checked = check_output_file(out, overwrite, GGUF_MAGIC, "GGUF")
    opened = open_source(source, revision, published=published, published_as=source_repo)
    return write_gguf_report(opened, checked, dtype, license, agreement_text)


def write_gguf_report(
    opened: MiniTFSource, checked: Path, dtype: str, license: str | None, agreement_text: str | None
) -> GGUFExport:
    """`export_gguf_report` of an opened source into the checked path `checked`: an export that writes the GGUF
    file beside other files (`export_ollama`) hands in the source it opened, so the model and tokenizer load once."""
    if opened.family == "encoder":
        types, quantizer = export_encoder_gguf(opened, checked, dtype, license)
        return GGUFExport.written(checked, dtype, types, quantizer=quantizer)
    if opened.family != "gpt":
        raise ExportRefused(
            f"cannot export to GGUF: model_type={opened.config['model_type']!r}: GGUF export covers GPTs and "
            "encoders; llama.cpp's only encoder-decoder graph is T5's (RMSNorm, relative position buckets), which "
            "has no form for a MiniTF translator: use `minitf export ctranslate2` or `minitf export onnx`."
        )
    return _export_gpt_gguf(opened, checked, dtype, license, agreement_text)


def export_gguf(
    source: str | os.PathLike,
    out: str | os.PathLike,
    *,
    dtype: str = "f16",
    overwrite: bool = False,
    revision: str | None = None,
    license: str | None = None,
) -> Path:
    """Write the MiniTF GPT or encoder `source` (a folder or a Hub repo id) as the GGUF file `out` with its tokenizer
    inside; returns `out`. An encoder is written as a llama.cpp embedding model (`hf_minitf.export.gguf_encoder`). `dtype`: one of `GGUF_DTYPES` (f32, f16, or a llama.cpp quantization, typed per tensor by
    `tensor_types`). Its `general.license` is the source card's (`license` overrides it; `DEFAULT_LICENSE` when the
    source names none). `export_gguf_report` also says which tensors fell back and measures the file's agreement.

    Raises ExportRefused (a ValueError) naming the field when llama.cpp has no exact form for the model, or when
    the mix needs a type the gguf package cannot quantize and llama.cpp's quantizer (the `llama` extra) is not
    installed (with it, llama.cpp quantizes the f16 file). The file appears whole or not at all (written beside
    `out`, then renamed); `overwrite` replaces a GGUF file only, and `out` is checked before any work
    (`check_output_file`: no folder, no symbolic link, no path under a file).
    """
    return export_gguf_report(
        source, out, dtype=dtype, overwrite=overwrite, revision=revision, license=license, agreement_text=None
    ).path


__all__ = [
    "GGUF_ARCHITECTURES",
    "GGUFAgreement",
    "GGUFExport",
    "byte_alphabet",
    "check_gguf_dtype",
    "dequantized_model",
    "export_gguf",
    "export_gguf_report",
    "gguf_names",
    "gguf_refusal",
    "gguf_tensors",
    "gguf_vocabulary",
    "minitf_weights",
    "write_gguf_report",
]
