"""Blocks shared by every MiniTF family: positions, attention with a KV cache, feed-forward, pre-norm layers.

This file is copied beside the modeling files when a model is saved with its code, so it imports only
torch and transformers, never other parts of hf_minitf.
"""

from __future__ import annotations

import math
from typing import Callable

import torch
import torch.nn.functional as F
from torch import nn
from transformers.activations import ACT2FN
from transformers.cache_utils import Cache, EncoderDecoderCache
from transformers.modeling_layers import GradientCheckpointingLayer
from transformers.modeling_outputs import BaseModelOutputWithPast

# transformers 5.24 renamed the cache field of model outputs (and the forward argument) from
# `past_key_values` to `cache`; outputs are built with whichever name this transformers declares.
CACHE_FIELD = "cache" if "cache" in BaseModelOutputWithPast.__dataclass_fields__ else "past_key_values"


def pick_cache(cache: Cache | None, past_key_values: Cache | None) -> Cache | None:
    """Return the cache given under either name (`cache` since transformers 5.24, `past_key_values` before)."""
    if cache is not None and past_key_values is not None and cache is not past_key_values:
        raise ValueError("Pass the KV cache once, as `cache` or as `past_key_values`, not both.")
    cache = cache if cache is not None else past_key_values
    if cache is not None and not isinstance(cache, Cache):
        raise ValueError(
            f"The KV cache must be a transformers `Cache` (e.g. DynamicCache), got {type(cache).__name__}; "
            "tuple caches were removed in transformers 5."
        )
    return cache


def check_token_ids(input_ids: torch.Tensor, vocab_size: int, name: str = "input_ids") -> None:
    """Raise a ValueError naming the first id outside `[0, vocab_size)` instead of an index error inside torch."""
    if input_ids.numel() == 0:
        return
    bad = (input_ids < 0) | (input_ids >= vocab_size)
    if bad.any():
        token_id = input_ids[bad][0].item()
        raise ValueError(
            f"{name} contains token id {token_id}, outside the vocabulary (vocab_size={vocab_size}); "
            "ids must lie in [0, vocab_size). Check that the tokenizer matches this model."
        )


def check_attention_mask(attention_mask: torch.Tensor | None, batch_size: int, min_length: int) -> None:
    """Raise a ValueError when a 2D padding mask does not fit the inputs."""
    if attention_mask is None:
        return
    if attention_mask.dim() != 2 or attention_mask.shape[0] != batch_size or attention_mask.shape[1] < min_length:
        raise ValueError(
            f"attention_mask must have shape (batch_size, sequence_length) = ({batch_size}, >= {min_length}) "
            f"covering the cached and the new tokens, got {tuple(attention_mask.shape)}."
        )


def positions_from_mask(attention_mask: torch.Tensor | None, past_length: int, query_length: int,
                        batch_size: int, device: torch.device) -> torch.Tensor:
    """Position ids of the new tokens: counted over real tokens only, so left padding does not shift them."""
    if attention_mask is None:
        return torch.arange(past_length, past_length + query_length, device=device).expand(batch_size, -1)
    positions = (attention_mask.long().cumsum(-1) - 1).clamp(min=0)
    return positions[:, -query_length:].to(device)


def build_attention_mask(
    attention_mask: torch.Tensor | None,
    query_length: int,
    key_length: int,
    dtype: torch.dtype,
    device: torch.device,
    is_causal: bool,
) -> torch.Tensor | None:
    """Additive mask (batch or 1, 1, query, key) from a 2D padding mask and causality; None when nothing is masked.

    Queries are the last `query_length` of `key_length` positions. A masked score gets the dtype's lowest value,
    so a row with every key masked stays finite (uniform weights) instead of turning into NaN.
    """
    needs_causal = is_causal and query_length > 1
    has_padding = attention_mask is not None and not bool(attention_mask.all())
    if not needs_causal and not has_padding:
        return None
    allowed = torch.ones(1, 1, query_length, key_length, dtype=torch.bool, device=device)
    if needs_causal:
        query_positions = torch.arange(key_length - query_length, key_length, device=device)[:, None]
        allowed = allowed & (torch.arange(key_length, device=device)[None, :] <= query_positions)
    if has_padding:
        allowed = allowed & attention_mask[:, None, None, :].to(device=device, dtype=torch.bool)
    return torch.zeros(allowed.shape, dtype=dtype, device=device).masked_fill(~allowed, torch.finfo(dtype).min)


class SinusoidalPositionalEmbedding(nn.Module):
    """Fixed sin/cos positions ("Attention Is All You Need"): sin on even, cos on odd features.

    Computed from the position ids on every call instead of held in a buffer: nothing to go stale when
    transformers builds the model on the meta device, and only the positions in use are computed.
    """

    def __init__(self, dim: int, base: float = 10000.0) -> None:
        super().__init__()
        self.dim = dim
        self.base = base

    def forward(self, position_ids: torch.Tensor) -> torch.Tensor:
        inv_freq = torch.exp(
            torch.arange(0, self.dim, 2, device=position_ids.device).float() * (-math.log(self.base) / self.dim)
        )
        angles = position_ids.float()[..., None] * inv_freq
        table = torch.zeros(*position_ids.shape, self.dim, device=position_ids.device)
        table[..., 0::2] = torch.sin(angles)
        table[..., 1::2] = torch.cos(angles[..., : self.dim // 2])
        return table


class RotaryEmbedding(nn.Module):
    """Rotary position angles: cos/sin of `position * base^(-2i/head_dim)` in float32.

    `interleaved=True` rotates pairs `(x[2i], x[2i+1])` (complex-multiplication layout, as FrawdLLM and
    Meta's reference LLaMA); `False` rotates `(x[i], x[i + d/2])` (transformers' rotate-half layout).
    """

    def __init__(self, head_dim: int, base: float = 10000.0, interleaved: bool = True) -> None:
        super().__init__()
        self.head_dim = head_dim
        self.base = base
        self.interleaved = interleaved

    def forward(self, position_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(batch, seq) positions -> cos, sin of shape (batch, 1, seq, head_dim // 2)."""
        inv_freq = 1.0 / (
            self.base ** (torch.arange(0, self.head_dim, 2, device=position_ids.device).float() / self.head_dim)
        )
        angles = position_ids.float()[:, None, :, None] * inv_freq
        return angles.cos(), angles.sin()

    def rotate(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        """Rotate (batch, heads, seq, head_dim) queries or keys, in float32, cast back to x's dtype."""
        xf = x.float()
        if self.interleaved:
            even, odd = xf[..., 0::2], xf[..., 1::2]
            rotated = torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1).flatten(-2)
        else:
            first, second = xf.chunk(2, dim=-1)
            rotated = torch.cat((first * cos - second * sin, first * sin + second * cos), dim=-1)
        return rotated.to(x.dtype)


def eager_attention(query, key, value, attention_mask, scaling, dropout, training, mask_value=None):
    """Softmax attention written out; also returns the attention weights.

    With `mask_value`, masked scores are set to it (as `masked_fill` does) instead of having the mask added.
    """
    scores = torch.matmul(query, key.transpose(-2, -1)) * scaling
    if attention_mask is not None and mask_value is not None:
        scores = scores.masked_fill(attention_mask != 0, max(mask_value, torch.finfo(scores.dtype).min))
    elif attention_mask is not None:
        scores = scores + attention_mask
    weights = F.softmax(scores, dim=-1, dtype=torch.float32).to(query.dtype)
    weights = F.dropout(weights, p=dropout, training=training)
    return torch.matmul(weights, value), weights


def sdpa_attention(query, key, value, attention_mask, scaling, dropout, training):
    """torch's fused scaled_dot_product_attention; no weights."""
    output = F.scaled_dot_product_attention(
        query, key, value, attn_mask=attention_mask, dropout_p=dropout if training else 0.0, scale=scaling
    )
    return output, None


ATTENTION_FUNCTIONS = {"eager": eager_attention, "sdpa": sdpa_attention}


class Attention(nn.Module):
    """Multi-head attention: self or cross, eager or SDPA (`config._attn_implementation`), rotary, KV cache.

    `fused_qkv=True` projects with one `qkv_proj` laid out `[q | k | v]` (GPT style), otherwise separate
    `q_proj`, `k_proj`, `v_proj`. Cross-attention keys/values are computed once and kept in the
    cross-attention half of an `EncoderDecoderCache`.
    """

    def __init__(self, config, layer_idx: int, *, fused_qkv: bool = False, bias: bool = True,
                 is_cross_attention: bool = False) -> None:
        super().__init__()
        self.config = config
        self.layer_idx = layer_idx
        self.num_heads = config.num_attention_heads
        self.head_dim = config.hidden_size // config.num_attention_heads
        self.scaling = self.head_dim**-0.5
        self.fused_qkv = fused_qkv
        self.is_cross_attention = is_cross_attention
        hidden = config.hidden_size
        if fused_qkv:
            self.qkv_proj = nn.Linear(hidden, 3 * hidden, bias=bias)
        else:
            self.q_proj = nn.Linear(hidden, hidden, bias=bias)
            self.k_proj = nn.Linear(hidden, hidden, bias=bias)
            self.v_proj = nn.Linear(hidden, hidden, bias=bias)
        self.o_proj = nn.Linear(hidden, hidden, bias=bias)

    def _split_heads(self, x: torch.Tensor) -> torch.Tensor:
        return x.view(*x.shape[:2], self.num_heads, self.head_dim).transpose(1, 2)

    def _project_key_value(self, states: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self._split_heads(self.k_proj(states)), self._split_heads(self.v_proj(states))

    def forward(
        self,
        hidden_states: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        key_value_states: torch.Tensor | None = None,
        cache: Cache | None = None,
        rotary: tuple[RotaryEmbedding, torch.Tensor, torch.Tensor] | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        if self.fused_qkv:
            query, key, value = map(self._split_heads, self.qkv_proj(hidden_states).chunk(3, dim=-1))
        else:
            query = self._split_heads(self.q_proj(hidden_states))

        if self.is_cross_attention:
            cross_cache = cache.cross_attention_cache if isinstance(cache, EncoderDecoderCache) else None
            if cross_cache is not None and cache.is_updated.get(self.layer_idx):
                key = cross_cache.layers[self.layer_idx].keys
                value = cross_cache.layers[self.layer_idx].values
            else:
                key, value = self._project_key_value(key_value_states)
                if cross_cache is not None:
                    key, value = cross_cache.update(key, value, self.layer_idx)
                    cache.is_updated[self.layer_idx] = True
        else:
            if not self.fused_qkv:
                key, value = self._project_key_value(hidden_states)
            if rotary is not None:
                rotary_embedding, cos, sin = rotary
                query = rotary_embedding.rotate(query, cos, sin)
                key = rotary_embedding.rotate(key, cos, sin)
            if cache is not None:
                self_cache = cache.self_attention_cache if isinstance(cache, EncoderDecoderCache) else cache
                key, value = self_cache.update(key, value, self.layer_idx)

        implementation = self.config._attn_implementation or "eager"
        if implementation not in ATTENTION_FUNCTIONS:
            raise ValueError(f"attn_implementation={implementation!r} is not supported; use 'eager' or 'sdpa'.")
        mask_value = getattr(self.config, "attention_mask_value", None)
        if mask_value is not None and attention_mask is not None:
            # Scores set to a fixed value (seed 003: -1e9) differ from added -inf when scores are huge: eager only.
            output, weights = eager_attention(query, key, value, attention_mask, self.scaling,
                                              self.config.attention_dropout, self.training, mask_value=mask_value)
        else:
            output, weights = ATTENTION_FUNCTIONS[implementation](
                query, key, value, attention_mask, self.scaling, self.config.attention_dropout, self.training
            )
        output = output.transpose(1, 2).reshape(*hidden_states.shape[:2], self.num_heads * self.head_dim)
        return self.o_proj(output), weights


class FeedForward(nn.Module):
    """Position-wise MLP: fc1 -> activation -> dropout -> fc2 (the residual branch adds its own dropout)."""

    def __init__(self, hidden_size: int, intermediate_size: int, activation: str, dropout: float = 0.0) -> None:
        super().__init__()
        self.fc1 = nn.Linear(hidden_size, intermediate_size)
        self.act = ACT2FN[activation]
        self.dropout = nn.Dropout(dropout)
        self.fc2 = nn.Linear(intermediate_size, hidden_size)

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.dropout(self.act(self.fc1(hidden_states))))


def layer_norm(config) -> nn.Module:
    """The standard LayerNorm of a config's hidden size and `layer_norm_eps`."""
    return nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)


class PreNormLayer(GradientCheckpointingLayer):
    """One pre-norm transformer layer: `x + attn(norm(x))`, optionally `x + cross_attn(norm(x), memory)`,
    then `x + mlp(norm(x))`, with dropout on each residual branch.

    `make_norm(config)` builds each norm, so a family can swap LayerNorm for its own variant.
    """

    def __init__(self, config, layer_idx: int, *, fused_qkv: bool = False, has_cross_attention: bool = False,
                 make_norm: Callable = layer_norm) -> None:
        super().__init__()
        bias = getattr(config, "attention_bias", True)
        self.self_attn_layer_norm = make_norm(config)
        self.self_attn = Attention(config, layer_idx, fused_qkv=fused_qkv, bias=bias)
        if has_cross_attention:
            self.cross_attn_layer_norm = make_norm(config)
            self.cross_attn = Attention(config, layer_idx, bias=bias, is_cross_attention=True)
        self.mlp_layer_norm = make_norm(config)
        self.mlp = FeedForward(config.hidden_size, config.intermediate_size, config.hidden_act, config.hidden_dropout)
        self.dropout = nn.Dropout(config.hidden_dropout)

    def forward(
        self,
        hidden_states: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        encoder_hidden_states: torch.Tensor | None = None,
        encoder_attention_mask: torch.Tensor | None = None,
        cache: Cache | None = None,
        rotary: tuple[RotaryEmbedding, torch.Tensor, torch.Tensor] | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
        attn_output, self_weights = self.self_attn(
            self.self_attn_layer_norm(hidden_states), attention_mask, cache=cache, rotary=rotary
        )
        hidden_states = hidden_states + self.dropout(attn_output)
        cross_weights = None
        if encoder_hidden_states is not None:
            cross_output, cross_weights = self.cross_attn(
                self.cross_attn_layer_norm(hidden_states), encoder_attention_mask,
                key_value_states=encoder_hidden_states, cache=cache,
            )
            hidden_states = hidden_states + self.dropout(cross_output)
        hidden_states = hidden_states + self.dropout(self.mlp(self.mlp_layer_norm(hidden_states)))
        return hidden_states, self_weights, cross_weights


def run_layers(
    layers: nn.ModuleList,
    norm: nn.Module,
    hidden_states: torch.Tensor,
    *layer_args,
    output_hidden_states: bool = False,
    output_attentions: bool = False,
    **layer_kwargs,
) -> tuple[torch.Tensor, tuple | None, tuple | None, tuple | None]:
    """Run a stack of `PreNormLayer`s and its final norm.

    Returns the normed output plus, when asked, every layer's input and the normed output (`hidden_states`),
    and each layer's self- and cross-attention weights (None where there are none).
    """
    all_hidden_states = () if output_hidden_states else None
    self_attentions = () if output_attentions else None
    cross_attentions = () if output_attentions else None
    for layer in layers:
        if output_hidden_states:
            all_hidden_states += (hidden_states,)
        hidden_states, self_weights, cross_weights = layer(hidden_states, *layer_args, **layer_kwargs)
        if output_attentions:
            self_attentions += (self_weights,)
            cross_attentions += (cross_weights,)
    hidden_states = norm(hidden_states)
    if output_hidden_states:
        all_hidden_states += (hidden_states,)
    return hidden_states, all_hidden_states, self_attentions, cross_attentions
