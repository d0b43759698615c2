"""Convert a FrawdLLM model to `MiniTFGPTForCausalLM` + its byte-level BPE tokenizer (and FrawdLLM's
`Embeddings` layer, seed 002, to the GPT's embedding weights).

Input: a FrawdLLM training checkpoint (`{"model_state_dict", "config", ...}`, whose pickled
`src.model.config.ModelConfig` is read into a stand-in without running any FrawdLLM code), or a bare
state_dict (torch.save or safetensors); and the `tokenizers` JSON of its BPE tokenizer.
Inferred from the weights: vocabulary size, hidden size, layers, MLP width, learned positions or RoPE
(no `embeddings.pos_emb`), the context length (learned: position rows; RoPE: the causal-mask buffer,
which spans 4 x context_length), tied LM head. From the stored config when present: everything, checked
against the weights. Not in a bare state_dict: the number of heads (`num_heads`, a ModelConfig JSON, or a
size that matches one of FrawdLLM's presets), and a RoPE context length when the mask buffer was dropped.
Special-token ids default to FrawdLLM's (<|pad|>=0, <|unk|>=1, <|bos|>=2, <|eos|>=3) and must agree with
the tokenizer. The RMSNorm and SwiGLU variants (`use_rmsnorm`, `use_swiglu`) are not supported.

FrawdLLM's own loss takes `targets` already shifted and ignores pad id 0; the converted model's `labels`
follow transformers (labels = input ids, shifted inside, -100 ignored): pass `labels` with pad set to -100.

Run: `python -m hf_minitf.conversion.frawdllm CHECKPOINT --tokenizer tokenizer.json --out DIR`.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from transformers import GenerationConfig

from hf_minitf import MiniTFGPTConfig, MiniTFGPTForCausalLM
from hf_minitf.model_card import render_model_card
from hf_minitf.tokenization_minitf import BPE_SPECIAL_TOKENS, load_bpe_tokenizer

from .base import (
    ConvertedModel, check_given, count_layers, num_parameters, output_dtype, read_json, require_architecture,
    require_heads, save_converted, shape_of,
)
from .checkpoint import Checkpoint, ConversionError, PickledRecord, open_checkpoint, stand_in_class
from .gpt_common import gpt_rules, head_is_tied, plan_gpt

ModelConfigStandIn = stand_in_class("src.model.config.ModelConfig")

RULES = gpt_rules(
    embed_tokens="embeddings.token_emb", embed_positions="embeddings.pos_emb", layers="blocks",
    layer_parts={"self_attn_layer_norm": "ln1", "self_attn.qkv_proj": "attn.qkv_proj",
                 "self_attn.o_proj": "attn.out_proj", "mlp_layer_norm": "ln2", "mlp.fc1": "mlp.fc1",
                 "mlp.fc2": "mlp.fc2"},
    norm="ln_f", lm_head="lm_head",
)
BUFFERS = [r"blocks\.\d+\.attn\.mask"]
# FrawdLLM's tokenizer: <|pad|>=0 <|unk|>=1 <|bos|>=2 <|eos|>=3.
DEFAULT_IDS = {"pad_token_id": 0, "bos_token_id": 2, "eos_token_id": 3}
# FrawdLLM's presets: (vocab_size, n_embd, n_layer, context_length, use_rope) -> n_head.
PRESETS = {"tiny": ((8192, 256, 6, 256, False), 8), "small": ((8192, 512, 8, 512, False), 8),
           "base": ((8192, 768, 12, 1024, False), 12), "100m": ((32000, 768, 12, 1024, True), 12)}
UNSUPPORTED_HINT = ("FrawdLLM's RMSNorm / SwiGLU variants (use_rmsnorm / use_swiglu) are not supported by MiniTF GPT; "
                    "only the LayerNorm + GELU model converts.")


def stored_config(checkpoint: Checkpoint) -> dict[str, Any]:
    """The ModelConfig fields stored in a training checkpoint ({} for a bare state_dict)."""
    config = checkpoint.extras.get("config")
    if config is None:
        return {}
    fields = vars(config) if isinstance(config, PickledRecord) else config
    if not isinstance(fields, Mapping):
        raise ConversionError(
            f"{checkpoint.path}: the stored `config` is a {type(config).__name__}, not a ModelConfig."
        )
    return {key: value for key, value in fields.items() if not key.startswith("_")}


def _check_fields(fields: Mapping[str, Any], origin: str) -> None:
    for key, value in fields.items():
        if not isinstance(value, (bool, int, float, str, type(None))):
            raise ConversionError(f"{origin}: field {key} holds a {type(value).__name__}, expected a number or text.")
    unsupported = [key for key in ("use_rmsnorm", "use_swiglu") if fields.get(key)]
    if unsupported:
        raise ConversionError(f"{origin} sets {', '.join(f'{k}=True' for k in unsupported)}. {UNSUPPORTED_HINT}")


def infer_frawdllm_config(checkpoint: Checkpoint, given: Mapping[str, Any], num_heads: int | None,
                          context_length: int | None) -> dict[str, Any]:
    """FrawdLLM ModelConfig fields from the weights, completed and checked by `given` and the options."""
    vocab_size, n_embd = shape_of(checkpoint, "embeddings.token_emb.weight")
    use_rope = "embeddings.pos_emb.weight" not in checkpoint
    if "blocks.0.ln1.weight" in checkpoint and "blocks.0.ln1.bias" not in checkpoint:
        raise ConversionError(f"{checkpoint.path}: blocks.0.ln1 has no bias, as FrawdLLM's RMSNorm. {UNSUPPORTED_HINT}")
    inferred: dict[str, Any] = dict(vocab_size=vocab_size, n_embd=n_embd,
                                    n_layer=count_layers(checkpoint, r"blocks\.(\d+)\."), use_rope=use_rope)
    if not use_rope:
        inferred["context_length"] = shape_of(checkpoint, "embeddings.pos_emb.weight")[0]
    elif "blocks.0.attn.mask" in checkpoint:
        inferred["context_length"] = checkpoint.shape("blocks.0.attn.mask")[-1] // 4
    check_given(given, inferred, "FrawdLLM config")
    fields = {**given, **inferred}
    for key, value in (("context_length", context_length), ("n_head", num_heads)):
        if value is not None:
            if fields.get(key) is not None and fields[key] != value:
                option = "--" + key.replace("_", "-")
                raise ConversionError(f"{option} {value} contradicts the checkpoint's {key}={fields[key]}.")
            fields[key] = value
    if fields.get("context_length") is None:
        raise ConversionError("A RoPE checkpoint without its attention-mask buffer does not tell its context length; "
                              "pass --context-length (the ModelConfig's context_length).")
    if fields.get("n_head") is None:
        shape = (vocab_size, n_embd, fields["n_layer"], fields["context_length"], use_rope)
        fields["n_head"] = next((heads for sizes, heads in PRESETS.values() if sizes == shape), None)
    fields["n_head"] = require_heads(fields.get("n_head"), n_embd, "--num-heads (or --config)")
    if fields.get("head_dim") not in (None, n_embd // fields["n_head"]):
        raise ConversionError(
            f"head_dim={fields['head_dim']} does not match n_embd/n_head={n_embd // fields['n_head']}."
        )
    for key, value in DEFAULT_IDS.items():
        if fields.get(key) is None:
            fields[key] = value
    return fields


def frawdllm_gpt_config(fields: Mapping[str, Any], tied: bool) -> MiniTFGPTConfig:
    """The MiniTFGPTConfig that computes what FrawdLLM with these ModelConfig fields computes."""
    rope = bool(fields["use_rope"])
    dropout = float(fields.get("dropout") or 0.0)
    return MiniTFGPTConfig(
        vocab_size=fields["vocab_size"], hidden_size=fields["n_embd"], num_hidden_layers=fields["n_layer"],
        num_attention_heads=fields["n_head"], intermediate_size=fields["intermediate_size"],
        # FrawdLLM accepts 4 x context_length tokens with RoPE, exactly context_length with learned positions.
        max_position_embeddings=fields["context_length"] * (4 if rope else 1),
        position_embedding_type="rope" if rope else "learned", rope_interleaved=True, rope_theta=10000.0,
        hidden_dropout=dropout, attention_dropout=dropout, layer_norm_eps=1e-5, tie_word_embeddings=tied,
        pad_token_id=fields["pad_token_id"], bos_token_id=fields["bos_token_id"], eos_token_id=fields["eos_token_id"],
    )


def frawdllm_tokenizer(path: str | Path, fields: Mapping[str, Any]):
    """FrawdLLM's BPE JSON as a fast tokenizer; its special ids and size must fit the model."""
    try:
        limit = fields["context_length"] * (4 if fields["use_rope"] else 1)
        tokenizer = load_bpe_tokenizer(path, model_max_length=limit)
    except ValueError as error:
        raise ConversionError(f"Tokenizer {path}: {error}") from error
    largest = max(tokenizer.get_vocab().values())
    if largest >= fields["vocab_size"]:
        raise ConversionError(f"Tokenizer {path} has token id {largest}, past the model's "
                              f"vocab_size={fields['vocab_size']}; give the tokenizer the model was trained with.")
    for key in ("pad_token_id", "bos_token_id", "eos_token_id"):
        if getattr(tokenizer, key) != fields[key]:
            token = BPE_SPECIAL_TOKENS[key.replace("_id", "")]
            raise ConversionError(f"Tokenizer {path} gives {token} id {getattr(tokenizer, key)}, the model's config "
                                  f"says {key}={fields[key]}.")
    return tokenizer


def plan_frawdllm(checkpoint: Checkpoint, tokenizer: str | Path, num_heads: int | None = None,
                  config: Mapping[str, Any] | None = None, context_length: int | None = None,
                  dtype: str = "auto") -> ConvertedModel:
    """Plan the conversion of an open FrawdLLM checkpoint (see the module docstring)."""
    require_architecture(checkpoint, "frawdllm", "FrawdLLM")
    stored, given = stored_config(checkpoint), dict(config or {})
    _check_fields(stored, f"{checkpoint.path} (stored ModelConfig)")
    _check_fields(given, "the given FrawdLLM config")
    check_given(given, stored, "given FrawdLLM config (compared with the checkpoint's stored config)")
    fields = infer_frawdllm_config(checkpoint, {**stored, **given}, num_heads, context_length)
    fields["intermediate_size"] = shape_of(checkpoint, "blocks.0.mlp.fc1.weight")[0]
    tied = head_is_tied(checkpoint, "embeddings.token_emb.weight", "lm_head.weight")
    gpt_config = frawdllm_gpt_config(fields, tied)
    ignore = BUFFERS + ([r"lm_head\.weight"] if tied else [])
    plans = plan_gpt(checkpoint, gpt_config, RULES, ignore, output_dtype(checkpoint, checkpoint.keys(), dtype),
                     hint=UNSUPPORTED_HINT)
    fast_tokenizer = frawdllm_tokenizer(tokenizer, fields)
    generation_config = GenerationConfig(bos_token_id=fields["bos_token_id"], eos_token_id=fields["eos_token_id"],
                                         pad_token_id=fields["pad_token_id"])
    positions = ("rotary positions (RoPE, interleaved pairs as FrawdLLM computes them; up to 4 x the "
                 f"{fields['context_length']}-token training context)") if fields["use_rope"] else \
        f"learned positions ({fields['context_length']} tokens)"
    card = render_model_card(
        "gpt", gpt_config, title="FrawdLLM (converted)", prompt="Once upon a time",
        summary=f"A FrawdLLM decoder-only language model with {positions} and a byte-level BPE tokenizer.",
        origin=f"Converted with `minitf convert frawdllm` from `{checkpoint.path.name}` (FrawdLLM, "
               "tsingla1998/FrawdLLM). The converted model gives the original's logits to float32 rounding.",
        notes="## Differences from FrawdLLM's own wrapper\n\nThis model has a KV cache, honours `attention_mask` "
              "(left-padded batches generate what each prompt generates alone) and uses transformers' `generate`. "
              "Its `labels` follow transformers (the input ids, shifted inside; -100 is ignored), while FrawdLLM's "
              "loss took pre-shifted targets and ignored pad id 0.",
        num_parameters=num_parameters(plans),
    )
    inferred = {key: fields[key] for key in ("vocab_size", "n_embd", "n_layer", "n_head", "context_length", "use_rope")}
    inferred["tied_lm_head"] = tied
    return ConvertedModel(MiniTFGPTForCausalLM, gpt_config, plans, fast_tokenizer, generation_config, card, inferred)


def convert_frawdllm(checkpoint: str | Path, out: str | Path, *, tokenizer: str | Path, num_heads: int | None = None,
                     config: str | Path | Mapping[str, Any] | None = None, context_length: int | None = None,
                     dtype: str = "auto", overwrite: bool = False) -> ConvertedModel:
    """Convert a FrawdLLM checkpoint into the Hugging Face folder `out`; returns what was converted."""
    if not isinstance(config, Mapping):
        config = read_json(config, "FrawdLLM config")
    with open_checkpoint(checkpoint, allowed_classes=[ModelConfigStandIn]) as source:
        converted = plan_frawdllm(source, tokenizer, num_heads, config, context_length, dtype)
        save_converted(converted, out, overwrite)
    return converted


def convert_frawdllm_embeddings(checkpoint: str | Path,
                                prefix: str = "model.") -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """FrawdLLM's `Embeddings` state_dict (seed 002) as MiniTF GPT embedding weights under `prefix`.

    Returns the weights (load them into a larger `MiniTFGPTModel`/`ForCausalLM` with `strict=False`) and the
    config fields they fix (vocab_size, hidden_size, position_embedding_type, max_position_embeddings).
    """
    with open_checkpoint(checkpoint) as source:
        require_architecture(source, "FrawdLLM embedding layer", "FrawdLLM Embeddings")
        unexpected = sorted(set(source.keys()) - {"token_emb.weight", "pos_emb.weight"})
        if unexpected:
            raise ConversionError(f"{source.path}: unexpected keys {unexpected} for a FrawdLLM Embeddings layer.")
        vocab_size, hidden_size = source.shape("token_emb.weight")
        weights = {f"{prefix}embed_tokens.weight": source.get("token_emb.weight").clone()}
        fields: dict[str, Any] = dict(vocab_size=vocab_size, hidden_size=hidden_size, position_embedding_type="rope")
        if "pos_emb.weight" in source:
            positions, width = source.shape("pos_emb.weight")
            if width != hidden_size:
                raise ConversionError(
                    f"{source.path}: pos_emb.weight has width {width}, token_emb.weight {hidden_size}."
                )
            weights[f"{prefix}embed_positions.weight"] = source.get("pos_emb.weight").clone()
            fields.update(position_embedding_type="learned", max_position_embeddings=positions)
    return weights, fields


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The frawdllm options (shared by `minitf convert frawdllm` and `python -m ...frawdllm`)."""
    parser.add_argument("checkpoint", type=Path,
                        help="a FrawdLLM training checkpoint (.pt with model_state_dict and config) or a bare "
                             "state_dict (.pt or .safetensors)")
    parser.add_argument("--tokenizer", type=Path, required=True,
                        help="FrawdLLM's tokenizer: the `tokenizers` JSON of its byte-level BPE")
    parser.add_argument("--num-heads", type=int,
                        help="number of attention heads (n_head); needed only for a bare state_dict whose size "
                             "matches none of FrawdLLM's presets")
    parser.add_argument("--context-length", type=int,
                        help="context_length; needed only for a bare RoPE state_dict saved without its mask buffers")
    parser.add_argument("--config", type=Path,
                        help="optional JSON of FrawdLLM ModelConfig fields (n_head, context_length, dropout, token "
                             "ids, ...); checked against the checkpoint")


def run(args: argparse.Namespace) -> int:
    """Run a parsed frawdllm command; prints what was inferred."""
    converted = convert_frawdllm(args.checkpoint, args.out, tokenizer=args.tokenizer, num_heads=args.num_heads,
                                 config=args.config, context_length=args.context_length, dtype=args.dtype,
                                 overwrite=args.overwrite)
    print(f"Converted {args.checkpoint} -> {args.out} ({converted.inferred})")
    return 0


DESCRIPTION = __doc__.split("\n\nRun:")[0]

if __name__ == "__main__":
    from .cli import run_module

    raise SystemExit(run_module("frawdllm"))
