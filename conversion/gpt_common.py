"""What the two GPT sources (the nanoGPT-style char GPT, FrawdLLM) share: the key map onto `MiniTFGPTForCausalLM`,
and tied-head detection."""

from __future__ import annotations

import re

import torch

from hf_minitf.conversion.base import Rule
from hf_minitf.conversion.checkpoint import Checkpoint


def gpt_rules(embed_tokens: str, embed_positions: str, qkv: str, out: str, fc1: str, fc2: str) -> list[Rule]:
    """Key map onto MiniTFGPTForCausalLM from the layout both sources share: the token and position embeddings
    (`embed_tokens`, `embed_positions`: their module names), then `blocks.N` each holding `ln1`, the attention's
    fused `qkv` and `out` projections, `ln2` and the MLP's `fc1` and `fc2` (their names inside a block), then `ln_f`
    and `lm_head`."""
    layer_parts = {
        "self_attn_layer_norm": "ln1",
        "self_attn.qkv_proj": qkv,
        "self_attn.o_proj": out,
        "mlp_layer_norm": "ln2",
        "mlp.fc1": fc1,
        "mlp.fc2": fc2,
    }
    rules: list[Rule] = [
        (r"model\.embed_tokens\.weight", f"{embed_tokens}.weight"),
        (r"model\.embed_positions\.weight", f"{embed_positions}.weight"),
    ]
    for part, original in layer_parts.items():
        rules.append((rf"model\.layers\.(\d+)\.{re.escape(part)}\.(weight|bias)", rf"blocks.\1.{original}.\2"))
    rules += [(r"model\.norm\.(weight|bias)", r"ln_f.\1"), (r"lm_head\.weight", "lm_head.weight")]
    return rules


def head_is_tied(checkpoint: Checkpoint, embed_key: str, head_key: str) -> bool:
    """True when the LM head is absent or equal to the token embedding (stored twice when tied)."""
    if head_key not in checkpoint or embed_key not in checkpoint:
        return True
    if checkpoint.shape(head_key) != checkpoint.shape(embed_key):
        return False
    return torch.equal(checkpoint.get(head_key), checkpoint.get(embed_key))


__all__ = ["gpt_rules", "head_is_tied"]
