"""A MiniTF translator as transformers' own `PegasusForConditionalGeneration`, exactly.

Pegasus is the native encoder-decoder with MiniTF's (hkproj's) layer: pre-LN layers with a final LayerNorm in each
stack, a position table stored as a weight (loaded as written: the interleaved sinusoid or a learned table),
embeddings scaled by sqrt(d), ReLU or GELU, biases everywhere (zero where MiniTF's projections have none) and a
`final_logits_bias`. Three things differ, and each has an exact form:

- Pegasus's LayerNorms have eps 1e-5, fixed. A LayerNorm does not see the scale of its input but for eps:
  LN(c x; eps) = LN(x; eps / c^2). So the residual stream is written `c` times larger (the embeddings, the position
  table, and every output projection feeding it) with c^2 = 1e-5 / MiniTF's eps; hkproj's first norm (std * eps, a
  LayerNorm of eps 0 with its gain scaled, as the CTranslate2 export writes it) takes c^2 = 1e7.
- MiniTF keeps two vocabularies; Pegasus has one. The joint vocabulary puts the source tokens at their ids and the
  target tokens after them (id + source vocabulary size); one embedding matrix holds both (the encoder only reads
  source ids, the decoder only target ids) and `final_logits_bias` is -inf on the source rows, so no source token
  is ever generated. The joint tokenizer (tokenizer.json) is the source tokenizer with the target tokens added,
  each marked by a leading `JOINT_MARK`, which its Metaspace decoder turns back into the space the target
  tokenizer joins words with.
- hkproj's head may output log-probabilities; Pegasus outputs logits. Their argmax and their log-softmax, which
  greedy and beam search use, are the same.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file

from hf_minitf.catalog.exports import NATIVE_ARCHITECTURES, NATIVE_TRANSLATOR_MODEL_TYPE
from hf_minitf.export.source import ExportRefused
from hf_minitf.safety.json_files import read_json

PEGASUS_EPS = 1e-5
"""The eps of every LayerNorm in transformers' Pegasus (nn.LayerNorm's default; not a config field)."""
STD_TIMES_EPS_RESIDUAL_SCALE_SQUARED = 1e7
"""c^2 for hkproj's first norm: the LayerNorm it equals has eps 0, approached here as 1e-5 / 1e7 = 1e-12."""
JOINT_MARK = "\u2581"
"""Marks target tokens in the joint vocabulary (sentencepiece's word boundary, which Metaspace decodes)."""
TYPED_MARK = "\ufffd"
"""What the joint tokenizer reads a JOINT_MARK typed in a source text as: a character no vocabulary holds, so the
text gets [UNK] where the source tokenizer alone gives it."""
TOKEN_ID_FIELDS = ("bos_token_id", "eos_token_id", "pad_token_id", "decoder_start_token_id")


def residual_scale(config: Any) -> float:
    """c, the factor of the residual stream that gives Pegasus's fixed-eps LayerNorms MiniTF's eps."""
    if config.norm_type == "scalar_std_times_eps":
        return math.sqrt(STD_TIMES_EPS_RESIDUAL_SCALE_SQUARED)
    return math.sqrt(PEGASUS_EPS / config.layer_norm_eps)


def _norm(norm: Any, config: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """A MiniTF norm's gain and bias as a LayerNorm's: hkproj's first norm (one gain and bias, dividing by
    eps * the unbiased std) as the LayerNorm of eps 0 it equals, over `hidden_size` features."""
    gamma, beta = norm.weight.detach().float(), norm.bias.detach().float()
    if config.norm_type == "scalar_std_times_eps":
        size = config.hidden_size
        gamma = gamma / (norm.eps * math.sqrt(size / (size - 1)))
        gamma, beta = gamma.expand(size), beta.expand(size)
    return gamma.contiguous(), beta.contiguous()


def pegasus_state_dict(model: Any) -> dict[str, torch.Tensor]:
    """The Pegasus weights of a `MiniTFSeq2SeqForConditionalGeneration` (see the module docstring)."""
    config = model.config
    scale = residual_scale(config)
    source_size, hidden = config.src_vocab_size, config.hidden_size
    stacks = {"encoder": model.model.encoder, "decoder": model.model.decoder}
    embeddings = torch.cat([stacks["encoder"].embed_tokens.weight, stacks["decoder"].embed_tokens.weight]) * scale
    state = {"model.shared.weight": embeddings}

    def linear(prefix: str, module: Any, factor: float = 1.0) -> None:
        state[f"{prefix}.weight"] = module.weight * factor
        bias = module.bias if module.bias is not None else torch.zeros(module.out_features)
        state[f"{prefix}.bias"] = bias * factor

    def layer_norm(prefix: str, norm: Any) -> None:
        state[f"{prefix}.weight"], state[f"{prefix}.bias"] = _norm(norm, config)

    for side, stack in stacks.items():
        state[f"model.{side}.embed_tokens.weight"] = embeddings
        positions = stack.embed_positions(torch.arange(config.max_position_embeddings)[None])[0]
        state[f"model.{side}.embed_positions.weight"] = positions * scale
        layer_norm(f"model.{side}.layer_norm", stack.norm)
        for index, layer in enumerate(stack.layers):
            prefix = f"model.{side}.layers.{index}"
            attentions = [("self_attn", layer.self_attn_layer_norm, layer.self_attn)]
            if side == "decoder":
                attentions.append(("encoder_attn", layer.cross_attn_layer_norm, layer.cross_attn))
            for name, norm, attention in attentions:
                layer_norm(f"{prefix}.{name}_layer_norm", norm)
                for projection in ("q_proj", "k_proj", "v_proj"):
                    linear(f"{prefix}.{name}.{projection}", getattr(attention, projection))
                linear(f"{prefix}.{name}.out_proj", attention.o_proj, scale)
            layer_norm(f"{prefix}.final_layer_norm", layer.mlp_layer_norm)
            linear(f"{prefix}.fc1", layer.mlp.fc1)
            linear(f"{prefix}.fc2", layer.mlp.fc2, scale)
    head = torch.zeros(source_size + config.vocab_size, hidden)
    head[source_size:] = model.lm_head.weight
    bias = torch.full((1, source_size + config.vocab_size), float("-inf"))
    if model.lm_head.bias is not None:
        bias[0, source_size:] = model.lm_head.bias
    else:
        bias[0, source_size:] = 0.0
    state["lm_head.weight"], state["final_logits_bias"] = head, bias
    return {name: tensor.detach().to(torch.float32).clone().contiguous() for name, tensor in state.items()}


def pegasus_config(config: Any) -> dict[str, Any]:
    """config.json of the Pegasus model (token ids in the joint vocabulary)."""
    shift = config.src_vocab_size
    return {
        "architectures": [NATIVE_ARCHITECTURES["seq2seq"]],
        "model_type": NATIVE_TRANSLATOR_MODEL_TYPE,
        "vocab_size": config.src_vocab_size + config.vocab_size,
        "d_model": config.hidden_size,
        "encoder_layers": config.num_hidden_layers,
        "decoder_layers": config.num_hidden_layers,
        "encoder_attention_heads": config.num_attention_heads,
        "decoder_attention_heads": config.num_attention_heads,
        "encoder_ffn_dim": config.intermediate_size,
        "decoder_ffn_dim": config.intermediate_size,
        "activation_function": config.hidden_act,
        "max_position_embeddings": config.max_position_embeddings,
        "scale_embedding": config.scale_embedding,
        "dropout": 0.0,
        "attention_dropout": 0.0,
        "activation_dropout": 0.0,
        "tie_word_embeddings": False,
        "is_encoder_decoder": True,
        **{name: _shifted(getattr(config, name, None), shift) for name in TOKEN_ID_FIELDS},
        "forced_eos_token_id": None,
    }


def _shifted(value: Any, shift: int) -> Any:
    """A target token id (or list of them) in the joint vocabulary."""
    if value is None:
        return None
    return [item + shift for item in value] if isinstance(value, list) else value + shift


def shift_generation_config(generation: Any, config: Any) -> Any:
    """The MiniTF generation config with its target token ids moved into the joint vocabulary."""
    for name in TOKEN_ID_FIELDS:
        value = getattr(generation, name, None)
        if value is None:
            value = getattr(config, name, None)
        setattr(generation, name, _shifted(value, config.src_vocab_size))
    return generation


def joint_tokenizer_json(source: dict[str, Any], target: dict[str, Any], source_size: int) -> dict[str, Any]:
    """tokenizer.json of the joint vocabulary: the source tokenizer (its normalizer, pre-tokenizer and template),
    with every target token added after the source ids, marked, and a Metaspace decoder."""
    for side, data in (("source", source), ("target", target)):
        model = data.get("model") or {}
        if model.get("type") != "WordLevel":
            raise ExportRefused(
                f"cannot export to a native architecture: the {side} tokenizer is a {model.get('type')} model; the "
                "joint vocabulary is built for hkproj's word-level vocabularies (WordLevel)"
            )
        marked = next((token for token in model["vocab"] if JOINT_MARK in token or TYPED_MARK in token), None)
        if marked is not None:
            raise ExportRefused(
                f"cannot export to a native architecture: the {side} token {marked!r} holds {JOINT_MARK!r} or "
                f"{TYPED_MARK!r}, which the joint vocabulary uses to mark target tokens (and a typed mark)"
            )
    if target.get("decoder") is not None:
        raise ExportRefused(
            "cannot export to a native architecture: the target tokenizer has a decoder "
            f"({target['decoder'].get('type')}); the joint tokenizer reproduces words joined by spaces only"
        )
    joint = json.loads(json.dumps(source))
    joint["model"]["vocab"] = {
        **source["model"]["vocab"],
        **{JOINT_MARK + token: index + source_size for token, index in target["model"]["vocab"].items()},
    }
    # The normalizer reads a JOINT_MARK typed in a source text as TYPED_MARK, so that a word never reaches a target
    # id (the source tokenizer alone gives it [UNK]). Added tokens are matched on the raw text: the target's special
    # tokens typed with their mark ("\u2581[EOS]") are the one text read otherwise (docs/export.md says so).
    added = [
        {**token, "id": token["id"] + source_size, "content": JOINT_MARK + token["content"]}
        for token in target.get("added_tokens", [])
    ]
    joint["added_tokens"] = list(source.get("added_tokens", [])) + added
    unmark = {"type": "Replace", "pattern": {"String": JOINT_MARK}, "content": TYPED_MARK}
    normalizer = source.get("normalizer")
    joint["normalizer"] = unmark if normalizer is None else {"type": "Sequence", "normalizers": [unmark, normalizer]}
    joint["decoder"] = {"type": "Metaspace", "replacement": JOINT_MARK, "prepend_scheme": "always", "split": True}
    return joint


def save_native_seq2seq_files(source: Any, model: Any, tokenizer: Any, folder: Path) -> None:
    """config.json, model.safetensors, tokenizer.json (joint) and generation_config.json of the Pegasus model."""
    from tokenizers import Tokenizer
    from transformers import GenerationConfig, PreTrainedTokenizerFast

    config = model.config
    fields = pegasus_config(config)
    (folder / "config.json").write_text(json.dumps(fields, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    save_file(pegasus_state_dict(model), str(folder / "model.safetensors"), metadata={"format": "pt"})
    source_json, target_json = (
        read_json(source.folder / f"{side}_tokenizer.json", advice="save the translator's tokenizer again")
        for side in ("source", "target")
    )
    joint = Tokenizer.from_str(json.dumps(joint_tokenizer_json(source_json, target_json, config.src_vocab_size)))
    native = PreTrainedTokenizerFast(
        tokenizer_object=joint,
        unk_token=tokenizer.unk_token,
        pad_token=tokenizer.pad_token,
        bos_token=tokenizer.bos_token,
        eos_token=tokenizer.eos_token,
        model_max_length=config.max_position_embeddings,
        clean_up_tokenization_spaces=False,
    )
    native.save_pretrained(folder)
    generation = source.load_generation_config() or GenerationConfig()
    shift_generation_config(generation, config).save_pretrained(folder)


__all__ = [
    "JOINT_MARK",
    "joint_tokenizer_json",
    "pegasus_config",
    "pegasus_state_dict",
    "residual_scale",
    "save_native_seq2seq_files",
    "shift_generation_config",
]
