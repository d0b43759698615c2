"""Configuration of the MiniTF GPT family: decoder-only causal LMs (the char GPT, FrawdLLM)."""

from __future__ import annotations

from transformers import PreTrainedConfig

# Where each Auto class finds this family in a folder saved with its code (loaded with trust_remote_code=True).
AUTO_MAP = {
    "AutoConfig": "configuration_minitf_gpt.MiniTFGPTConfig",
    "AutoModel": "modeling_minitf_gpt.MiniTFGPTModel",
    "AutoModelForCausalLM": "modeling_minitf_gpt.MiniTFGPTForCausalLM",
}


class MiniTFGPTConfig(PreTrainedConfig):
    """Pre-LN GPT: token embedding, learned or rotary positions, fused-qkv attention (biased when
    `attention_bias`), GELU MLP, final LayerNorm, `lm_head` tied to the token embedding.

    `position_embedding_type="learned"` adds a position table of `max_position_embeddings` rows (inputs
    past it are refused, or with `context_overflow="crop"` cut to their last `max_position_embeddings` tokens, as
    the nanoGPT-style char GPT's sliding-window generate does); `"rope"` rotates queries and keys, with
    `rope_interleaved=True` for FrawdLLM's pairs `(x[2i], x[2i+1])` and `False` for transformers' rotate-half layout.
    """

    model_type = "minitf_gpt"
    # The architecture, not fields (not saved): one fused `qkv_proj` laid out [q | k | v], the standard LayerNorm,
    # masked attention scores at the lowest float, dropout after the MLP only (nanoGPT's), not inside it.
    fused_qkv = True
    norm_type = "layer_norm"
    attention_mask_value = None
    feed_forward_dropout = False
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

    def __post_init__(self, **kwargs) -> None:
        super().__post_init__(**kwargs)
        if self.intermediate_size is None:
            self.intermediate_size = 4 * self.hidden_size
        self.auto_map = {**AUTO_MAP, **(getattr(self, "auto_map", None) or {})}


MiniTFGPTConfig.register_for_auto_class()

__all__ = ["AUTO_MAP", "MiniTFGPTConfig"]
