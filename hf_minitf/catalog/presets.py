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
    """A model size: what it is for, config fields, and the tokenizer kind and vocabulary size it is trained with."""

    description: str
    config: dict[str, Any]
    tokenizer: str | None = None
    vocab_size: int | None = None


def _frawdllm(name: str, size: FrawdLLMSize) -> Preset:
    """A FrawdLLM preset as a MiniTF GPT trained from scratch with a byte-level BPE tokenizer."""
    positions = "RoPE" if size.rope else "learned positions"
    description = (
        f"FrawdLLM's {name} size ({positions}" + (f", dropout {size.dropout}" if size.dropout else "") + "): a model "
        "the size of its checkpoints (`minitf convert frawdllm` converts those)"
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
            "the smallest: a first run on a CPU (RoPE; the quickstart's size)",
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
            "nanoGPT's shakespeare-char model (learned positions, dropout 0.2): its Tiny Shakespeare run, on a GPU",
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
            "the smallest: a first run on a CPU (the quickstart's size)",
            QUICKSTART_ENCODER_LAYERS,
            vocab_size=2000,
        ),
        "miniembed-mini": Preset(
            "MiniEmbed's mini size: sentence embeddings trained on a real corpus of pairs",
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
            "the smallest: a first run on a CPU (the quickstart's size)",
            QUICKSTART_ENCODER_LAYERS,
        ),
        "hkproj": Preset(
            "hkproj pytorch-transformer's defaults (label smoothing 0.1): a real translation corpus, on a GPU",
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


def _body_parameters(family: str, fields: dict[str, Any]) -> int:
    """About how many parameters a preset's layers hold besides its embeddings (which grow with the vocabulary the
    data gives): per layer 4 h^2 of attention and 2 h f of MLP (f: the preset's FFN size, a GPT's default 4 h), a
    translator's decoder layers 4 h^2 more of cross-attention; biases and norms left out (under 1% for these
    sizes; test_presets holds the figure to the built models')."""
    hidden = fields["hidden_size"]
    ffn = fields.get("intermediate_size") or 4 * hidden
    layer = 4 * hidden * hidden + 2 * hidden * ffn
    decoder = layer + 4 * hidden * hidden if family == "seq2seq" else 0
    return fields["num_hidden_layers"] * (layer + decoder)


TOKENIZER_UNITS = {"char": "characters", "bpe": "BPE", None: "words"}
"""What a preset's tokenizer kind (None: the family's word-level tokenizer) makes its tokens of."""


class PresetRow(NamedTuple):
    """One preset as `minitf presets` and the README's table show it."""

    name: str
    layers: str
    hidden_size: int
    heads: int
    context: int
    vocabulary: str
    parameters: str
    purpose: str


def preset_rows(family: str) -> list[PresetRow]:
    """The presets of `family` as table rows: sizes from their config fields, the vocabulary (a number when the
    preset fixes it, else what the data gives), the parameters besides the embeddings, and what each is for."""
    rows = []
    for name, preset in PRESETS[family_named(family).name].items():
        fields = preset.config
        layers = fields["num_hidden_layers"]
        units = TOKENIZER_UNITS[preset.tokenizer]
        vocabulary = f"{units} {preset.vocab_size}" if preset.vocab_size is not None else f"{units} of the data"
        rows.append(
            PresetRow(
                name,
                f"{layers}+{layers}" if family == "seq2seq" else str(layers),
                fields["hidden_size"],
                fields["num_attention_heads"],
                fields["max_position_embeddings"],
                vocabulary,
                f"{_body_parameters(family, fields) / 1e6:.3g} M",
                preset.description,
            )
        )
    return rows


PRESET_COLUMNS = ("preset", "layers", "hidden", "heads", "context", "vocabulary", "parameters*", "what it is for")
PRESET_NOTE = "* besides the embeddings (vocabulary x hidden, and learned positions), which grow with the vocabulary"


def presets_markdown() -> str:
    """Every family's presets as Markdown tables (the README's, held equal to this by a test)."""
    parts = []
    for family in PRESETS:
        lines = [
            f"`minitf train {family} --preset NAME`:",
            "",
            "| " + " | ".join(PRESET_COLUMNS) + " |",
            "|" + "---|" * len(PRESET_COLUMNS),
        ]
        lines += ["| " + " | ".join([f"`{row.name}`", *map(str, row[1:])]) + " |" for row in preset_rows(family)]
        parts.append("\n".join(lines))
    return "\n\n".join(parts) + f"\n\n\\{PRESET_NOTE}\n"  # \* : a star, not a list item


def get_preset(family: str, name: str) -> Preset:
    """The preset `name` of `family` (`gpt`, `encoder`, `seq2seq`), or a ValueError listing the choices."""
    family = family_named(family).name
    if name not in PRESETS[family]:
        raise ValueError(f"unknown {family} preset {name!r}; choose one of {', '.join(PRESETS[family])}")
    return PRESETS[family][name]


__all__ = [
    "FRAWDLLM_PRESETS",
    "PRESETS",
    "PRESET_COLUMNS",
    "PRESET_NOTE",
    "FrawdLLMSize",
    "Preset",
    "PresetRow",
    "get_preset",
    "preset_rows",
    "presets_markdown",
]
