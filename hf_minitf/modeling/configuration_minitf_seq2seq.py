"""Configuration of the MiniTF seq2seq family: hkproj's pytorch-transformer translation encoder-decoder and its
later variants."""

from __future__ import annotations

from .configuration_minitf import (
    LM_FIELD_CHECKS,
    SHARED_FIELD_CHECKS,
    MiniTFConfig,
    always,
    boolean,
    check_token_ids_in_vocabulary,
    choice,
    integer,
    number,
    token_ids,
)
from .configuration_minitf_limits import NORM_TYPES

# Where each Auto class finds this family in a folder saved with its code (loaded with trust_remote_code=True).
AUTO_MAP = {
    "AutoConfig": "configuration_minitf_seq2seq.MiniTFSeq2SeqConfig",
    "AutoModel": "modeling_minitf_seq2seq.MiniTFSeq2SeqModel",
    "AutoModelForSeq2SeqLM": "modeling_minitf_seq2seq.MiniTFSeq2SeqForConditionalGeneration",
}

# What each field accepts, checked whenever it is set (see configuration_minitf).
FIELD_CHECKS = {
    **SHARED_FIELD_CHECKS,
    **LM_FIELD_CHECKS,
    "src_vocab_size": integer(),
    "norm_type": choice(NORM_TYPES),
    "attention_mask_value": number(maximum=0, optional=True),
    "scale_embedding": boolean(),
    "lm_head_bias": boolean(),
    "output_log_softmax": boolean(),
    "label_smoothing": number(0, 1, below=True),
    "is_encoder_decoder": always(True),
    "decoder_start_token_id": token_ids(),
}


class MiniTFSeq2SeqConfig(MiniTFConfig):
    """Pre-norm Transformer encoder-decoder with separate source and target vocabularies.

    `src_vocab_size` sizes the encoder's token embedding, `vocab_size` (alias `tgt_vocab_size`) the decoder's
    and the output projection, so generation and the loss work on the target vocabulary. Both stacks add
    sinusoidal positions to token embeddings scaled by sqrt(hidden_size) (`scale_embedding`), use
    `num_hidden_layers` pre-norm layers with a ReLU feed-forward, and end in a norm; `max_position_embeddings`
    bounds the source length and the decoder length alike.

    hkproj's first version exactly: `norm_type="scalar_std_times_eps"`, `layer_norm_eps=1e-6`,
    `attention_bias=True`, `attention_mask_value=-1e9` (masked scores are set to -1e9, as `masked_fill` does, rather
    than pushed to the lowest float) and `output_log_softmax=True` (the model returns log-probabilities as `logits`).
    The defaults are the corrected model: standard LayerNorm, plain logits, masked scores at the lowest float.
    Where that version's norm leaves activations near 1/eps (its untrained weights), scores reach ~1e12 and -1e9 no
    longer hides later target tokens from earlier ones; a KV cache cannot reproduce that, so such a model matches
    the original token for token with `generate(..., use_cache=False)` only. Trained models cache exactly.
    Because that norm divides by `std * eps`, its activations exceed float16's range (65504): run such a model in
    float32 or bfloat16, never float16.
    `label_smoothing` applies to the loss computed from `labels` (hkproj's training used 0.1).

    Every field is checked when set (types, ranges, names) and the whole config once built (heads divide the
    hidden size, special token ids inside both vocabularies): a bad value is a ValueError naming the field.
    """

    model_type = "minitf_seq2seq"
    field_checks = FIELD_CHECKS
    family_auto_map = AUTO_MAP
    keys_to_ignore_at_inference = ["cache", "past_key_values"]
    attribute_map = {
        "tgt_vocab_size": "vocab_size",
        "d_model": "hidden_size",
        "d_ff": "intermediate_size",
    }

    src_vocab_size: int = 32000
    vocab_size: int = 32000
    hidden_size: int = 512
    num_hidden_layers: int = 6
    num_attention_heads: int = 8
    intermediate_size: int = 2048
    max_position_embeddings: int = 350
    hidden_act: str = "relu"
    hidden_dropout: float = 0.1
    attention_dropout: float = 0.1
    norm_type: str = "layer_norm"
    layer_norm_eps: float = 1e-6
    attention_bias: bool = True
    attention_mask_value: float | None = None  # type: ignore[assignment]  # a field here; in the base a class attribute, None
    scale_embedding: bool = True
    lm_head_bias: bool = True
    output_log_softmax: bool = False
    label_smoothing: float = 0.0
    initializer_range: float = 0.02
    use_cache: bool = True
    is_encoder_decoder: bool = True
    tie_word_embeddings: bool = False
    pad_token_id: int | None = 1
    bos_token_id: int | None = 2
    eos_token_id: int | list[int] | None = 3
    decoder_start_token_id: int | None = 2

    def complete_fields(self) -> None:
        super().complete_fields()
        if self.hidden_size % 2 != 0:
            raise ValueError(
                f"{type(self).__name__}: sinusoidal positions need an even hidden_size, got {self.hidden_size}."
            )
        # Special tokens are shared by both vocabularies (the tokenizer pair gives them the same ids).
        check_token_ids_in_vocabulary(
            self,
            ("pad_token_id", "bos_token_id", "eos_token_id", "decoder_start_token_id"),
            min(self.src_vocab_size, self.vocab_size),
            "source or target vocabulary",
        )


MiniTFSeq2SeqConfig.register_for_auto_class()

__all__ = ["MiniTFSeq2SeqConfig"]
