"""MiniTF GPT: a pre-LN decoder-only transformer (the nanoGPT-style char GPT, FrawdLLM) as a Hugging Face causal LM."""

from __future__ import annotations

from typing import cast

import torch
from torch import nn
from transformers.cache_utils import Cache, DynamicCache
from transformers.masking_utils import create_causal_mask
from transformers.modeling_outputs import BaseModelOutputWithPast, CausalLMOutputWithPast
from transformers.utils import can_return_tuple

from .configuration_minitf_gpt import MiniTFGPTConfig
from .layers import (
    CACHE_FIELD,
    DecodingLinear,
    MiniTFPreTrainedModel,
    PreNormLayer,
    RotaryEmbedding,
    StopStringsGenerationMixin,
    cached_length,
    carried_outputs,
    check_attention_mask,
    check_ids_or_embeds,
    check_ids_tensor,
    is_paged_cache,
    labels_loss,
    lookup,
    make_norm,
    pick_cache,
    position_refusal,
    remember_forward_signature,
    run_layers,
    token_refusal,
)


def positions_from_mask(
    attention_mask: torch.Tensor | None, past_length: int, query_length: int, device: torch.device
) -> torch.Tensor:
    """Position ids of the new tokens: counted over real tokens only, so left padding does not shift them.

    Without a 2D mask, positions are `past_length, past_length + 1, ...` for every row, as one (1, length) row.
    """
    if attention_mask is None or isinstance(attention_mask, dict) or attention_mask.dim() != 2:
        return torch.arange(past_length, past_length + query_length, device=device)[None]
    positions = (attention_mask.long().cumsum(-1) - 1).clamp(min=0)
    return positions[:, -query_length:].to(device)


class MiniTFGPTPreTrainedModel(MiniTFPreTrainedModel):
    """The base of the GPT classes (see `MiniTFPreTrainedModel`)."""

    config_class = MiniTFGPTConfig


class MiniTFGPTModel(MiniTFGPTPreTrainedModel):
    """The decoder stack: embeddings, `num_hidden_layers` pre-LN layers, final LayerNorm."""

    def __init__(self, config: MiniTFGPTConfig) -> None:
        super().__init__(config)
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size)
        if config.position_embedding_type == "learned":
            self.embed_positions = nn.Embedding(config.max_position_embeddings, config.hidden_size)
        else:
            head_dim = config.hidden_size // config.num_attention_heads
            self.rotary_emb = RotaryEmbedding(head_dim, config.rope_theta, config.rope_interleaved)
        self.dropout = nn.Dropout(config.hidden_dropout)
        self.layers = nn.ModuleList(
            PreNormLayer(config, layer_idx, is_causal=True) for layer_idx in range(config.num_hidden_layers)
        )
        self.norm = make_norm(config)
        self.gradient_checkpointing = False
        self.post_init()

    @can_return_tuple
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        past_key_values: Cache | None = None,
        inputs_embeds: torch.Tensor | None = None,
        use_cache: bool | None = None,
        output_attentions: bool | None = None,
        output_hidden_states: bool | None = None,
        cache: Cache | None = None,
        **kwargs,
    ) -> BaseModelOutputWithPast:
        """Hidden states of every position; `attention_mask` (batch, cached + new length) marks real tokens.

        Without `position_ids`, positions count real tokens only, so a left-padded row sees the same
        positions as the row alone. With `context_overflow="crop"`, an input longer than the position table is
        cut to its last `max_position_embeddings` tokens (positions restart at the window), and the outputs
        cover that window only. Extra keyword arguments (continuous batching's packed-sequence data) go to the
        attention functions.
        """
        config = self.config
        cache = pick_cache(cache, past_key_values)
        check_ids_or_embeds(input_ids, inputs_embeds, config.hidden_size)
        if input_ids is not None:
            check_ids_tensor(input_ids)
        tokens = cast(torch.Tensor, input_ids if input_ids is not None else inputs_embeds)  # one is given (checked)
        past_length = cached_length(cache)
        if not is_paged_cache(cache):
            check_attention_mask(attention_mask, tokens.shape[0], past_length + tokens.shape[1])
        overflow = past_length + tokens.shape[1] - config.max_position_embeddings
        if config.position_embedding_type == "learned" and config.context_overflow == "crop" and overflow > 0:
            if past_length > 0:
                raise ValueError(
                    "context_overflow='crop' recomputes a sliding window of max_position_embeddings="
                    f"{config.max_position_embeddings} tokens at each step and cannot extend a KV cache past it; "
                    "generate with use_cache=False."
                )
            tokens = tokens[:, overflow:]
            attention_mask = attention_mask[:, overflow:] if attention_mask is not None else None
            position_ids = None
        inputs_embeds = (
            lookup(self.embed_tokens, tokens, token_refusal(config.vocab_size)) if input_ids is not None else tokens
        )
        seq_length = inputs_embeds.shape[1]

        use_cache = self._use_cache(use_cache)
        if use_cache and cache is None:
            cache = DynamicCache(config=config)
        derived_positions = position_ids is None  # else given (continuous batching packs requests in one row)
        if position_ids is None:
            position_ids = positions_from_mask(attention_mask, past_length, seq_length, inputs_embeds.device)

        rotary = None
        hidden_states = inputs_embeds
        if config.position_embedding_type == "learned":
            refusal = position_refusal(config.max_position_embeddings, "learned positions")
            # derived positions end at past + new - 1, known from the shapes (no check while compiling or exporting)
            overflows = past_length + seq_length > config.max_position_embeddings
            if derived_positions and overflows and not torch.compiler.is_compiling():
                raise ValueError(refusal(past_length + seq_length - 1))
            hidden_states = hidden_states + lookup(self.embed_positions, position_ids, refusal)
        else:
            cos, sin = self.rotary_emb(position_ids)
            rotary = (self.rotary_emb, cos, sin)
        hidden_states = self.dropout(hidden_states)

        mask = create_causal_mask(config, hidden_states, attention_mask, cache, position_ids)
        hidden_states, all_hidden_states, all_attentions, _ = run_layers(
            self.layers,
            self.norm,
            hidden_states,
            mask,
            cache=cache,
            rotary=rotary,
            output_hidden_states=output_hidden_states,
            output_attentions=output_attentions,
            **kwargs,
        )

        return BaseModelOutputWithPast(
            last_hidden_state=hidden_states,
            hidden_states=all_hidden_states,
            attentions=all_attentions,
            **{CACHE_FIELD: cache if use_cache else None},
        )


@remember_forward_signature
class MiniTFGPTForCausalLM(MiniTFGPTPreTrainedModel, StopStringsGenerationMixin):
    """MiniTF GPT with a language-modelling head tied to the token embedding."""

    _tied_weights_keys = {"lm_head.weight": "model.embed_tokens.weight"}

    def __init__(self, config: MiniTFGPTConfig) -> None:
        super().__init__(config)
        self.model = MiniTFGPTModel(config)
        self.lm_head = DecodingLinear(config.hidden_size, config.vocab_size, bias=False)
        self.post_init()

    @can_return_tuple
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        position_ids: torch.LongTensor | None = None,
        past_key_values: Cache | None = None,
        inputs_embeds: torch.FloatTensor | None = None,
        labels: torch.Tensor | None = None,
        use_cache: bool | None = None,
        output_attentions: bool | None = None,
        output_hidden_states: bool | None = None,
        cache: Cache | None = None,
        logits_to_keep: int | torch.Tensor = 0,
        **kwargs,
    ) -> CausalLMOutputWithPast:
        """Next-token logits; with `labels` (the input ids, -100 where ignored) also the shifted LM loss."""
        outputs = self.model(
            input_ids=input_ids,
            attention_mask=attention_mask,
            position_ids=position_ids,
            inputs_embeds=inputs_embeds,
            use_cache=use_cache,
            output_attentions=output_attentions,
            output_hidden_states=output_hidden_states,
            cache=pick_cache(cache, past_key_values),
            **kwargs,
        )
        hidden_states = outputs.last_hidden_state
        kept = slice(-logits_to_keep, None) if isinstance(logits_to_keep, int) else logits_to_keep
        logits = self.lm_head(hidden_states[:, kept, :])
        loss = None
        if labels is not None:
            labels = labels[:, -hidden_states.shape[1] :]
            vocab_size = self.config.vocab_size
            loss = labels_loss(
                lambda: self.loss_function(logits=logits, labels=labels, vocab_size=vocab_size, **kwargs),
                labels,
                vocab_size,
                "labels",
            )
        return CausalLMOutputWithPast(loss=loss, logits=logits, **carried_outputs(outputs, "last_hidden_state"))


# Saving copies this code beside the weights and writes `auto_map`, so users without hf_minitf load the folder.
MiniTFGPTModel.register_for_auto_class("AutoModel")
MiniTFGPTForCausalLM.register_for_auto_class("AutoModelForCausalLM")

__all__ = ["MiniTFGPTPreTrainedModel", "MiniTFGPTModel", "MiniTFGPTForCausalLM"]
