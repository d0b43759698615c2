"""Export a MiniTF encoder (MiniEmbed) as one GGUF file that llama.cpp loads as an embedding model: `llama-server
--embeddings`, `llama-embedding`, llama-cpp-python's `Llama(path, embedding=True)`.

llama.cpp's encoder architectures are not the MiniTF encoder: `bert`, `nomic-bert` and `jina-bert-v2` are post-norm
with a LayerNorm on the embeddings; `modern-bert` and `neo-bert` are pre-norm but gated (GeGLU, SwiGLU) and rotary.
Its `gpt2` graph is the MiniTF encoder layer exactly (pre-norm LayerNorms with biases, one `[q|k|v]` projection, a
GELU MLP, a position table, a final LayerNorm), and llama.cpp reads `{arch}.attention.causal` and
`{arch}.pooling_type` for every architecture (llama-model.cpp `load_hparams`) and pools every graph's last states
(`build_pooling` in `llama_model::build_graph`): `gpt2` with `causal = false` and `pooling_type = mean` is the
encoder, and llama.cpp averages its states over each text's tokens ([CLS] and [SEP] included, as MiniTF does).
The L2 normalization is the caller's: llama-cpp-python's `embed(normalize=True)`, llama.cpp's `--embd-normalize`.

| MiniTF | GGUF | change |
|---|---|---|
| embed_tokens | token_embd | times sqrt(hidden_size) when `scale_embeddings` (MiniTF scales at lookup) |
| embed_positions, or the sinusoid | position_embd | the sinusoid (sin on even, cos on odd features) as a table |
| layers.N.self_attn_layer_norm / mlp_layer_norm | blk.N.attn_norm / ffn_norm | - |
| layers.N.self_attn.q_proj, k_proj, v_proj | blk.N.attn_qkv | stacked `[q|k|v]`; missing biases as zeros |
| layers.N.self_attn.o_proj | blk.N.attn_output | missing bias as zeros |
| layers.N.mlp.fc1 / fc2 | blk.N.ffn_up / ffn_down | - |
| norm | output_norm | - |

The tokenizer goes inside as llama.cpp's `bert` (WordPiece) tokenizer model, which gives MiniEmbed's word-level ids:
it lowercases (`tokenizer.ggml.normalizer.lowercase`; accents kept), splits at whitespace and punctuation, looks
each word up whole as `▁word` (each vocabulary word is written so; a word the vocabulary lacks becomes [UNK], as in
MiniEmbed, since no token continues a word) and adds [CLS] ... [SEP]. They differ on text MiniEmbed splits where
WordPiece does not, or the other way: `_` inside words (punctuation to llama.cpp), combining marks, symbols past
ASCII written against a word (`5€`), runs of CJK characters, control and format characters (dropped by llama.cpp),
Python's final-sigma lowercasing. llama.cpp reads no position past the table: a text longer than
`max_position_embeddings` tokens aborts it where its context is larger (give n_ctx = n_batch = n_ubatch = the
context length; llama-cpp-python's `embed` then cuts longer texts). Matrices take the types of `export gguf`'s
`--dtype` (`tensor_types`).

`hf_minitf.export.gguf.export_gguf` (`minitf export gguf`) writes an encoder through `export_encoder_gguf`.
"""

from __future__ import annotations

import functools
import json
import math
from pathlib import Path
from typing import Any

import torch

from hf_minitf.cards import export_card_data
from hf_minitf.export.gguf_file import (
    FILE_TYPES,
    GELU_NAMES,
    TensorType,
    gguf_writer,
    writable_types,
    write_gguf_file,
    write_tensors,
)
from hf_minitf.export.source import ExportRefused, MiniTFSource, check_sentence_transformer_folder
from hf_minitf.safety.output_folders import output_file
from hf_minitf.tokenization.miniembed import CLS, SEP, SPECIAL_TOKENS, miniembed_tokenizer

ENCODER_ARCHITECTURE = "gpt2"  # llama.cpp's graph that computes the MiniTF encoder layer (see the module docstring)
WORD_PREFIX = "\u2581"  # "▁": how llama.cpp's WordPiece marks a token that starts a word
# llama.cpp's BertNormalizer keys (llama-arch.cpp), which gguf 0.19 has no names for.
LOWERCASE_KEY = "tokenizer.ggml.normalizer.lowercase"
STRIP_ACCENTS_KEY = "tokenizer.ggml.normalizer.strip_accents"


def encoder_gguf_refusal(config: Any) -> str | None:
    """Why this MiniTF encoder config has no llama.cpp form, or None."""
    if config.hidden_act not in GELU_NAMES:
        return f"hidden_act={config.hidden_act!r}: llama.cpp's gpt2 graph, which runs the encoder, computes GELU only."
    return None


# --------------------------------------------------------------------------------------------------- tokenizer
def wordpiece_vocabulary(tokenizer, vocab_size: int) -> tuple[list[str], list[int]]:
    """(tokens, token types) of llama.cpp's `bert` tokenizer model for a MiniEmbed word-level tokenizer: each word
    as `▁word`, the special tokens as they are (CONTROL; [UNK] UNKNOWN), ids past the tokenizer UNUSED `[PADn]`.

    Raises ExportRefused for any other tokenizer (subword pieces, another normalizer, split or template), whose ids
    llama.cpp's WordPiece would not reproduce.
    """
    from gguf import TokenType

    data = json.loads(tokenizer.backend_tokenizer.to_str())
    model = data.get("model") or {}
    if model.get("type") != "WordLevel":
        raise ExportRefused(
            f"cannot export to GGUF: the encoder's tokenizer is {model.get('type')!r}, not MiniEmbed's word-level "
            "one; llama.cpp's WordPiece tokenizer splits unknown words longest piece first, not by BPE merges."
        )
    reference = json.loads(miniembed_tokenizer({"word_to_id": SPECIAL_TOKENS}).backend_tokenizer.to_str())
    for part in ("normalizer", "pre_tokenizer", "post_processor"):
        if data.get(part) != reference[part]:
            raise ExportRefused(
                f"cannot export to GGUF: the encoder's tokenizer has another {part} than MiniEmbed's (lowercase, "
                "word split, [CLS] ... [SEP]), the one llama.cpp's WordPiece tokenizer reproduces."
            )
    special = {entry["id"]: entry["content"] for entry in data.get("added_tokens", [])}
    words = {index: word for word, index in model["vocab"].items() if index not in special}
    largest = max([*special, *words], default=-1)
    if largest >= vocab_size:
        raise ExportRefused(
            f"cannot export to GGUF: the tokenizer has token id {largest}, past the model's vocab_size={vocab_size}."
        )
    tokens: list[str] = []
    types: list[int] = []
    for index in range(vocab_size):
        if index in special:
            tokens.append(special[index])
            types.append(TokenType.UNKNOWN if index == tokenizer.unk_token_id else TokenType.CONTROL)
        elif index in words:
            tokens.append(WORD_PREFIX + words[index])
            types.append(TokenType.NORMAL)
        else:
            tokens.append(f"[PAD{index}]")
            types.append(TokenType.UNUSED)
    return tokens, types


# ----------------------------------------------------------------------------------------------------- weights
def encoder_gguf_tensors(model) -> dict[str, torch.Tensor]:
    """A `MiniTFEncoderModel`'s weights under llama.cpp's gpt2 tensor names (see the module docstring)."""
    config = model.config
    scale = math.sqrt(config.hidden_size) if config.scale_embeddings else 1.0
    if config.position_embedding_type == "learned":
        positions = model.embed_positions.weight
    else:
        positions = model.sinusoidal_positions(torch.arange(config.max_position_embeddings)[None])[0]
    out = {"token_embd.weight": model.embed_tokens.weight * scale, "position_embd.weight": positions}

    def bias(linear) -> torch.Tensor:  # llama.cpp's gpt2 graph adds a bias to every projection
        return linear.bias if linear.bias is not None else torch.zeros(linear.out_features)

    for index, layer in enumerate(model.layers):
        attention, block = layer.self_attn, f"blk.{index}."
        projections = (attention.q_proj, attention.k_proj, attention.v_proj)
        out |= {
            block + "attn_norm.weight": layer.self_attn_layer_norm.weight,
            block + "attn_norm.bias": layer.self_attn_layer_norm.bias,
            block + "attn_qkv.weight": torch.cat([projection.weight for projection in projections]),
            block + "attn_qkv.bias": torch.cat([bias(projection) for projection in projections]),
            block + "attn_output.weight": attention.o_proj.weight,
            block + "attn_output.bias": bias(attention.o_proj),
            block + "ffn_norm.weight": layer.mlp_layer_norm.weight,
            block + "ffn_norm.bias": layer.mlp_layer_norm.bias,
            block + "ffn_up.weight": layer.mlp.fc1.weight,
            block + "ffn_up.bias": bias(layer.mlp.fc1),
            block + "ffn_down.weight": layer.mlp.fc2.weight,
            block + "ffn_down.bias": bias(layer.mlp.fc2),
        }
    out |= {"output_norm.weight": model.norm.weight, "output_norm.bias": model.norm.bias}
    return {name: tensor.detach().float() for name, tensor in out.items()}


# ---------------------------------------------------------------------------------------------------- the file
def _write_encoder_gguf(
    source: MiniTFSource,
    model,
    tokenizer,
    vocabulary,
    tensors,
    license: str,
    path: Path,
    dtype: str,
    types: dict[str, TensorType],
) -> None:
    from gguf import LlamaFileType, PoolingType

    config = model.config
    writer = gguf_writer(path, ENCODER_ARCHITECTURE, source, config, license)
    writer.add_causal_attention(False)
    writer.add_pooling_type(PoolingType.MEAN)
    writer.add_file_type(LlamaFileType[FILE_TYPES[dtype][0]])

    tokens, token_types = vocabulary
    writer.add_tokenizer_model("bert")
    writer.add_token_list(tokens)
    writer.add_token_types(token_types)
    # llama.cpp's WordPiece starts a text with bos and ends it with sep: MiniEmbed's template ([CLS] $A [SEP], its
    # ids checked by `wordpiece_vocabulary`).
    writer.add_bos_token_id(SPECIAL_TOKENS[CLS])
    writer.add_sep_token_id(SPECIAL_TOKENS[SEP])
    for name in ("unk", "pad"):
        token_id = getattr(tokenizer, f"{name}_token_id")
        if token_id is not None:
            getattr(writer, f"add_{name}_token_id")(token_id)
    writer.add_add_bos_token(True)
    writer.add_add_sep_token(True)
    writer.add_bool(LOWERCASE_KEY, True)
    writer.add_bool(STRIP_ACCENTS_KEY, False)

    write_tensors(writer, tensors, types)


def export_encoder_gguf(
    opened: MiniTFSource, out: Path, dtype: str, license: str | None
) -> tuple[dict[str, TensorType], str | None]:
    """Write the encoder folder `opened` as the GGUF file `out` (already checked) of the module docstring, beside
    `out` then renamed; return each tensor's type and what quantized the file where llama.cpp's quantizer did
    (`write_gguf_file`). Raises ExportRefused naming what llama.cpp cannot reproduce."""
    from hf_minitf.modeling.configuration_minitf_encoder import MiniTFEncoderConfig

    if (opened.folder / "modules.json").is_file():
        check_sentence_transformer_folder(opened.folder)
    config = MiniTFEncoderConfig.from_pretrained(opened.folder)
    reason = encoder_gguf_refusal(config)
    if reason is not None:
        raise ExportRefused(f"cannot export to GGUF: {reason}")
    file_license = export_card_data(opened.folder, license)["license"]
    model, tokenizer = opened.load_model(torch.float32), opened.load_tokenizer()
    vocabulary = wordpiece_vocabulary(tokenizer, config.vocab_size)
    with torch.no_grad():
        tensors = encoder_gguf_tensors(model)
    types = writable_types(tensors, dtype, config.num_hidden_layers)
    with output_file(out) as partial:
        write = functools.partial(_write_encoder_gguf, opened, model, tokenizer, vocabulary, tensors, file_license)
        quantizer = write_gguf_file(partial, tensors, types, dtype, config.num_hidden_layers, write)
    return types, quantizer


__all__ = [
    "ENCODER_ARCHITECTURE",
    "encoder_gguf_refusal",
    "encoder_gguf_tensors",
    "export_encoder_gguf",
]
