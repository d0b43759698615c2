"""Configuration of the MiniTF GPT family: decoder-only causal LMs (the char GPT, FrawdLLM)."""

from __future__ import annotations

from transformers import PreTrainedConfig

POSITION_EMBEDDING_TYPES = ("learned", "rope")
CONTEXT_OVERFLOW_MODES = ("error", "crop")

# Where each Auto class finds this family in a folder saved with its code (loaded with trust_remote_code=True).
AUTO_MAP = {
    "AutoConfig": "configuration_minitf_gpt.MiniTFGPTConfig",
    "AutoModel": "modeling_minitf_gpt.MiniTFGPTModel",
    "AutoModelForCausalLM": "modeling_minitf_gpt.MiniTFGPTForCausalLM",
}


class MiniTFGPTConfig(PreTrainedConfig):
    """Pre-LN GPT: token embedding, learned or rotary positions, fused-qkv attention with bias, GELU MLP,
    final LayerNorm, `lm_head` tied to the token embedding.

    `position_embedding_type="learned"` adds a position table of `max_position_embeddings` rows (inputs
    past it are refused, or with `context_overflow="crop"` cut to their last `max_position_embeddings` tokens, as
    seed 004's sliding-window generate does); `"rope"` rotates queries and keys, with `rope_interleaved=True` for FrawdLLM's
    pairs `(x[2i], x[2i+1])` and `False` for transformers' rotate-half layout.
    """

    model_type = "minitf_gpt"
    keys_to_ignore_at_inference = ["cache", "past_key_values"]
    attribute_map = {
        "n_embd": "hidden_size",
        "n_layer": "num_hidden_layers",
        "n_head": "num_attention_heads",
        "n_positions": "max_position_embeddings",
    }

    vocab_size: int = 8192
    hidden_size: int = 256
    num_hidden_layers: int = 6
    num_attention_heads: int = 8
    intermediate_size: int | None = None
    max_position_embeddings: int = 256
    position_embedding_type: str = "learned"
    context_overflow: str = "error"
    rope_theta: float = 10000.0
    rope_interleaved: bool = True
    hidden_act: str = "gelu"
    layer_norm_eps: float = 1e-5
    hidden_dropout: float = 0.0
    attention_dropout: float = 0.0
    attention_bias: bool = True
    initializer_range: float = 0.02
    use_cache: bool = True
    tie_word_embeddings: bool = True
    pad_token_id: int | None = None
    bos_token_id: int | None = None
    eos_token_id: int | list[int] | None = None

    def __post_init__(self, **kwargs):
        super().__post_init__(**kwargs)
        self.auto_map = {**AUTO_MAP, **(getattr(self, "auto_map", None) or {})}
        if self.intermediate_size is None:
            self.intermediate_size = 4 * self.hidden_size
        if self.position_embedding_type not in POSITION_EMBEDDING_TYPES:
            raise ValueError(
                f"position_embedding_type={self.position_embedding_type!r} is unknown; "
                f"choose one of {POSITION_EMBEDDING_TYPES}."
            )
        if self.context_overflow not in CONTEXT_OVERFLOW_MODES:
            raise ValueError(
                f"context_overflow={self.context_overflow!r} is unknown; choose one of {CONTEXT_OVERFLOW_MODES}."
            )
        if self.hidden_size % self.num_attention_heads != 0:
            raise ValueError(
                f"hidden_size={self.hidden_size} is not divisible by num_attention_heads="
                f"{self.num_attention_heads}; choose a head count that divides it."
            )
        head_dim = self.hidden_size // self.num_attention_heads
        if self.position_embedding_type == "rope" and head_dim % 2 != 0:
            raise ValueError(
                f"Rotary positions need an even head dimension, but hidden_size / num_attention_heads = {head_dim}; "
                "change hidden_size or num_attention_heads, or use position_embedding_type='learned'."
            )
        for name in ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                     "max_position_embeddings", "intermediate_size"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}.")


__all__ = ["MiniTFGPTConfig"]
