"""MiniTF seq2seq: hkproj's pytorch-transformer, a pre-norm encoder-decoder for translation, as a Hugging Face
seq2seq LM."""

from __future__ import annotations

import math
from typing import cast

import torch
import torch.nn.functional as F
from torch import nn
from transformers.cache_utils import Cache, DynamicCache, EncoderDecoderCache
from transformers.masking_utils import create_bidirectional_mask, create_causal_mask
from transformers.modeling_outputs import (
    BaseModelOutput,
    BaseModelOutputWithPastAndCrossAttentions,
    Seq2SeqLMOutput,
    Seq2SeqModelOutput,
)
from transformers.utils import can_return_tuple

from .configuration_minitf_seq2seq import MiniTFSeq2SeqConfig
from .layers import (
    CACHE_FIELD,
    DecodingLinear,
    MiniTFPreTrainedModel,
    PreNormLayer,
    SinusoidalPositionalEmbedding,
    StopStringsGenerationMixin,
    cached_length,
    carried_outputs,
    check_attention_mask,
    check_ids_or_embeds,
    check_ids_tensor,
    labels_loss,
    lookup,
    make_norm,
    pick_cache,
    remember_forward_signature,
    run_layers,
    token_refusal,
)


def shift_tokens_right(labels: torch.Tensor, pad_token_id: int, decoder_start_token_id: int) -> torch.Tensor:
    """Decoder inputs from labels: `[start] y` for labels `y [EOS]`, with ignored (-100) labels turned into padding."""
    shifted = labels.new_full(labels.shape, pad_token_id)
    shifted[:, 1:] = labels[:, :-1]
    shifted[:, 0] = decoder_start_token_id
    return shifted.masked_fill(shifted == -100, pad_token_id)


class MiniTFSeq2SeqPreTrainedModel(MiniTFPreTrainedModel):
    """The base of the seq2seq classes (see `MiniTFPreTrainedModel`)."""

    config_class = MiniTFSeq2SeqConfig


class MiniTFSeq2SeqStack(MiniTFSeq2SeqPreTrainedModel):
    """What the encoder and the decoder share: scaled token embeddings plus sinusoidal positions, pre-norm layers,
    a final norm."""

    def __init__(self, config: MiniTFSeq2SeqConfig, vocab_size: int, has_cross_attention: bool) -> None:
        super().__init__(config)
        self.embed_tokens = nn.Embedding(vocab_size, config.hidden_size)
        self.embed_positions = SinusoidalPositionalEmbedding(config.hidden_size)
        self.embed_scale = math.sqrt(config.hidden_size) if config.scale_embedding else 1.0
        self.dropout = nn.Dropout(config.hidden_dropout)
        self.layers = nn.ModuleList(
            PreNormLayer(config, layer_idx, is_causal=has_cross_attention, has_cross_attention=has_cross_attention)
            for layer_idx in range(config.num_hidden_layers)
        )
        self.norm = make_norm(config)
        self.gradient_checkpointing = False

    def get_input_embeddings(self) -> nn.Embedding:
        return self.embed_tokens

    def set_input_embeddings(self, value: nn.Embedding) -> None:  # type: ignore[override]  # transformers says any Module; an Embedding is needed
        self.embed_tokens = value

    def _embed(
        self, input_ids, inputs_embeds, past_length: int, side: str, position_ids: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Token embeddings times `embed_scale` (also for given `inputs_embeds`, which replace the lookup) plus the
        sinusoidal positions (`position_ids`, by default `past_length, past_length + 1, ...`); refuses bad ids,
        too long inputs and the one dtype the original norm cannot run in."""
        config = self.config
        check_ids_or_embeds(input_ids, inputs_embeds, config.hidden_size, side)
        if config.norm_type == "scalar_std_times_eps" and self.embed_tokens.weight.dtype == torch.float16:
            raise ValueError(
                "norm_type='scalar_std_times_eps' (hkproj's original norm, which divides by std * eps) overflows "
                "float16: every logit would be inf or NaN. Load this model with dtype=torch.bfloat16 or float32."
            )
        if input_ids is not None:
            check_ids_tensor(input_ids, "input_ids (source)" if side == "source" else "decoder_input_ids (target)")
            inputs_embeds = lookup(self.embed_tokens, input_ids, self.id_refusal)
        length = inputs_embeds.shape[1]
        limit = config.max_position_embeddings
        if past_length + length > limit and not torch.compiler.is_compiling():  # shapes (no check while exporting)
            fix = (
                f"Shorten it, e.g. tokenizer(..., truncation=True, max_length={limit})."
                if side == "source"
                else f"Generate fewer tokens: max_length (start token included) at most {limit}."
            )
            raise ValueError(
                f"The {side} holds {past_length + length} tokens, past this model's max_position_embeddings={limit}. "
                + fix
            )
        if position_ids is None:
            position_ids = torch.arange(past_length, past_length + length, device=inputs_embeds.device)[None]
        positions = self.embed_positions(position_ids).to(inputs_embeds.dtype)
        return self.dropout(inputs_embeds * self.embed_scale + positions)

    def id_refusal(self, token_id: int) -> str:
        """The error for an id outside this side's vocabulary, naming what to pass instead (each side has its own)."""
        raise NotImplementedError


class MiniTFSeq2SeqEncoder(MiniTFSeq2SeqStack):
    """The encoder: source-vocabulary embeddings, self-attention layers, final norm."""

    main_input_name = "input_ids"

    def __init__(self, config: MiniTFSeq2SeqConfig) -> None:
        super().__init__(config, config.src_vocab_size, has_cross_attention=False)
        self.post_init()

    def id_refusal(self, token_id: int) -> str:
        config = self.config
        hint = (
            "It lies in the target vocabulary: input_ids must be source ids (tokenizer(text)); target ids go to "
            "labels or decoder_input_ids (tokenizer(text_target=...))."
            if 0 <= token_id < config.vocab_size
            else "Check that the tokenizer matches this model."
        )
        return (
            f"input_ids contains token id {token_id}, outside the source vocabulary "
            f"(src_vocab_size={config.src_vocab_size}). {hint}"
        )

    @can_return_tuple
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        inputs_embeds: torch.FloatTensor | None = None,
        output_attentions: bool | None = None,
        output_hidden_states: bool | None = None,
        **kwargs,
    ) -> BaseModelOutput:
        """Encode the source; `attention_mask` (batch, source length) marks real tokens with 1, padding with 0."""
        hidden_states = self._embed(input_ids, inputs_embeds, 0, "source")
        batch_size, length = hidden_states.shape[:2]
        if length == 0:
            raise ValueError("The source is empty (length 0); give at least one token to translate.")
        check_attention_mask(attention_mask, batch_size, length)
        mask = create_bidirectional_mask(self.config, hidden_states, attention_mask)
        hidden_states, all_hidden_states, all_attentions, _ = run_layers(
            self.layers,
            self.norm,
            hidden_states,
            mask,
            output_hidden_states=output_hidden_states,
            output_attentions=output_attentions,
        )
        return BaseModelOutput(
            last_hidden_state=hidden_states, hidden_states=all_hidden_states, attentions=all_attentions
        )


class MiniTFSeq2SeqDecoder(MiniTFSeq2SeqStack):
    """The decoder: target-vocabulary embeddings, causal self-attention, cross-attention to the encoder, final norm."""

    def __init__(self, config: MiniTFSeq2SeqConfig) -> None:
        super().__init__(config, config.vocab_size, has_cross_attention=True)
        self.post_init()

    def id_refusal(self, token_id: int) -> str:
        return token_refusal(self.config.vocab_size, "decoder_input_ids (target)")(token_id)

    @can_return_tuple
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        encoder_hidden_states: torch.Tensor | None = None,
        encoder_attention_mask: torch.Tensor | None = None,
        past_key_values: Cache | None = None,
        inputs_embeds: torch.FloatTensor | None = None,
        position_ids: torch.LongTensor | None = None,
        use_cache: bool | None = None,
        output_attentions: bool | None = None,
        output_hidden_states: bool | None = None,
        cache: Cache | None = None,
        **kwargs,
    ) -> BaseModelOutputWithPastAndCrossAttentions:
        """Decode target tokens against the encoder output.

        `attention_mask` (batch, cached + new length) marks real target tokens; without it only causality masks.
        `encoder_attention_mask` (batch, source length) marks the real source tokens. With `use_cache`, the
        `EncoderDecoderCache` keeps self-attention keys/values and the cross-attention ones, computed once.
        """
        config = self.config
        if encoder_hidden_states is None:
            raise ValueError("The decoder needs encoder_hidden_states (the encoder's output) to attend to.")
        cache = pick_cache(cache, past_key_values)
        use_cache = self._use_cache(use_cache)
        if use_cache and cache is None:
            cache = EncoderDecoderCache(DynamicCache(config=config), DynamicCache(config=config))
        self_cache = cache.self_attention_cache if isinstance(cache, EncoderDecoderCache) else cache
        past_length = cached_length(self_cache)

        hidden_states = self._embed(input_ids, inputs_embeds, past_length, "target", position_ids)
        batch_size, length = hidden_states.shape[:2]
        if attention_mask is not None and attention_mask.dim() == 2:
            # A longer 2D mask (e.g. the labels' full mask while decoding step by step) is cut to the tokens seen.
            attention_mask = attention_mask[:, : past_length + length]
            check_attention_mask(attention_mask, batch_size, past_length + length, "decoder_attention_mask")
        self_mask = create_causal_mask(config, hidden_states, attention_mask, self_cache, position_ids)
        source_length = encoder_hidden_states.shape[1]
        if encoder_attention_mask is not None and tuple(encoder_attention_mask.shape) != (batch_size, source_length):
            raise ValueError(
                f"encoder_attention_mask must have shape (batch_size, source length) = ({batch_size}, "
                f"{source_length}), got {tuple(encoder_attention_mask.shape)}."
            )
        cross_mask = create_bidirectional_mask(
            config, hidden_states, encoder_attention_mask, encoder_hidden_states=encoder_hidden_states
        )

        hidden_states, all_hidden_states, all_self_attentions, all_cross_attentions = run_layers(
            self.layers,
            self.norm,
            hidden_states,
            self_mask,
            encoder_hidden_states,
            cross_mask,
            cache=cache,
            output_hidden_states=output_hidden_states,
            output_attentions=output_attentions,
        )
        return BaseModelOutputWithPastAndCrossAttentions(
            last_hidden_state=hidden_states,
            hidden_states=all_hidden_states,
            attentions=all_self_attentions,
            cross_attentions=all_cross_attentions,
            **{CACHE_FIELD: cache if use_cache else None},
        )


class MiniTFSeq2SeqModel(MiniTFSeq2SeqPreTrainedModel):
    """Encoder and decoder without the output projection; returns the decoder's last hidden states."""

    def __init__(self, config: MiniTFSeq2SeqConfig) -> None:
        super().__init__(config)
        self.encoder = MiniTFSeq2SeqEncoder(config)
        self.decoder = MiniTFSeq2SeqDecoder(config)
        self.post_init()

    def get_input_embeddings(self) -> nn.Embedding:
        """The source embedding (the decoder's is `decoder.embed_tokens`: the vocabularies are separate)."""
        return self.encoder.embed_tokens

    def set_input_embeddings(self, value: nn.Embedding) -> None:  # type: ignore[override]  # transformers says any Module; an Embedding is needed
        self.encoder.embed_tokens = value

    @can_return_tuple
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        decoder_input_ids: torch.LongTensor | None = None,
        decoder_attention_mask: torch.Tensor | None = None,
        encoder_outputs: BaseModelOutput | tuple | None = None,
        past_key_values: Cache | None = None,
        inputs_embeds: torch.FloatTensor | None = None,
        decoder_inputs_embeds: torch.FloatTensor | None = None,
        decoder_position_ids: torch.LongTensor | None = None,
        use_cache: bool | None = None,
        output_attentions: bool | None = None,
        output_hidden_states: bool | None = None,
        cache: Cache | None = None,
        **kwargs,
    ) -> Seq2SeqModelOutput:
        """Encode the source (unless `encoder_outputs` is given), then decode `decoder_input_ids` (target ids)."""
        if decoder_input_ids is None and decoder_inputs_embeds is None:
            raise ValueError(
                "Pass decoder_input_ids (target-vocabulary ids starting with the decoder start token): the source "
                "and target vocabularies differ, so they cannot be derived from input_ids."
            )
        if encoder_outputs is None:
            encoder_outputs = cast(
                BaseModelOutput,
                self.encoder(
                    input_ids=input_ids,
                    attention_mask=attention_mask,
                    inputs_embeds=inputs_embeds,
                    output_attentions=output_attentions,
                    output_hidden_states=output_hidden_states,
                ),
            )
        elif not isinstance(encoder_outputs, BaseModelOutput):
            encoder_outputs = BaseModelOutput(
                last_hidden_state=encoder_outputs[0],
                hidden_states=encoder_outputs[1] if len(encoder_outputs) > 1 else None,
                attentions=encoder_outputs[2] if len(encoder_outputs) > 2 else None,
            )
        decoder_outputs = self.decoder(
            input_ids=decoder_input_ids,
            attention_mask=decoder_attention_mask,
            encoder_hidden_states=encoder_outputs.last_hidden_state,
            encoder_attention_mask=attention_mask,
            inputs_embeds=decoder_inputs_embeds,
            position_ids=decoder_position_ids,
            use_cache=use_cache,
            output_attentions=output_attentions,
            output_hidden_states=output_hidden_states,
            cache=pick_cache(cache, past_key_values),
        )
        return Seq2SeqModelOutput(
            last_hidden_state=decoder_outputs.last_hidden_state,
            decoder_hidden_states=decoder_outputs.hidden_states,
            decoder_attentions=decoder_outputs.attentions,
            cross_attentions=decoder_outputs.cross_attentions,
            encoder_last_hidden_state=encoder_outputs.last_hidden_state,
            encoder_hidden_states=encoder_outputs.hidden_states,
            encoder_attentions=encoder_outputs.attentions,
            **{CACHE_FIELD: getattr(decoder_outputs, CACHE_FIELD)},
        )


@remember_forward_signature
class MiniTFSeq2SeqForConditionalGeneration(MiniTFSeq2SeqPreTrainedModel, StopStringsGenerationMixin):
    """The encoder-decoder with a projection to the target vocabulary (`lm_head`, biased by default as in hkproj's).

    `logits` are the projection's scores, or their log_softmax when `config.output_log_softmax` (hkproj's
    `ProjectionLayer`); both give the same argmax, beams, samples and loss. With `config.tie_word_embeddings` the
    projection's weight is the decoder's token embedding (both span the target vocabulary).
    """

    _tied_weights_keys = {"lm_head.weight": "model.decoder.embed_tokens.weight"}

    def __init__(self, config: MiniTFSeq2SeqConfig) -> None:
        super().__init__(config)
        self.model = MiniTFSeq2SeqModel(config)
        self.lm_head = DecodingLinear(config.hidden_size, config.vocab_size, bias=config.lm_head_bias)
        self.post_init()

    def prepare_decoder_input_ids_from_labels(self, labels: torch.Tensor) -> torch.Tensor:
        """`[SOS] y` from labels `y [EOS]` (used by DataCollatorForSeq2Seq)."""
        return shift_tokens_right(labels, self.config.pad_token_id, self.config.decoder_start_token_id)

    @can_return_tuple
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        decoder_input_ids: torch.Tensor | None = None,
        decoder_attention_mask: torch.Tensor | None = None,
        encoder_outputs: BaseModelOutput | tuple | None = None,
        past_key_values: Cache | None = None,
        inputs_embeds: torch.FloatTensor | None = None,
        decoder_inputs_embeds: torch.FloatTensor | None = None,
        decoder_position_ids: torch.LongTensor | None = None,
        labels: torch.Tensor | None = None,
        use_cache: bool | None = None,
        output_attentions: bool | None = None,
        output_hidden_states: bool | None = None,
        cache: Cache | None = None,
        num_items_in_batch: int | torch.Tensor | None = None,
        **kwargs,
    ) -> Seq2SeqLMOutput:
        """Target-vocabulary logits for every decoder position.

        With `labels` (target ids `y [EOS]`; -100 and `pad_token_id` ignored) the decoder input defaults to
        `[decoder_start] y` and the cross-entropy loss (with `config.label_smoothing`) is returned.
        """
        config = self.config
        if labels is not None:
            if config.pad_token_id is not None:
                labels = labels.masked_fill(labels == config.pad_token_id, -100)
            use_cache = False
            if decoder_input_ids is None and decoder_inputs_embeds is None:
                decoder_input_ids = self.prepare_decoder_input_ids_from_labels(labels)
        outputs = self.model(
            input_ids=input_ids,
            attention_mask=attention_mask,
            decoder_input_ids=decoder_input_ids,
            decoder_attention_mask=decoder_attention_mask,
            encoder_outputs=encoder_outputs,
            inputs_embeds=inputs_embeds,
            decoder_inputs_embeds=decoder_inputs_embeds,
            decoder_position_ids=decoder_position_ids,
            use_cache=use_cache,
            output_attentions=output_attentions,
            output_hidden_states=output_hidden_states,
            cache=pick_cache(cache, past_key_values),
        )
        logits = self.lm_head(outputs.last_hidden_state)
        if config.output_log_softmax:
            logits = torch.log_softmax(logits, dim=-1)
        loss = None
        if labels is not None:
            targets = labels.flatten().to(logits.device)
            loss = labels_loss(
                lambda: F.cross_entropy(
                    logits.flatten(0, 1).float(),
                    targets,
                    ignore_index=-100,
                    label_smoothing=config.label_smoothing,
                    reduction="mean" if num_items_in_batch is None else "sum",
                ),
                targets,
                config.vocab_size,
                "labels (target)",
            )
            if num_items_in_batch is not None:
                loss = loss / num_items_in_batch
        return Seq2SeqLMOutput(loss=loss, logits=logits, **carried_outputs(outputs, "last_hidden_state"))


# Saving copies this code beside the weights and writes `auto_map`, so users without hf_minitf load the folder.
MiniTFSeq2SeqModel.register_for_auto_class("AutoModel")
MiniTFSeq2SeqForConditionalGeneration.register_for_auto_class("AutoModelForSeq2SeqLM")

__all__ = [
    "MiniTFSeq2SeqPreTrainedModel",
    "MiniTFSeq2SeqEncoder",
    "MiniTFSeq2SeqDecoder",
    "MiniTFSeq2SeqModel",
    "MiniTFSeq2SeqForConditionalGeneration",
]
