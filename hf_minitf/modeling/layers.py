"""The nn blocks of every MiniTF family, each defined before the block that uses it: positions, the linear layer,
attention, feed-forward, norms, the pre-norm layer and the stack runner.

Every block reads its settings from the config it is given (as transformers' Llama does); only a block's role in
the model (causal, cross-attention) is a constructor argument. Attention runs through transformers'
`ALL_ATTENTION_FUNCTIONS` (eager, sdpa, flex_attention, flash attention, and the paged variants continuous batching
uses), keyed by `config._attn_implementation`; masks come from `transformers.masking_utils` in the modeling files.
This file is copied beside the modeling files when a model is saved with its code, so it imports only torch,
transformers and its sibling `compat`.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn
from transformers.activations import ACT2FN
from transformers.cache_utils import Cache, EncoderDecoderCache
from transformers.modeling_layers import GradientCheckpointingLayer
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

from .compat import PAGED_CACHE_UPDATED_BY_ATTENTION, is_paged_cache


class SinusoidalPositionalEmbedding(nn.Module):
    """Fixed sin/cos positions ("Attention Is All You Need"): sin on even, cos on odd features.

    Computed from the position ids on every call instead of held in a buffer: nothing to go stale when
    transformers builds the model on the meta device. Pass (1, length) ids when every row has the same positions:
    the table is then computed once and broadcast over the batch.
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
        table = torch.stack((angles.sin(), angles.cos()), dim=-1).flatten(-2)
        return table[..., : self.dim]


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
        """(batch, seq) positions -> cos, sin of shape (batch, seq, head_dim // 2)."""
        inv_freq = 1.0 / (
            self.base ** (torch.arange(0, self.head_dim, 2, device=position_ids.device).float() / self.head_dim)
        )
        angles = position_ids.float()[..., None] * inv_freq
        return angles.cos(), angles.sin()

    def rotate(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        """Rotate (batch, seq, ..., head_dim) queries and/or keys in float32, cast back to x's dtype."""
        shape = (*cos.shape[:2], *([1] * (x.dim() - 3)), cos.shape[-1])
        cos, sin = cos.view(shape), sin.view(shape)
        xf = x.float()
        if self.interleaved:
            even, odd = xf[..., 0::2], xf[..., 1::2]
            rotated = torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1).flatten(-2)
        else:
            first, second = xf.chunk(2, dim=-1)
            rotated = torch.cat((first * cos - second * sin, first * sin + second * cos), dim=-1)
        return rotated.to(x.dtype)


class DecodingLinear(nn.Linear):
    """`nn.Linear` that multiplies few rows (a decoding step) on CPU as a batched GEMM over blocks of output features.

    For a handful of rows, torch's CPU `F.linear` in float32 ends in a matrix-vector kernel that streams the weights
    well below the memory bandwidth; the same product split into `blocks` independent (out/blocks, in) x (in, rows)
    GEMMs over views of the row-major weight runs faster (benchmarks/speed.py measures it). Same values up to the
    rounding of a different summation order; parameters, names and saved files are those of `nn.Linear`. Other dtypes (bfloat16 already goes through
    oneDNN), devices, quantized weights and larger inputs use `F.linear`.
    """

    max_rows = 64

    def __init__(self, in_features: int, out_features: int, bias: bool = True, **kwargs) -> None:
        super().__init__(in_features, out_features, bias=bias, **kwargs)
        self.blocks = next((blocks for blocks in (4, 2) if out_features % blocks == 0), 0)

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        weight, bias, features = self.weight, self.bias, self.in_features
        rows = input.numel() // features if features else 0
        if not (
            self.blocks
            and 0 < rows <= self.max_rows
            and input.is_cpu
            and input.dtype == weight.dtype == torch.float32
            and type(weight) in (nn.Parameter, torch.Tensor)
            and weight.is_contiguous()
            and input.is_contiguous()
        ):
            return F.linear(input, weight, bias)
        blocks, block_size = self.blocks, self.out_features // self.blocks
        # The rows as a column-major (in, rows) matrix, the same for every block; strides spelled out so that
        # torch.compile keeps them where the size-1 dimension of a single row would let it pick others.
        columns = input.as_strided((blocks, features, rows), (0, 1, features))
        weight_blocks = weight.view(blocks, block_size, features)
        if bias is None:
            output = torch.bmm(weight_blocks, columns)
        else:
            output = torch.baddbmm(bias.view(blocks, block_size, 1), weight_blocks, columns)
        if rows > 1:  # (out, rows) -> (rows, out)
            output = output.view(self.out_features, rows).t().contiguous()
        return output.view(*input.shape[:-1], self.out_features)


def eager_attention_forward(
    module: nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    scaling: float,
    dropout: float = 0.0,
    **kwargs,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Softmax attention written out, with the signature of transformers' attention functions.

    `attention_mask` is additive (0 or the dtype's lowest value) or boolean (True = attend). Returns the output as
    (batch, seq, heads, head_dim) and the attention weights (softmax in float32).

    A module with a `fixed_mask_value` (hkproj's -1e9) SETS masked scores to it, as `masked_fill(mask == 0, -1e9)`
    in hkproj's pytorch-transformer, instead of adding the mask. The two differ when scores are huge (an untrained
    hkproj model reaches ~1e12): only setting reproduces the original there.
    """
    scores = torch.matmul(query, key.transpose(2, 3)) * scaling
    fixed_mask_value = getattr(module, "fixed_mask_value", None)
    if attention_mask is not None:
        if attention_mask.dtype == torch.bool or fixed_mask_value is not None:
            masked = ~attention_mask if attention_mask.dtype == torch.bool else attention_mask < 0
            fill = torch.finfo(scores.dtype).min
            scores = scores.masked_fill(masked, fill if fixed_mask_value is None else max(fixed_mask_value, fill))
        else:
            scores = scores + attention_mask
    weights = F.softmax(scores, dim=-1, dtype=torch.float32).to(value.dtype)
    weights = F.dropout(weights, p=dropout, training=module.training)
    return torch.matmul(weights, value).transpose(1, 2).contiguous(), weights


class Attention(nn.Module):
    """Multi-head attention, self or cross, through `ALL_ATTENTION_FUNCTIONS[config._attn_implementation]`.

    From the config: `fused_qkv` projects with one `qkv_proj` laid out `[q | k | v]` (GPT style), otherwise separate
    `q_proj`, `k_proj`, `v_proj` (self-attention only: cross-attention projects queries and keys/values apart);
    `attention_bias` gives the projections biases; `attention_mask_value` (hkproj's -1e9) selects
    eager attention (`eager_attention_forward`) whatever the configured implementation. Self-attention keys/values go
    through the cache (dynamic, static or paged); cross-attention ones are computed once and kept in the
    cross-attention half of an `EncoderDecoderCache`.
    """

    def __init__(self, config, layer_idx: int, *, is_causal: bool = False, is_cross_attention: bool = False) -> None:
        super().__init__()
        self.config = config
        self.layer_idx = layer_idx
        self.num_heads = config.num_attention_heads
        self.head_dim = config.hidden_size // config.num_attention_heads
        self.num_key_value_groups = 1
        self.scaling = self.head_dim**-0.5
        self.attention_dropout = config.attention_dropout
        self.is_causal = is_causal and not is_cross_attention
        self.is_cross_attention = is_cross_attention
        self.fused_qkv = config.fused_qkv and not is_cross_attention
        self.fixed_mask_value = config.attention_mask_value
        hidden, bias = config.hidden_size, config.attention_bias
        if self.fused_qkv:
            self.qkv_proj = DecodingLinear(hidden, 3 * hidden, bias=bias)
        else:
            self.q_proj = DecodingLinear(hidden, hidden, bias=bias)
            self.k_proj = DecodingLinear(hidden, hidden, bias=bias)
            self.v_proj = DecodingLinear(hidden, hidden, bias=bias)
        self.o_proj = DecodingLinear(hidden, hidden, bias=bias)

    def _heads(self, states: torch.Tensor) -> torch.Tensor:
        """(batch, seq, hidden) -> (batch, heads, seq, head_dim)."""
        return states.view(*states.shape[:-1], self.num_heads, self.head_dim).transpose(1, 2)

    def _self_attention_states(self, hidden_states, rotary) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        if not self.fused_qkv:
            return (
                self._heads(self.q_proj(hidden_states)),
                self._heads(self.k_proj(hidden_states)),
                self._heads(self.v_proj(hidden_states)),
            )
        qkv = self.qkv_proj(hidden_states).view(*hidden_states.shape[:-1], 3, self.num_heads, self.head_dim)
        value = qkv[:, :, 2].transpose(1, 2)
        query_key = qkv[:, :, :2]
        if rotary is not None:
            rotary_embedding, cos, sin = rotary
            query_key = rotary_embedding.rotate(query_key, cos, sin)
        return query_key[:, :, 0].transpose(1, 2), query_key[:, :, 1].transpose(1, 2), value

    def _cross_attention_states(self, key_value_states, cache) -> tuple[torch.Tensor, torch.Tensor]:
        cross_cache = cache.cross_attention_cache if isinstance(cache, EncoderDecoderCache) else None
        if cross_cache is not None and cache.is_updated.get(self.layer_idx):
            return cross_cache.layers[self.layer_idx].keys, cross_cache.layers[self.layer_idx].values  # type: ignore[union-attr,return-value]  # an updated cross-attention layer holds tensors
        key, value = self._heads(self.k_proj(key_value_states)), self._heads(self.v_proj(key_value_states))
        if cross_cache is not None:
            key, value = cross_cache.update(key, value, self.layer_idx)
            cache.is_updated[self.layer_idx] = True
        return key, value

    def forward(
        self,
        hidden_states: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        key_value_states: torch.Tensor | None = None,
        cache: Cache | None = None,
        rotary: tuple[RotaryEmbedding, torch.Tensor, torch.Tensor] | None = None,
        **kwargs,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        if self.is_cross_attention:
            query = self._heads(self.q_proj(hidden_states))
            key, value = self._cross_attention_states(key_value_states, cache)
        else:
            query, key, value = self._self_attention_states(hidden_states, rotary)
            if cache is not None:
                self_cache = cache.self_attention_cache if isinstance(cache, EncoderDecoderCache) else cache
                if PAGED_CACHE_UPDATED_BY_ATTENTION and is_paged_cache(self_cache):
                    kwargs["cache"] = self_cache
                else:
                    key, value = self_cache.update(key, value, self.layer_idx, kwargs=kwargs)

        # A fixed mask value exists only in eager attention; an empty batch too (fused kernels cannot reshape
        # zero-size outputs).
        if self.fixed_mask_value is not None or query.numel() == 0:
            attention_function: Callable = eager_attention_forward
        else:
            attention_function = ALL_ATTENTION_FUNCTIONS.get_interface(
                self.config._attn_implementation, eager_attention_forward
            )
        output, weights = attention_function(
            self,
            query,
            key,
            value,
            attention_mask,
            dropout=self.attention_dropout if self.training else 0.0,
            scaling=self.scaling,
            **kwargs,
        )
        output = output.reshape(*hidden_states.shape[:-1], self.num_heads * self.head_dim).contiguous()
        return self.o_proj(output), weights


class FeedForward(nn.Module):
    """Position-wise MLP: fc1 -> `hidden_act` -> dropout -> fc2 (the residual branch adds its own dropout)."""

    def __init__(self, config) -> None:
        super().__init__()
        self.fc1 = DecodingLinear(config.hidden_size, config.intermediate_size)
        self.act = ACT2FN[config.hidden_act]
        self.dropout = nn.Dropout(config.hidden_dropout)
        self.fc2 = DecodingLinear(config.intermediate_size, config.hidden_size)

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        hidden_states = self.act(self.fc1(hidden_states))
        return self.fc2(self.dropout(hidden_states) if self.training else hidden_states)


class HkprojLayerNorm(nn.Module):
    """hkproj's original norm and its later fixes: `weight * (x - mean) / (std * eps or std + eps) + bias`.

    The std is the unbiased one (as `Tensor.std`); `weight` and `bias` hold one value each (`per_feature=False`,
    the original) or one per feature. With `eps_multiplies_std=True` (the original's bug) the output is about 1/eps
    times larger than a normalized one unless the weight is small; converted checkpoints depend on it.
    """

    def __init__(self, hidden_size: int, eps: float, per_feature: bool, eps_multiplies_std: bool) -> None:
        super().__init__()
        size = hidden_size if per_feature else 1
        self.weight = nn.Parameter(torch.ones(size))
        self.bias = nn.Parameter(torch.zeros(size))
        self.eps = eps
        self.eps_multiplies_std = eps_multiplies_std

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        mean = hidden_states.mean(dim=-1, keepdim=True)
        std = hidden_states.std(dim=-1, keepdim=True)
        scale = std * self.eps if self.eps_multiplies_std else std + self.eps
        return self.weight * (hidden_states - mean) / scale + self.bias

    def extra_repr(self) -> str:
        eps = f"std * {self.eps}" if self.eps_multiplies_std else f"std + {self.eps}"
        return f"features={self.weight.numel()}, denominator={eps}"


def make_norm(config) -> nn.Module:
    """The norm `config.norm_type` names (see configuration_minitf_seq2seq.NORM_TYPES), of `layer_norm_eps`."""
    if config.norm_type == "layer_norm":
        return nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
    return HkprojLayerNorm(
        config.hidden_size,
        config.layer_norm_eps,
        per_feature=config.norm_type == "per_feature_std_plus_eps",
        eps_multiplies_std=config.norm_type == "scalar_std_times_eps",
    )


class PreNormLayer(GradientCheckpointingLayer):
    """One pre-norm transformer layer: `x + attn(norm(x))`, optionally `x + cross_attn(norm(x), memory)`,
    then `x + mlp(norm(x))`, with dropout on each residual branch.

    Each norm is the one `config.norm_type` names (`make_norm`); `is_causal` marks decoder self-attention and
    `has_cross_attention` a decoder layer of an encoder-decoder.
    """

    def __init__(self, config, layer_idx: int, *, is_causal: bool = False, has_cross_attention: bool = False) -> None:
        super().__init__()
        self.self_attn_layer_norm = make_norm(config)
        self.self_attn = Attention(config, layer_idx, is_causal=is_causal)
        if has_cross_attention:
            self.cross_attn_layer_norm = make_norm(config)
            self.cross_attn = Attention(config, layer_idx, is_cross_attention=True)
        self.mlp_layer_norm = make_norm(config)
        self.mlp = FeedForward(config)
        self.dropout = nn.Dropout(config.hidden_dropout)

    def forward(
        self,
        hidden_states: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        encoder_hidden_states: torch.Tensor | None = None,
        encoder_attention_mask: torch.Tensor | None = None,
        cache: Cache | None = None,
        rotary: tuple[RotaryEmbedding, torch.Tensor, torch.Tensor] | None = None,
        **kwargs,
    ) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
        attn_output, self_weights = self.self_attn(
            self.self_attn_layer_norm(hidden_states), attention_mask, cache=cache, rotary=rotary, **kwargs
        )
        hidden_states = self._add_residual(hidden_states, attn_output)
        cross_weights = None
        if encoder_hidden_states is not None:
            cross_output, cross_weights = self.cross_attn(
                self.cross_attn_layer_norm(hidden_states),
                encoder_attention_mask,
                key_value_states=encoder_hidden_states,
                cache=cache,
            )
            hidden_states = self._add_residual(hidden_states, cross_output)
        hidden_states = self._add_residual(hidden_states, self.mlp(self.mlp_layer_norm(hidden_states)))
        return hidden_states, self_weights, cross_weights

    def _add_residual(self, hidden_states: torch.Tensor, branch: torch.Tensor) -> torch.Tensor:
        """`hidden_states + dropout(branch)`; dropout is not called at all in eval mode, where it is the identity
        (a decoding step would pay for a dozen calls that do nothing)."""
        return hidden_states + (self.dropout(branch) if self.training else branch)


def run_layers(
    layers: nn.ModuleList,
    norm: nn.Module,
    hidden_states: torch.Tensor,
    *layer_args,
    output_hidden_states: bool | None = False,
    output_attentions: bool | None = False,
    **layer_kwargs,
) -> tuple[torch.Tensor, tuple | None, tuple | None, tuple | None]:
    """Run a stack of `PreNormLayer`s and its final norm.

    Returns the normed output plus, when asked, every layer's input and the normed output (`hidden_states`),
    and each layer's self- and cross-attention weights (None where there are none).
    """
    all_hidden_states: tuple | None = () if output_hidden_states else None
    self_attentions: tuple | None = () if output_attentions else None
    cross_attentions: tuple | None = () if output_attentions else None
    for layer in layers:
        if all_hidden_states is not None:
            all_hidden_states += (hidden_states,)
        hidden_states, self_weights, cross_weights = layer(hidden_states, *layer_args, **layer_kwargs)
        if self_attentions is not None and cross_attentions is not None:
            self_attentions += (self_weights,)
            cross_attentions += (cross_weights,)
    hidden_states = norm(hidden_states)
    if all_hidden_states is not None:
        all_hidden_states += (hidden_states,)
    return hidden_states, all_hidden_states, self_attentions, cross_attentions
