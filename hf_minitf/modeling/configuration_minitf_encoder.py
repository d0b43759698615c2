"""Configuration of the MiniTF encoder family: the MiniEmbed text-embedding encoder (and the Transformer-embedding
layer it is built on)."""

from __future__ import annotations

from transformers import PreTrainedConfig

# Where each Auto class finds this family in a folder saved with its code (loaded with trust_remote_code=True).
AUTO_MAP = {
    "AutoConfig": "configuration_minitf_encoder.MiniTFEncoderConfig",
    "AutoModel": "modeling_minitf_encoder.MiniTFEncoderModel",
    "AutoModelForSequenceClassification": "modeling_minitf_encoder.MiniTFEncoderForSequenceClassification",
}


class MiniTFEncoderConfig(PreTrainedConfig):
    """Pre-LN transformer encoder for sentence embeddings.

    Token embedding (row `pad_token_id` kept at zero) times sqrt(hidden_size) when `scale_embeddings`, plus
    sinusoidal (sin on even, cos on odd features) or learned positions; pre-LN layers with q/k/v/o projections
    (biased when `attention_bias`) and an exact-GELU MLP; final LayerNorm. The pooled output is the masked mean of the last
    hidden states, L2-normalized. Defaults are MiniEmbed's; its argument names work as aliases
    (`d_model`, `num_heads`, `num_layers`, `d_ff`, `max_seq_len`).
    """

    model_type = "minitf_encoder"
    # The architecture, not fields (not saved): separate q/k/v projections, the standard LayerNorm, masked
    # attention scores at the lowest float, dropout inside the MLP too (MiniEmbed's).
    fused_qkv = False
    norm_type = "layer_norm"
    attention_mask_value = None
    feed_forward_dropout = True
    attribute_map = {
        "d_model": "hidden_size",
        "num_heads": "num_attention_heads",
        "num_layers": "num_hidden_layers",
        "d_ff": "intermediate_size",
        "max_seq_len": "max_position_embeddings",
    }

    vocab_size: int = 30000
    hidden_size: int = 256
    num_hidden_layers: int = 4
    num_attention_heads: int = 4
    intermediate_size: int = 1024
    max_position_embeddings: int = 128
    position_embedding_type: str = "sinusoidal"
    scale_embeddings: bool = True
    hidden_act: str = "gelu"
    layer_norm_eps: float = 1e-5
    hidden_dropout: float = 0.1
    attention_dropout: float = 0.1
    attention_bias: bool = True
    classifier_dropout: float | None = None
    initializer_range: float = 0.02
    pad_token_id: int | None = 0

    def __post_init__(self, **kwargs) -> None:
        super().__post_init__(**kwargs)
        self.auto_map = {**AUTO_MAP, **(getattr(self, "auto_map", None) or {})}


MiniTFEncoderConfig.register_for_auto_class()

__all__ = ["AUTO_MAP", "MiniTFEncoderConfig"]
