"""Model sizes by family, declared once: what `minitf train FAMILY --preset NAME` builds, and the sizes of the
original projects (FrawdLLM's presets also tell its converter a bare checkpoint's head count).

The families are `gpt` (decoder-only language model), `encoder` (sentence-embedding encoder) and `seq2seq`
(encoder-decoder translation model). Light to import: plain data, no torch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

from hf_minitf.catalog.families import family_named


class FrawdLLMSize(NamedTuple):
    """One of FrawdLLM's ModelConfig presets (its src/model/config.py)."""

    vocab_size: int
    hidden_size: int
    num_layers: int
    num_heads: int
    context_length: int
    rope: bool
    dropout: float = 0.0


# The -llama presets also set use_rmsnorm and use_swiglu, flags FrawdLLM's model code never reads: what it trains
# is LayerNorm + GELU with RoPE.
FRAWDLLM_PRESETS = {
    "tiny": FrawdLLMSize(8192, 256, 6, 8, 256, rope=False),
    "small": FrawdLLMSize(8192, 512, 8, 8, 512, rope=False),
    "base": FrawdLLMSize(8192, 768, 12, 12, 1024, rope=False, dropout=0.1),
    "tiny-llama": FrawdLLMSize(8192, 256, 6, 8, 256, rope=True),
    "small-llama": FrawdLLMSize(8192, 512, 8, 8, 512, rope=True),
    "100m": FrawdLLMSize(32000, 768, 12, 12, 1024, rope=True),
}


@dataclass(frozen=True)
class Preset:
    """A model size: config fields, and the tokenizer kind and vocabulary size it is trained with."""

    description: str
    config: dict[str, Any]
    tokenizer: str | None = None
    vocab_size: int | None = None


def _frawdllm(name: str, size: FrawdLLMSize) -> Preset:
    """A FrawdLLM preset as a MiniTF GPT trained from scratch with a byte-level BPE tokenizer."""
    positions = "RoPE" if size.rope else "learned positions"
    description = (
        f"FrawdLLM {name}: BPE {size.vocab_size}, {size.num_layers} layers x {size.hidden_size}, "
        f"{size.num_heads} heads, context {size.context_length}, {positions}"
        + (f", dropout {size.dropout}" if size.dropout else "")
    )
    config = dict(
        hidden_size=size.hidden_size,
        num_hidden_layers=size.num_layers,
        num_attention_heads=size.num_heads,
        max_position_embeddings=size.context_length,
        position_embedding_type="rope" if size.rope else "learned",
        hidden_dropout=size.dropout,
        attention_dropout=size.dropout,
    )
    return Preset(description, config, tokenizer="bpe", vocab_size=size.vocab_size)


# The encoder's and the translator's tiny size (a translator has as many decoder layers as encoder layers).
QUICKSTART_ENCODER_LAYERS = dict(
    hidden_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    intermediate_size=256,
    max_position_embeddings=64,
    hidden_dropout=0.0,
    attention_dropout=0.0,
)

PRESETS: dict[str, dict[str, Preset]] = {
    "gpt": {
        "tiny": Preset(
            "4 layers x 128, RoPE, context 128, char tokenizer (the quickstart's size)",
            dict(
                hidden_size=128,
                num_hidden_layers=4,
                num_attention_heads=4,
                max_position_embeddings=128,
                position_embedding_type="rope",
            ),
            tokenizer="char",
        ),
        "shakespeare-char": Preset(
            "nanoGPT shakespeare-char: 6 layers x 384, 6 heads, context 256, dropout 0.2, char tokenizer "
            "(65 characters on Tiny Shakespeare)",
            dict(
                hidden_size=384,
                num_hidden_layers=6,
                num_attention_heads=6,
                max_position_embeddings=256,
                position_embedding_type="learned",
                hidden_dropout=0.2,
                attention_dropout=0.2,
            ),
            tokenizer="char",
        ),
        **{f"frawdllm-{name}": _frawdllm(name, size) for name, size in FRAWDLLM_PRESETS.items()},
    },
    "encoder": {
        "tiny": Preset(
            "2 layers x 128, 4 heads, FFN 256, 64 positions (the quickstart's size)",
            QUICKSTART_ENCODER_LAYERS,
            vocab_size=2000,
        ),
        "miniembed-mini": Preset(
            "MiniEmbed mini: word vocabulary 30000, 4 layers x 256, 4 heads, FFN 1024, 128 positions",
            dict(
                hidden_size=256,
                num_hidden_layers=4,
                num_attention_heads=4,
                intermediate_size=1024,
                max_position_embeddings=128,
            ),
            vocab_size=30000,
        ),
    },
    "seq2seq": {
        "tiny": Preset(
            "2+2 layers x 128, 4 heads, FFN 256, 64 positions (the quickstart's size)",
            QUICKSTART_ENCODER_LAYERS,
        ),
        "hkproj": Preset(
            "hkproj pytorch-transformer defaults: d_model 512, 6+6 layers, 8 heads, d_ff 2048, seq_len 350",
            dict(
                hidden_size=512,
                num_hidden_layers=6,
                num_attention_heads=8,
                intermediate_size=2048,
                max_position_embeddings=350,
                label_smoothing=0.1,
            ),
        ),
    },
}


def get_preset(family: str, name: str) -> Preset:
    """The preset `name` of `family` (`gpt`, `encoder`, `seq2seq`), or a ValueError listing the choices."""
    family = family_named(family).name
    if name not in PRESETS[family]:
        raise ValueError(f"unknown {family} preset {name!r}; choose one of {', '.join(PRESETS[family])}")
    return PRESETS[family][name]


__all__ = ["FRAWDLLM_PRESETS", "PRESETS", "FrawdLLMSize", "Preset", "get_preset"]
