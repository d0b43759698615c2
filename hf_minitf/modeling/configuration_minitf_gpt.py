"""Configuration of the MiniTF GPT family: decoder-only causal LMs (the char GPT, FrawdLLM)."""

from __future__ import annotations

from .configuration_minitf import (
    LM_FIELD_CHECKS,
    SHARED_FIELD_CHECKS,
    MiniTFConfig,
    boolean,
    check_heads,
    check_token_ids_in_vocabulary,
    choice,
    integer,
    number,
)
from .configuration_minitf_limits import check_model_fits

POSITION_EMBEDDING_TYPES = ("learned", "rope")
CONTEXT_OVERFLOW_MODES = ("error", "crop")

# Where each Auto class finds this family in a folder saved with its code (loaded with trust_remote_code=True).
AUTO_MAP = {
    "AutoConfig": "configuration_minitf_gpt.MiniTFGPTConfig",
    "AutoModel": "modeling_minitf_gpt.MiniTFGPTModel",
    "AutoModelForCausalLM": "modeling_minitf_gpt.MiniTFGPTForCausalLM",
}

# What each field accepts, checked whenever it is set (see configuration_minitf).
FIELD_CHECKS = {
    **SHARED_FIELD_CHECKS,
    **LM_FIELD_CHECKS,
    "intermediate_size": integer(optional=True),  # None: 4 * hidden_size
    "position_embedding_type": choice(POSITION_EMBEDDING_TYPES),
    "context_overflow": choice(CONTEXT_OVERFLOW_MODES),
    "rope_theta": number(0, above=True),
    "rope_interleaved": boolean(),
}


class MiniTFGPTConfig(MiniTFConfig):
    """Pre-LN GPT: token embedding, learned or rotary positions, fused-qkv attention (biased when
    `attention_bias`), GELU MLP,
    final LayerNorm, `lm_head` tied to the token embedding.

    `position_embedding_type="learned"` adds a position table of `max_position_embeddings` rows (inputs
    past it are refused, or with `context_overflow="crop"` cut to their last `max_position_embeddings` tokens, as
    the nanoGPT-style char GPT's sliding-window generate does); `"rope"` rotates queries and keys, with
    `rope_interleaved=True` for FrawdLLM's pairs `(x[2i], x[2i+1])` and `False` for transformers' rotate-half layout.

    Every field is checked when set (types, ranges, names) and the whole config once built (heads divide the
    hidden size, token ids inside the vocabulary): a bad value is a ValueError naming the field and what it takes.
    """

    model_type = "minitf_gpt"
    field_checks = FIELD_CHECKS
    family_auto_map = AUTO_MAP
    fused_qkv = True
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

    def complete_fields(self) -> None:
        if self.intermediate_size is None:
            self.intermediate_size = 4 * self.hidden_size
        check_model_fits(self)  # before anything whose cost grows with the sizes
        head_dim = check_heads(type(self).__name__, self.hidden_size, self.num_attention_heads)
        if self.position_embedding_type == "rope" and head_dim % 2 != 0:
            raise ValueError(
                f"Rotary positions need an even head dimension, but hidden_size / num_attention_heads = {head_dim}; "
                "change hidden_size or num_attention_heads, or use position_embedding_type='learned'."
            )
        check_token_ids_in_vocabulary(
            self, ("pad_token_id", "bos_token_id", "eos_token_id"), self.vocab_size, "vocabulary"
        )
        # transformers' rotary scaling (it keeps `rope_scaling` and `rope_parameters` as one): not MiniTF's to ignore
        scaling = getattr(self, "rope_parameters", None) or getattr(self, "rope_scaling", None)
        kind = scaling.get("rope_type", scaling.get("type", "default")) if isinstance(scaling, dict) else scaling
        if scaling is not None and kind != "default":
            raise ValueError(
                f"{type(self).__name__}: rope_parameters (rope_scaling) {scaling!r} asks for {kind!r} rotary "
                "scaling, which MiniTF's positions do not implement (the model would ignore it and give the unscaled "
                "logits); remove rope_parameters and rope_scaling from config.json."
            )


MiniTFGPTConfig.register_for_auto_class()

__all__ = ["MiniTFGPTConfig"]
