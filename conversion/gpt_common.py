"""What the two GPT sources (the nanoGPT-style char GPT, FrawdLLM) share: the key map onto `MiniTFGPTForCausalLM`,
and tied-head detection."""

from __future__ import annotations

import re
from collections.abc import Mapping

import torch

from hf_minitf.conversion.base import Rule, map_weights, meta_model
from hf_minitf.conversion.checkpoint import Checkpoint
from hf_minitf.conversion.output import TensorPlan
from hf_minitf.modeling.configuration_minitf_gpt import MiniTFGPTConfig
from hf_minitf.modeling.modeling_minitf_gpt import MiniTFGPTForCausalLM

# Parts of one target layer, `model.layers.N.<part>`, in the order the original names are given.
LAYER_PARTS = ("self_attn_layer_norm", "self_attn.qkv_proj", "self_attn.o_proj", "mlp_layer_norm", "mlp.fc1", "mlp.fc2")


def gpt_rules(
    embed_tokens: str, embed_positions: str | None, layers: str, layer_parts: Mapping[str, str], norm: str, lm_head: str
) -> list[Rule]:
    """Key map onto MiniTFGPTForCausalLM from the original module names (`layers` is the layer-list prefix,
    `layer_parts` maps each of LAYER_PARTS to its original name inside a layer)."""
    rules: list[Rule] = [(r"model\.embed_tokens\.weight", f"{embed_tokens}.weight")]
    if embed_positions is not None:
        rules.append((r"model\.embed_positions\.weight", f"{embed_positions}.weight"))
    for part in LAYER_PARTS:
        rules.append(
            (rf"model\.layers\.(\d+)\.{re.escape(part)}\.(weight|bias)", rf"{layers}.\1.{layer_parts[part]}.\2")
        )
    rules += [(r"model\.norm\.(weight|bias)", rf"{norm}.\1"), (r"lm_head\.weight", f"{lm_head}.weight")]
    return rules


def head_is_tied(checkpoint: Checkpoint, embed_key: str, head_key: str) -> bool:
    """True when the LM head is absent or equal to the token embedding (stored twice when tied)."""
    if head_key not in checkpoint or embed_key not in checkpoint:
        return True
    if checkpoint.shape(head_key) != checkpoint.shape(embed_key):
        return False
    return torch.equal(checkpoint.get(head_key), checkpoint.get(embed_key))


def plan_gpt(
    checkpoint: Checkpoint,
    config: MiniTFGPTConfig,
    rules: list[Rule],
    ignore: list[str],
    dtype: torch.dtype,
    hint: str = "",
) -> list[TensorPlan]:
    """Weights of MiniTFGPTForCausalLM(config) planned from the checkpoint, every name and shape checked."""
    return map_weights(checkpoint, meta_model(MiniTFGPTForCausalLM, config), rules, ignore, dtype, hint)


__all__ = ["LAYER_PARTS", "gpt_rules", "head_is_tied", "plan_gpt"]
