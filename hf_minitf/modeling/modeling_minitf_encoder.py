"""MiniTF encoder: MiniEmbed's pre-LN transformer encoder (and the Transformer-embedding layer) as a
Hugging Face model that returns token states and a mean-pooled, L2-normalized sentence embedding."""

from __future__ import annotations

import math
from typing import cast

import torch
import torch.nn.functional as F
from torch import nn
from transformers.masking_utils import create_bidirectional_mask
from transformers.modeling_outputs import BaseModelOutputWithPooling, SequenceClassifierOutput
from transformers.utils import can_return_tuple

from .configuration_minitf_encoder import MiniTFEncoderConfig
from .layers import (
    MiniTFPreTrainedModel,
    PreNormLayer,
    SinusoidalPositionalEmbedding,
    carried_outputs,
    check_attention_mask,
    check_ids_or_embeds,
    check_ids_tensor,
    lookup,
    make_norm,
    position_refusal,
    run_layers,
    token_refusal,
)


def mean_pool(last_hidden_state: torch.Tensor, attention_mask: torch.Tensor | None) -> torch.Tensor:
    """Mean of the token states over real tokens (count clamped at 1e-9), then L2-normalized.

    This is MiniEmbed's `encode` and sentence-transformers' Pooling(mean) -> Normalize; without a mask every
    position counts. A row whose mask is all zeros pools to the zero vector (0 / 1e-9 = 0, and normalizing
    zero leaves zero), never NaN.
    """
    states = last_hidden_state.float()  # 1e-9 underflows to 0 in float16: pool in float32, cast back
    if attention_mask is None:
        pooled = states.sum(dim=1) / max(states.shape[1], 1)
    else:
        mask = attention_mask.unsqueeze(-1).float()
        pooled = (states * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1e-9)
    return F.normalize(pooled, p=2, dim=-1).to(last_hidden_state.dtype)


class MiniTFEncoderPreTrainedModel(MiniTFPreTrainedModel):
    """The base of the encoder classes (see `MiniTFPreTrainedModel`)."""

    config_class = MiniTFEncoderConfig


class MiniTFEncoderModel(MiniTFEncoderPreTrainedModel):
    """The encoder stack: scaled token embedding + positions, `num_hidden_layers` pre-LN layers, final LayerNorm.

    `last_hidden_state` is what MiniEmbed's `forward` returns, `pooler_output` what its `encode` returns.
    """

    def __init__(self, config: MiniTFEncoderConfig) -> None:
        super().__init__(config)
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size, padding_idx=config.pad_token_id)
        self.embed_scale = math.sqrt(config.hidden_size) if config.scale_embeddings else 1.0
        if config.position_embedding_type == "learned":
            self.embed_positions = nn.Embedding(config.max_position_embeddings, config.hidden_size)
        else:
            self.sinusoidal_positions = SinusoidalPositionalEmbedding(config.hidden_size)
        self.dropout = nn.Dropout(config.hidden_dropout)
        self.layers = nn.ModuleList(PreNormLayer(config, layer_idx) for layer_idx in range(config.num_hidden_layers))
        self.norm = make_norm(config)
        self.gradient_checkpointing = False
        self.post_init()

    def _check_inputs(self, input_ids, attention_mask, position_ids, inputs_embeds) -> None:
        config = self.config
        check_ids_or_embeds(input_ids, inputs_embeds, config.hidden_size)
        if input_ids is not None:
            check_ids_tensor(input_ids)
        batch_size, length = (input_ids if input_ids is not None else inputs_embeds).shape[:2]
        check_attention_mask(attention_mask, batch_size, length)
        if position_ids is None and length > config.max_position_embeddings:
            raise ValueError(
                f"The input has {length} tokens but this model takes at most max_position_embeddings="
                f"{config.max_position_embeddings}; truncate it (tokenizer(..., truncation=True, "
                f"max_length={config.max_position_embeddings}))."
            )

    @can_return_tuple
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        inputs_embeds: torch.FloatTensor | None = None,
        output_attentions: bool | None = None,
        output_hidden_states: bool | None = None,
        **kwargs,
    ) -> BaseModelOutputWithPooling:
        """Token states and the pooled sentence embedding.

        `attention_mask` (batch, seq) marks real tokens with 1; padding keys are masked out of attention and out
        of the mean. Positions are 0..seq-1 (pad on the right, as the tokenizer does). `inputs_embeds` replace
        the scaled token embeddings. A row that is all padding gives finite token states and a zero
        `pooler_output` (see `mean_pool`), where the original returns NaN.
        """
        self._check_inputs(input_ids, attention_mask, position_ids, inputs_embeds)
        config = self.config
        if inputs_embeds is None:  # one of the two is given (checked)
            ids = cast(torch.Tensor, input_ids)
            embeds = lookup(self.embed_tokens, ids, token_refusal(config.vocab_size)) * self.embed_scale
        else:
            embeds = inputs_embeds
        if position_ids is None:
            position_ids = torch.arange(embeds.shape[1], device=embeds.device)[None]
        if config.position_embedding_type == "learned":
            refusal = position_refusal(config.max_position_embeddings, "the position table")
            positions = lookup(self.embed_positions, position_ids, refusal)
        else:
            positions = self.sinusoidal_positions(position_ids).to(embeds.dtype)
        hidden_states = self.dropout(embeds + positions)

        mask = create_bidirectional_mask(config, hidden_states, attention_mask)
        hidden_states, all_hidden_states, all_attentions, _ = run_layers(
            self.layers,
            self.norm,
            hidden_states,
            mask,
            output_hidden_states=output_hidden_states,
            output_attentions=output_attentions,
        )

        return BaseModelOutputWithPooling(
            last_hidden_state=hidden_states,
            pooler_output=mean_pool(hidden_states, attention_mask),
            hidden_states=all_hidden_states,
            attentions=all_attentions,
        )


class MiniTFEncoderForSequenceClassification(MiniTFEncoderPreTrainedModel):
    """MiniTF encoder with a linear classifier on the pooled (mean, L2-normalized) sentence embedding.

    `config.num_labels` sets the outputs; the loss (regression, single- or multi-label) follows
    `config.problem_type` as in transformers' own `*ForSequenceClassification` models.
    """

    def __init__(self, config: MiniTFEncoderConfig) -> None:
        super().__init__(config)
        self.num_labels = config.num_labels
        self.model = MiniTFEncoderModel(config)
        dropout = config.classifier_dropout if config.classifier_dropout is not None else config.hidden_dropout
        self.dropout = nn.Dropout(dropout)
        self.classifier = nn.Linear(config.hidden_size, config.num_labels)  # type: ignore[arg-type]  # transformers types num_labels Optional; a built config has id2label
        self.post_init()

    @can_return_tuple
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        position_ids: torch.LongTensor | None = None,
        inputs_embeds: torch.FloatTensor | None = None,
        labels: torch.LongTensor | None = None,
        output_attentions: bool | None = None,
        output_hidden_states: bool | None = None,
        **kwargs,
    ) -> SequenceClassifierOutput:
        """Class logits of each text; with `labels` also the loss."""
        outputs = self.model(
            input_ids=input_ids,
            attention_mask=attention_mask,
            position_ids=position_ids,
            inputs_embeds=inputs_embeds,
            output_attentions=output_attentions,
            output_hidden_states=output_hidden_states,
        )
        logits = self.classifier(self.dropout(outputs.pooler_output))
        loss = None
        if labels is not None:
            loss = self.loss_function(labels=labels, pooled_logits=logits, config=self.config, **kwargs)
        return SequenceClassifierOutput(
            loss=loss, logits=logits, **carried_outputs(outputs, "last_hidden_state", "pooler_output")
        )


# Saving copies this code beside the weights and writes `auto_map`, so users without hf_minitf load the folder.
MiniTFEncoderModel.register_for_auto_class("AutoModel")
MiniTFEncoderForSequenceClassification.register_for_auto_class("AutoModelForSequenceClassification")

__all__ = [
    "MiniTFEncoderPreTrainedModel",
    "MiniTFEncoderModel",
    "MiniTFEncoderForSequenceClassification",
    "mean_pool",
]
