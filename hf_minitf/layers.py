"""Blocks shared by every MiniTF family: input checks, positions, attention, feed-forward, pre-norm layers.

Attention runs through transformers' `ALL_ATTENTION_FUNCTIONS` (eager, sdpa, flex_attention, flash attention, and
the paged variants continuous batching uses), keyed by `config._attn_implementation`, as transformers' own Llama
does; masks come from `transformers.masking_utils` in the modeling files. This file is copied beside the modeling
files when a model is saved with its code, so it imports only torch and transformers, never other parts of
hf_minitf.
"""

from __future__ import annotations

import inspect
import math
from typing import Callable

import torch
import torch.nn.functional as F
from torch import nn
from transformers.activations import ACT2FN
from transformers.cache_utils import Cache, EncoderDecoderCache
from transformers.modeling_layers import GradientCheckpointingLayer
from transformers.modeling_outputs import BaseModelOutputWithPast
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

try:
    from transformers.generation.continuous_batching.cache import PagedAttentionCache
except ImportError:  # pragma: no cover - every supported transformers has it
    PagedAttentionCache = None

# transformers 5.24 renamed the cache field of model outputs (and the forward argument) from
# `past_key_values` to `cache`; outputs are built with whichever name this transformers declares.
CACHE_FIELD = "cache" if "cache" in BaseModelOutputWithPast.__dataclass_fields__ else "past_key_values"

# Before transformers ~5.22 the paged attention functions wrote the paged cache themselves (given as
# `kwargs["cache"]`); later ones expect the layer to call `cache.update(..., kwargs=...)` like for any cache.
PAGED_CACHE_UPDATED_BY_ATTENTION = (
    PagedAttentionCache is not None and "kwargs" not in inspect.signature(PagedAttentionCache.update).parameters
)


def is_paged_cache(cache: Cache | None) -> bool:
    """Whether `cache` is continuous batching's paged cache (its requests are packed in one row)."""
    return PagedAttentionCache is not None and isinstance(cache, PagedAttentionCache)


def pick_cache(cache: Cache | None, past_key_values: Cache | None) -> Cache | None:
    """Return the cache given under either name (`cache` since transformers 5.24, `past_key_values` before)."""
    if cache is not None and past_key_values is not None and cache is not past_key_values:
        raise ValueError("Pass the KV cache once, as `cache` or as `past_key_values`, not both.")
    cache = cache if cache is not None else past_key_values
    if cache is not None and not isinstance(cache, Cache) and not is_paged_cache(cache):
        raise ValueError(
            f"The KV cache must be a transformers `Cache` (e.g. DynamicCache), got {type(cache).__name__}; "
            "tuple caches were removed in transformers 5."
        )
    return cache


def cached_length(cache: Cache | None) -> int:
    """Tokens already in the cache (0 without one, and for the paged cache, whose requests carry positions)."""
    if cache is None or is_paged_cache(cache):
        return 0
    return cache.get_seq_length()


def checks_enabled() -> bool:
    """Input checks read tensor values (a host sync, a graph break): skip them inside a compiled graph."""
    return not torch.compiler.is_compiling()


def check_token_ids(input_ids: torch.Tensor, vocab_size: int, name: str = "input_ids") -> None:
    """Raise a ValueError naming the first id outside `[0, vocab_size)` instead of an index error inside torch."""
    if input_ids.numel() == 0 or not checks_enabled():
        return
    bad = (input_ids < 0) | (input_ids >= vocab_size)
    if bad.any():
        token_id = input_ids[bad][0].item()
        raise ValueError(
            f"{name} contains token id {token_id}, outside the vocabulary (vocab_size={vocab_size}); "
            "ids must lie in [0, vocab_size). Check that the tokenizer matches this model."
        )


def check_input_ids(input_ids: torch.Tensor, vocab_size: int, name: str = "input_ids") -> None:
    """Token ids must be a (batch, length) integer tensor of ids inside the vocabulary."""
    check_ids_tensor(input_ids, name)
    check_token_ids(input_ids, vocab_size, name)


def check_ids_tensor(input_ids: torch.Tensor, name: str = "input_ids") -> None:
    """Token ids must be a (batch, length) tensor of integers (their values are checked against a vocabulary apart)."""
    if not isinstance(input_ids, torch.Tensor):
        raise ValueError(f"{name} must be a torch tensor of token ids, got {type(input_ids).__name__}; "
                         "call the tokenizer with return_tensors='pt'.")
    if input_ids.dim() != 2:
        raise ValueError(
            f"{name} must have shape (batch_size, sequence_length), got {tuple(input_ids.shape)}; "
            f"for one text, add a batch dimension ({name}[None])."
        )
    if input_ids.is_floating_point() or input_ids.is_complex() or input_ids.dtype == torch.bool:
        raise ValueError(
            f"{name} must hold integer token ids (torch.long), got dtype {input_ids.dtype}; "
            "pass the ids the tokenizer returned, not embeddings or scores."
        )


def check_inputs_embeds(inputs_embeds: torch.Tensor, hidden_size: int, name: str = "inputs_embeds") -> None:
    """Embeddings given instead of ids must be (batch, length, hidden_size) floats."""
    if inputs_embeds.dim() != 3 or inputs_embeds.shape[-1] != hidden_size:
        raise ValueError(
            f"{name} must have shape (batch_size, sequence_length, hidden_size={hidden_size}), "
            f"got {tuple(inputs_embeds.shape)}."
        )
    if not inputs_embeds.is_floating_point():
        raise ValueError(f"{name} must be floating point, got dtype {inputs_embeds.dtype}; pass token ids as "
                         "input_ids instead.")


def check_attention_mask(attention_mask: torch.Tensor | None, batch_size: int, length: int,
                         name: str = "attention_mask") -> None:
    """A 2D padding mask must be (batch, length) exactly; 4D masks (built by transformers) pass through."""
    if attention_mask is None or isinstance(attention_mask, dict) or not checks_enabled():
        return
    if attention_mask.dim() == 4:
        return
    if attention_mask.dim() != 2 or tuple(attention_mask.shape) != (batch_size, length):
        raise ValueError(
            f"{name} must have the shape (batch_size, sequence_length) = ({batch_size}, {length}), covering the "
            f"cached and the new tokens, got {tuple(attention_mask.shape)}; pass the mask the tokenizer returned "
            "with these ids."
        )


def check_position_ids(position_ids: torch.Tensor, limit: int | None, what: str) -> None:
    """Position ids must be non-negative and, for a learned table of `limit` rows, below `limit`."""
    if position_ids.numel() == 0 or not checks_enabled():
        return
    lowest, highest = int(position_ids.min()), int(position_ids.max())
    if lowest < 0:
        raise ValueError(f"position_ids must be >= 0, got {lowest}.")
    if limit is not None and highest >= limit:
        raise ValueError(
            f"Position {highest} is past this model's max_position_embeddings={limit} ({what}): prompt plus "
            f"generated tokens must fit in {limit} tokens. Shorten the input or lower max_new_tokens."
        )


def remember_forward_signature(model_class: type) -> type:
    """Class decorator: store the signature of `model_class.forward` on it.

    transformers asks for `inspect.signature(model.forward)` on every generation step of a model registered with an
    auto class (a check for remote code that still expects `cache_position`): about 0.1 ms a step, 4% of a compiled
    decoding step at nanoGPT char dims. `inspect` returns a stored `__signature__` at once, and it is the same one.
    """
    model_class.forward.__signature__ = inspect.signature(model_class.forward)
    return model_class


def positions_from_mask(attention_mask: torch.Tensor | None, past_length: int, query_length: int,
                        device: torch.device) -> torch.Tensor:
    """Position ids of the new tokens: counted over real tokens only, so left padding does not shift them.

    Without a 2D mask, positions are `past_length, past_length + 1, ...` for every row, as one (1, length) row.
    """
    if attention_mask is None or isinstance(attention_mask, dict) or attention_mask.dim() != 2:
        return torch.arange(past_length, past_length + query_length, device=device)[None]
    positions = (attention_mask.long().cumsum(-1) - 1).clamp(min=0)
    return positions[:, -query_length:].to(device)


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


def softmax_attention(module: nn.Module, scores: torch.Tensor, value: torch.Tensor,
                      dropout: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Softmax (in float32) of masked scores, dropout, weighted values as (batch, seq, heads, head_dim)."""
    weights = F.softmax(scores, dim=-1, dtype=torch.float32).to(value.dtype)
    weights = F.dropout(weights, p=dropout, training=module.training)
    return torch.matmul(weights, value).transpose(1, 2).contiguous(), weights


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
    (batch, seq, heads, head_dim) and the attention weights.
    """
    scores = torch.matmul(query, key.transpose(2, 3)) * scaling
    if attention_mask is not None:
        if attention_mask.dtype == torch.bool:
            scores = scores.masked_fill(~attention_mask, torch.finfo(scores.dtype).min)
        else:
            scores = scores + attention_mask
    return softmax_attention(module, scores, value, dropout)


def fixed_mask_eager_attention_forward(
    module: nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    scaling: float,
    dropout: float = 0.0,
    **kwargs,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Eager attention that SETS masked scores to `module.fixed_mask_value` (as `masked_fill(mask == 0, -1e9)` in
    hkproj's pytorch-transformer) instead of adding the mask.

    The two differ when scores are huge (an untrained hkproj model reaches ~1e12): only this reproduces the
    original there.
    """
    scores = torch.matmul(query, key.transpose(2, 3)) * scaling
    if attention_mask is not None:
        masked = ~attention_mask if attention_mask.dtype == torch.bool else attention_mask < 0
        scores = scores.masked_fill(masked, max(module.fixed_mask_value, torch.finfo(scores.dtype).min))
    return softmax_attention(module, scores, value, dropout)


class Attention(nn.Module):
    """Multi-head attention, self or cross, through `ALL_ATTENTION_FUNCTIONS[config._attn_implementation]`.

    `fused_qkv=True` projects with one `qkv_proj` laid out `[q | k | v]` (GPT style), otherwise separate
    `q_proj`, `k_proj`, `v_proj`. Self-attention keys/values go through the cache (dynamic, static or paged);
    cross-attention ones are computed once and kept in the cross-attention half of an `EncoderDecoderCache`.
    `fixed_mask_value` selects `fixed_mask_eager_attention_forward` whatever the configured implementation.
    """

    def __init__(self, config, layer_idx: int, *, fused_qkv: bool = False, bias: bool = True, is_causal: bool = False,
                 is_cross_attention: bool = False, fixed_mask_value: float | None = None) -> None:
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
        self.fused_qkv = fused_qkv
        self.fixed_mask_value = fixed_mask_value
        hidden = config.hidden_size
        if fused_qkv:
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
            return self._heads(self.q_proj(hidden_states)), self._heads(self.k_proj(hidden_states)), \
                self._heads(self.v_proj(hidden_states))
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
            return cross_cache.layers[self.layer_idx].keys, cross_cache.layers[self.layer_idx].values
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

        if self.fixed_mask_value is not None:
            attention_function: Callable = fixed_mask_eager_attention_forward
        elif query.numel() == 0:  # an empty batch: fused kernels cannot reshape zero-size outputs
            attention_function = eager_attention_forward
        else:
            attention_function = ALL_ATTENTION_FUNCTIONS.get_interface(
                self.config._attn_implementation, eager_attention_forward
            )
        output, weights = attention_function(
            self, query, key, value, attention_mask,
            dropout=self.attention_dropout if self.training else 0.0, scaling=self.scaling, **kwargs,
        )
        output = output.reshape(*hidden_states.shape[:-1], self.num_heads * self.head_dim).contiguous()
        return self.o_proj(output), weights


class DecodingLinear(nn.Linear):
    """`nn.Linear` that multiplies few rows (a decoding step) on CPU as a batched GEMM over blocks of output features.

    For a handful of rows, torch's CPU `F.linear` in float32 ends in a matrix-vector kernel that streams the weights
    at a third of the memory bandwidth; the same product split into `blocks` independent (out/blocks, in) x (in,
    rows) GEMMs over views of the row-major weight runs faster: per layer of nanoGPT char dims 651 -> 190 us at one
    row, 1025 -> 642 us at 8, about 10% less at 32 to 128. Same values up to the rounding of a different summation
    order; parameters, names and saved files are those of `nn.Linear`. Other dtypes (bfloat16 already goes through
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
            self.blocks and 0 < rows <= self.max_rows and input.is_cpu and input.dtype == weight.dtype == torch.float32
            and type(weight) in (nn.Parameter, torch.Tensor) and weight.is_contiguous() and input.is_contiguous()
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


class FeedForward(nn.Module):
    """Position-wise MLP: fc1 -> activation -> dropout -> fc2 (the residual branch adds its own dropout)."""

    def __init__(self, hidden_size: int, intermediate_size: int, activation: str, dropout: float = 0.0) -> None:
        super().__init__()
        self.fc1 = DecodingLinear(hidden_size, intermediate_size)
        self.act = ACT2FN[activation]
        self.dropout = nn.Dropout(dropout)
        self.fc2 = DecodingLinear(intermediate_size, hidden_size)

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        hidden_states = self.act(self.fc1(hidden_states))
        return self.fc2(self.dropout(hidden_states) if self.training else hidden_states)


def layer_norm(config) -> nn.Module:
    """The standard LayerNorm of a config's hidden size and `layer_norm_eps`."""
    return nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)


class PreNormLayer(GradientCheckpointingLayer):
    """One pre-norm transformer layer: `x + attn(norm(x))`, optionally `x + cross_attn(norm(x), memory)`,
    then `x + mlp(norm(x))`, with dropout on each residual branch.

    `make_norm(config)` builds each norm, so a family can swap LayerNorm for its own variant; `is_causal` marks
    decoder self-attention; `fixed_mask_value` is hkproj's set-to-a-value masking (see
    `fixed_mask_eager_attention_forward`).
    """

    def __init__(self, config, layer_idx: int, *, fused_qkv: bool = False, is_causal: bool = False,
                 has_cross_attention: bool = False, make_norm: Callable = layer_norm, attention_bias: bool = True,
                 fixed_mask_value: float | None = None) -> None:
        super().__init__()
        self.self_attn_layer_norm = make_norm(config)
        self.self_attn = Attention(config, layer_idx, fused_qkv=fused_qkv, bias=attention_bias, is_causal=is_causal,
                                   fixed_mask_value=fixed_mask_value)
        if has_cross_attention:
            self.cross_attn_layer_norm = make_norm(config)
            self.cross_attn = Attention(config, layer_idx, bias=attention_bias, is_cross_attention=True,
                                        fixed_mask_value=fixed_mask_value)
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
        **kwargs,
    ) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
        attn_output, self_weights = self.self_attn(
            self.self_attn_layer_norm(hidden_states), attention_mask, cache=cache, rotary=rotary, **kwargs
        )
        hidden_states = self._add_residual(hidden_states, attn_output)
        cross_weights = None
        if encoder_hidden_states is not None:
            cross_output, cross_weights = self.cross_attn(
                self.cross_attn_layer_norm(hidden_states), encoder_attention_mask,
                key_value_states=encoder_hidden_states, cache=cache,
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
