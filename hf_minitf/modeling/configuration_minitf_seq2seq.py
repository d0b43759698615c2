"""Configuration of the MiniTF seq2seq family: hkproj's pytorch-transformer translation encoder-decoder and its
later variants."""

from __future__ import annotations

from transformers import PreTrainedConfig

# Where each Auto class finds this family in a folder saved with its code (loaded with trust_remote_code=True).
AUTO_MAP = {
    "AutoConfig": "configuration_minitf_seq2seq.MiniTFSeq2SeqConfig",
    "AutoModel": "modeling_minitf_seq2seq.MiniTFSeq2SeqModel",
    "AutoModelForSeq2SeqLM": "modeling_minitf_seq2seq.MiniTFSeq2SeqForConditionalGeneration",
}


class MiniTFSeq2SeqConfig(PreTrainedConfig):
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

    `norm_type` names how each norm is computed (mean and std over the hidden features, std unbiased for the
    three hkproj ones):
      layer_norm               nn.LayerNorm: per-feature weight/bias, (x - mean) / sqrt(var + eps)    (default)
      scalar_std_times_eps     hkproj's first version: one weight and one bias, weight * (x - mean) / (std * eps) + bias
      scalar_std_plus_eps      hkproj's fix: one weight and one bias, weight * (x - mean) / (std + eps) + bias
      per_feature_std_plus_eps hkproj's last version: per-feature weight/bias, weight * (x - mean) / (std + eps) + bias
    """

    model_type = "minitf_seq2seq"
    # The architecture, not fields (not saved): separate q/k/v projections, dropout inside the MLP too (hkproj's).
    fused_qkv = False
    feed_forward_dropout = True
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
    attention_mask_value: float | None = None
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

    def __post_init__(self, **kwargs) -> None:
        super().__post_init__(**kwargs)
        self.auto_map = {**AUTO_MAP, **(getattr(self, "auto_map", None) or {})}


MiniTFSeq2SeqConfig.register_for_auto_class()

__all__ = ["AUTO_MAP", "MiniTFSeq2SeqConfig"]
