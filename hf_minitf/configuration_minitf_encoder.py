"""Configuration of the MiniTF encoder family: the MiniEmbed text-embedding encoder (seeds 000 and 001)."""

from __future__ import annotations

from transformers import PreTrainedConfig

POSITION_EMBEDDING_TYPES = ("sinusoidal", "learned")

# Where each Auto class finds this family in a folder saved with its code (loaded with trust_remote_code=True).
AUTO_MAP = {
    "AutoConfig": "configuration_minitf_encoder.MiniTFEncoderConfig",
    "AutoModel": "modeling_minitf_encoder.MiniTFEncoderModel",
    "AutoModelForSequenceClassification": "modeling_minitf_encoder.MiniTFEncoderForSequenceClassification",
}


class MiniTFEncoderConfig(PreTrainedConfig):
    """Pre-LN transformer encoder for sentence embeddings.

    Token embedding (row `pad_token_id` kept at zero) times sqrt(hidden_size) when `scale_embeddings`, plus
    sinusoidal (sin on even, cos on odd features) or learned positions; pre-LN layers with biased q/k/v/o
    projections and an exact-GELU MLP; final LayerNorm. The pooled output is the masked mean of the last
    hidden states, L2-normalized. Defaults are MiniEmbed's (seed 000); its argument names work as aliases
    (`d_model`, `num_heads`, `num_layers`, `d_ff`, `max_seq_len`).
    """

    model_type = "minitf_encoder"
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

    def __post_init__(self, **kwargs):
        super().__post_init__(**kwargs)
        self.auto_map = {**AUTO_MAP, **(getattr(self, "auto_map", None) or {})}
        if self.position_embedding_type not in POSITION_EMBEDDING_TYPES:
            raise ValueError(
                f"position_embedding_type={self.position_embedding_type!r} is unknown; "
                f"choose one of {POSITION_EMBEDDING_TYPES}."
            )
        for name in ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                     "max_position_embeddings", "intermediate_size"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}.")
        if self.hidden_size % self.num_attention_heads != 0:
            raise ValueError(
                f"hidden_size={self.hidden_size} is not divisible by num_attention_heads="
                f"{self.num_attention_heads}; choose a head count that divides it."
            )
        if self.pad_token_id is not None and not 0 <= self.pad_token_id < self.vocab_size:
            raise ValueError(
                f"pad_token_id={self.pad_token_id} is outside the vocabulary (vocab_size={self.vocab_size})."
            )


__all__ = ["MiniTFEncoderConfig"]
