"""What every MiniTF family's model shares, each part defined before the part that uses it: the cache plumbing across
transformers versions, the checks of input shapes, the nn blocks (positions, the linear layer, attention,
feed-forward, norms, the pre-norm layer and the stack runner), the base model class, and `generate(stop_strings=)`
for any vocabulary.

Every block reads its settings from the config it is given (as transformers' Llama does); only a block's role in
the model (causal, cross-attention) is a constructor argument. Attention runs through transformers'
`ALL_ATTENTION_FUNCTIONS` (eager, sdpa, flex_attention, flash attention, and the paged variants continuous batching
uses), keyed by `config._attn_implementation`; masks come from `transformers.masking_utils` in the modeling files.
Nothing here reads a tensor's value on the way through (a host sync on every decoding step).
This file is copied beside the modeling files when a model is saved with its code, so it imports only torch and
transformers.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from typing import Any, cast

import torch
import torch.nn.functional as F
from torch import nn
from transformers import (
    GenerationMixin,
    LogitsProcessor,
    LogitsProcessorList,
    PreTrainedModel,
    StoppingCriteria,
    StoppingCriteriaList,
)
from transformers.activations import ACT2FN
from transformers.cache_utils import Cache, EncoderDecoderCache
from transformers.modeling_layers import GradientCheckpointingLayer
from transformers.modeling_outputs import BaseModelOutputWithPast
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
from transformers.utils import ModelOutput, logging

try:
    from transformers.generation.continuous_batching.cache import PagedAttentionCache
except ImportError:  # pragma: no cover - every supported transformers has it
    PagedAttentionCache = None  # type: ignore[assignment,misc]

logger = logging.get_logger(__name__)

# --- the cache across transformers versions (5.17 to 5.25) ---------------------------------------------------------

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


def remember_forward_signature(model_class: type) -> type:
    """Class decorator: store the signature of `model_class.forward` on it.

    transformers asks for `inspect.signature(model.forward)` on every generation step of a model registered with an
    auto class (a check for remote code that still expects `cache_position`). `inspect` returns a stored
    `__signature__` at once, and it is the same one.
    """
    model_class.forward.__signature__ = inspect.signature(model_class.forward)  # type: ignore[attr-defined]  # functions take attributes
    return model_class


# --- inputs: shapes checked here, ids and positions refused by the lookup that fails on them ----------------------


def check_ids_tensor(input_ids: torch.Tensor, name: str = "input_ids") -> None:
    """Token ids must be a (batch, length) tensor of integers (their values are checked against a vocabulary apart)."""
    if not isinstance(input_ids, torch.Tensor):
        raise ValueError(
            f"{name} must be a torch tensor of token ids, got {type(input_ids).__name__}; "
            "call the tokenizer with return_tensors='pt'."
        )
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


def lookup(table: nn.Embedding, ids: torch.Tensor, refusal: Callable[[int], str]) -> torch.Tensor:
    """`table(ids)`; an id outside the table is a ValueError, `refusal(first such id)`, instead of torch's
    IndexError. The ids are read only then: torch's CPU lookup checks them itself, so the way through syncs nothing
    (on an accelerator an id outside the table is a device-side assert: hf_minitf checks ids before it runs a model
    there)."""
    try:
        return table(ids)
    except IndexError:
        raise ValueError(refusal(first_outside(ids, table.num_embeddings))) from None


def first_outside(ids: torch.Tensor, size: int) -> int:
    """The first value of `ids` outside `[0, size)` (an error path: it reads the values)."""
    return int(ids[(ids < 0) | (ids >= size)][0])


def token_refusal(vocab_size: int, name: str = "input_ids") -> Callable[[int], str]:
    """The error for a token id outside the vocabulary."""
    return lambda token_id: (
        f"{name} contains token id {token_id}, outside the vocabulary (vocab_size={vocab_size}); "
        "ids must lie in [0, vocab_size). Check that the tokenizer matches this model."
    )


def position_refusal(limit: int, what: str) -> Callable[[int], str]:
    """The error for a position outside a learned table of `limit` rows."""
    return lambda position: (
        f"position_ids must be >= 0, got {position}."
        if position < 0
        else f"Position {position} is past this model's max_position_embeddings={limit} ({what}): prompt plus "
        f"generated tokens must fit in {limit} tokens. Shorten the input or lower max_new_tokens."
    )


def labels_loss(loss: Callable[[], torch.Tensor], labels: torch.Tensor, vocab_size: int, name: str) -> torch.Tensor:
    """`loss()`; a label outside the vocabulary (torch's IndexError) is a ValueError naming it."""
    try:
        return loss()
    except IndexError:
        labels = labels[labels != -100]
        raise ValueError(token_refusal(vocab_size, name)(first_outside(labels, vocab_size))) from None


def check_inputs_embeds(inputs_embeds: torch.Tensor, hidden_size: int, name: str = "inputs_embeds") -> None:
    """Embeddings given instead of ids must be (batch, length, hidden_size) floats."""
    if inputs_embeds.dim() != 3 or inputs_embeds.shape[-1] != hidden_size:
        raise ValueError(
            f"{name} must have shape (batch_size, sequence_length, hidden_size={hidden_size}), "
            f"got {tuple(inputs_embeds.shape)}."
        )
    if not inputs_embeds.is_floating_point():
        raise ValueError(
            f"{name} must be floating point, got dtype {inputs_embeds.dtype}; pass token ids as input_ids instead."
        )


def check_ids_or_embeds(
    input_ids: torch.Tensor | None, inputs_embeds: torch.Tensor | None, hidden_size: int, side: str | None = None
) -> None:
    """Exactly one of ids or embeddings (of the `side`, source or target, where a model has two), embeddings of the
    right shape (ids are checked against their vocabulary apart)."""
    if (input_ids is None) == (inputs_embeds is None):
        of = f"the {side} " if side else ""
        raise ValueError(f"Pass exactly one of {of}input_ids or inputs_embeds.")
    if inputs_embeds is not None:
        check_inputs_embeds(inputs_embeds, hidden_size)


def check_attention_mask(
    attention_mask: torch.Tensor | None, batch_size: int, length: int, name: str = "attention_mask"
) -> None:
    """A 2D padding mask must be (batch, length) exactly; 4D masks (built by transformers) pass through."""
    if attention_mask is None or isinstance(attention_mask, dict):
        return
    if attention_mask.dim() == 4:
        return
    if attention_mask.dim() != 2 or tuple(attention_mask.shape) != (batch_size, length):
        raise ValueError(
            f"{name} must have the shape (batch_size, sequence_length) = ({batch_size}, {length}), covering the "
            f"cached and the new tokens, got {tuple(attention_mask.shape)}; pass the mask the tokenizer returned "
            "with these ids."
        )


# --- the blocks ---------------------------------------------------------------------------------------------------


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
        if rotary is None:  # one unbind, whose backward stacks the gradients (a select's fills a zero tensor)
            query, key, value = qkv.unbind(2)
        else:
            rotary_embedding, cos, sin = rotary
            query, key = rotary_embedding.rotate(qkv[:, :, :2], cos, sin).unbind(2)
            value = qkv[:, :, 2]
        return query.transpose(1, 2), key.transpose(1, 2), value.transpose(1, 2)

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
    """Position-wise MLP: fc1 -> `hidden_act` -> fc2, with dropout before fc2 where `config.feed_forward_dropout`
    (MiniEmbed's and hkproj's MLPs; the nanoGPT-style GPT has none there). The residual branch adds its own dropout.
    """

    def __init__(self, config) -> None:
        super().__init__()
        self.fc1 = DecodingLinear(config.hidden_size, config.intermediate_size)
        self.act = ACT2FN[config.hidden_act]
        self.dropout = nn.Dropout(config.hidden_dropout if config.feed_forward_dropout else 0.0)
        self.fc2 = DecodingLinear(config.intermediate_size, config.hidden_size)

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        hidden_states = self.act(self.fc1(hidden_states))
        return self.fc2(self.dropout(hidden_states) if self.training and self.dropout.p else hidden_states)


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
    """The norm `config.norm_type` names (see MiniTFSeq2SeqConfig), of `layer_norm_eps`."""
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


# --- the model class and generation --------------------------------------------------------------------------------


def carried_outputs(outputs: ModelOutput, *replaced: str) -> dict[str, Any]:
    """The fields of a base model's output that a head model returns as they are: all but `replaced` (the head
    computes those from them), keyed by name, for the head's output class."""
    return {name: value for name, value in outputs.items() if name not in replaced}


class MiniTFPreTrainedModel(PreTrainedModel):
    """Base of the MiniTF model classes: what transformers asks of a model class (attention backends, gradient
    checkpointing, compilation), and hkproj's fixed-mask attention in eager mode.

    A family's `*PreTrainedModel` only names its `config_class`.
    """

    base_model_prefix = "model"
    supports_gradient_checkpointing = True
    _no_split_modules = ["PreNormLayer"]
    _supports_sdpa = True
    _supports_flex_attn = True
    _supports_flash_attn = True
    _supports_attention_backend = True
    _can_compile_fullgraph = True

    def _check_and_adjust_attn_implementation(self, attn_implementation: str | None, *args, **kwargs) -> str:
        """hkproj's fixed mask value (`config.attention_mask_value`, -1e9) exists only in eager attention: such a
        model always runs eager, whatever implementation is asked for."""
        if self.config.attention_mask_value is not None:
            if attn_implementation not in (None, "eager"):
                logger.info(
                    f"attention_mask_value={self.config.attention_mask_value} needs eager attention; "
                    f"{attn_implementation!r} is not used."
                )
            return "eager"
        return super()._check_and_adjust_attn_implementation(attn_implementation, *args, **kwargs)

    def _use_cache(self, use_cache: bool | None) -> bool:
        """Whether a forward pass keeps keys/values in a cache: `use_cache`, else the config's; never while training
        with gradient checkpointing, which runs each layer again."""
        if self.gradient_checkpointing and self.training:
            return False
        return use_cache if use_cache is not None else self.config.use_cache


REPLACEMENT_CHARACTER = "\ufffd"  # what a token holding part of a character's bytes decodes to on its own


def stop_string_list(stop_strings: str | list[str] | tuple[str, ...]) -> list[str]:
    """The stop strings as a list, refusing what cannot stop anything (an empty string, a non-string)."""
    stops = [stop_strings] if isinstance(stop_strings, str) else list(stop_strings)
    if not stops or not all(isinstance(stop, str) and stop for stop in stops):
        raise ValueError(f"stop_strings must be a non-empty string or a list of them, got {stop_strings!r}.")
    return stops


class DecodedStopStringCriteria(StoppingCriteria):
    """Stop each sequence at the token that completes one of `stop_strings` in its decoded text.

    Each call reads the newest token of each row, behind enough earlier tokens to hold the longest stop string (every
    token spells at least one byte). A match lies in the generated text (as OpenAI's `stop` does) and ends in that
    token: a stop string in the prompt stops nothing. The criterion keeps no state between calls but the prompt's
    length, so a call on drafted tokens (transformers 5.17 asks the criteria about a prompt-lookup step's drafts before
    checking them) changes nothing. Decoding paths that add several tokens a step (prompt lookup, assisted) have their
    drafts cut before the token that would complete a stop (`cut_drafts`), so each step's last token is the only one
    that can complete a stop, and generation ends at that token, as it does token by token.
    """

    def __init__(self, stop_strings: str | list[str] | tuple[str, ...], tokenizer: Any) -> None:
        self.stop_strings = stop_string_list(stop_strings)
        self.tokenizer = tokenizer
        self.window = max(len(stop.encode("utf-8")) for stop in self.stop_strings)
        self.prompt_length: int | None = None  # given by the decoding path, else known at the first call

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor, **kwargs) -> torch.BoolTensor:
        length = input_ids.shape[1]
        if self.prompt_length is None:  # one token generated since the prompt
            self.prompt_length = length - 1
        done = self.stop_ends_in(input_ids, length - 1) if length > self.prompt_length else [False] * len(input_ids)
        return torch.tensor(done, dtype=torch.bool, device=input_ids.device)  # type: ignore[return-value]

    def stop_ends_in(self, input_ids: torch.Tensor, first: int) -> list[bool]:
        """Whether, in each row, a stop string of the generated text ends in the tokens from position `first` on."""
        start = max(cast(int, self.prompt_length), first - self.window)
        rows = input_ids[:, start:].tolist()
        options = dict(skip_special_tokens=False, clean_up_tokenization_spaces=False)
        texts = self.tokenizer.batch_decode(rows, **options)
        earlier = self.tokenizer.batch_decode([row[: first - start] for row in rows], **options)
        return [self._ends_after(text, before) for text, before in zip(texts, earlier, strict=True)]

    def _ends_after(self, text: str, before: str) -> bool:
        """Whether a stop string in `text` ends after `before`, the text of the tokens read already (whose last
        characters may be incomplete bytes that the new tokens complete)."""
        settled = len(before.rstrip(REPLACEMENT_CHARACTER))
        return any(text.find(stop, max(0, settled - len(stop) + 1)) != -1 for stop in self.stop_strings)

    def cut_drafts(self, get_candidates: Callable[..., tuple[torch.Tensor, Any]]) -> Callable[..., tuple[Any, Any]]:
        """A candidate generator's `get_candidates` whose drafts end before a token that would complete a stop
        string: the model then checks the drafts up to there and its own next token is the one the criterion reads."""

        def get_candidates_up_to_a_stop(input_ids: torch.Tensor, **kwargs: Any) -> tuple[Any, Any]:
            candidates, logits = get_candidates(input_ids, **kwargs)
            length = input_ids.shape[1]
            for end in range(length + 1, candidates.shape[1] + 1):
                if any(self.stop_ends_in(candidates[:, :end], end - 1)):
                    kept = end - 1 - length
                    return candidates[:, : end - 1], None if logits is None else logits[:, :kept]
            return candidates, logits

        return get_candidates_up_to_a_stop


class DraftsEndBeforeStops(LogitsProcessor):
    """Carries a `DecodedStopStringCriteria` from assisted decoding to the candidate generator it builds, in the
    logits processors transformers hands it; changes no scores."""

    def __init__(self, stop: DecodedStopStringCriteria) -> None:
        self.stop = stop

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        return scores


class StopStringsGenerationMixin(GenerationMixin):
    """transformers' `GenerationMixin` with `stop_strings` matched by `DecodedStopStringCriteria` on every decoding
    path (an assistant model drafting for this one needs none: its drafts are cut where a stop would complete).

    Three private hooks of `GenerationMixin`, because no public argument does this: `_get_stopping_criteria` puts the
    criterion in place of transformers' (which fails on vocabularies that cannot spell its probe), and
    `_assisted_decoding` and `_get_candidate_generator` hand it to the candidate generator, whose drafts no public
    argument reaches.
    """

    def _get_stopping_criteria(
        self,
        generation_config: Any,
        stopping_criteria: StoppingCriteriaList | None,
        tokenizer: Any = None,
        *args: Any,
        **kwargs: Any,
    ) -> StoppingCriteriaList:
        criteria_of_transformers = super()._get_stopping_criteria  # type: ignore[misc]  # self typed as a protocol
        stop_strings = generation_config.stop_strings
        if stop_strings is None:
            return criteria_of_transformers(generation_config, stopping_criteria, tokenizer, *args, **kwargs)
        drafting = getattr(generation_config, "is_assistant", False)
        if tokenizer is None and not drafting:
            raise ValueError(
                f"stop_strings={stop_strings!r} needs the model's tokenizer to read the generated text: pass "
                "tokenizer= to generate()."
            )
        generation_config.stop_strings = None  # transformers' own criterion is the one this replaces
        try:
            criteria = criteria_of_transformers(generation_config, stopping_criteria, tokenizer, *args, **kwargs)
        finally:
            generation_config.stop_strings = stop_strings
        if not drafting:
            criteria.append(DecodedStopStringCriteria(stop_strings, tokenizer))
        return criteria

    def _assisted_decoding(
        self,
        input_ids: torch.LongTensor,
        logits_processor: LogitsProcessorList,
        stopping_criteria: StoppingCriteriaList,
        *args: Any,
        **kwargs: Any,
    ) -> Any:
        """transformers' assisted decoding (prompt lookup, an assistant model), told the prompt's length and given
        the stop criterion for its candidate generator."""
        stop = next((item for item in stopping_criteria if isinstance(item, DecodedStopStringCriteria)), None)
        if stop is not None:
            stop.prompt_length = input_ids.shape[1]
            logits_processor = LogitsProcessorList([*logits_processor, DraftsEndBeforeStops(stop)])
        return super()._assisted_decoding(input_ids, logits_processor, stopping_criteria, *args, **kwargs)  # type: ignore[misc]  # self typed as a protocol

    def _get_candidate_generator(self, *args: Any, **kwargs: Any) -> Any:
        generator = super()._get_candidate_generator(*args, **kwargs)  # type: ignore[misc]  # self typed as a protocol
        processors = kwargs.get("logits_processor") or []
        carrier = next((item for item in processors if isinstance(item, DraftsEndBeforeStops)), None)
        if carrier is not None:
            # this generator's own method, wrapped: its class and state stay what transformers checks and updates
            generator.get_candidates = carrier.stop.cut_drafts(generator.get_candidates)  # type: ignore[method-assign]
        return generator
