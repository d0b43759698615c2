"""A MiniTF seq2seq translator as ONNX graphs in optimum's seq2seq layout (the files transformers.js and optimum's
`ORTModelForSeq2SeqLM` read when a model has no merged decoder): an encoder graph, a first decoder step that
computes every layer's cross-attention keys and values from the encoder output once, and a next decoder step that
reads them with the self-attention cache.

| graph | in | out |
|---|---|---|
| `onnx/encoder_model.onnx` | `input_ids`, `attention_mask` (batch_size, encoder_sequence_length) | `last_hidden_state` |
| `onnx/decoder_model.onnx` | `input_ids` (batch_size, decoder_sequence_length), `encoder_attention_mask`, `encoder_hidden_states` | `logits`, `present.{i}.decoder.key/.value`, `present.{i}.encoder.key/.value` |
| `onnx/decoder_with_past_model.onnx` | `input_ids`, `encoder_attention_mask`, `past_key_values.{i}.decoder.key/.value`, `past_key_values.{i}.encoder.key/.value` | `logits`, `present.{i}.decoder.key/.value` |

Keys and values are float32 (batch_size, heads, length, head_dim). The decoder numbers its positions from the
cached length, so no graph takes position ids; the decoder attends causally to all its tokens (no decoder mask:
the runner decodes one translation per call). Each graph is the MiniTF model itself, traced by
`torch.onnx.export(dynamo=True)` with transformers' `EncoderDecoderCache` filled from the inputs, so it computes
the same function for every norm and mask the family has.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from transformers.cache_utils import DynamicCache, DynamicLayer, EncoderDecoderCache

from hf_minitf.catalog.exports import ONNX_TRANSLATOR_GRAPHS, PAST_PREFIX, PRESENT_PREFIX
from hf_minitf.export.onnx_decoder import CACHE_PARTS
from hf_minitf.export.onnx_graph import export_graph

if TYPE_CHECKING:
    from hf_minitf.modeling.modeling_minitf_seq2seq import MiniTFSeq2SeqForConditionalGeneration

ENCODER_FILE = ONNX_TRANSLATOR_GRAPHS["encoder"]
DECODER_FILE = ONNX_TRANSLATOR_GRAPHS["decoder"]
DECODER_WITH_PAST_FILE = ONNX_TRANSLATOR_GRAPHS["decoder_with_past"]
ENCODER_INPUTS = ("input_ids", "attention_mask")
DECODER_INPUTS = ("input_ids", "encoder_attention_mask")
CARD_TEMPLATE = "onnx_translator_export.md"  # in model_cards/
CACHE_SIDES = ("decoder", "encoder")  # self-attention, cross-attention
# The generation settings the ONNX runner reproduces (beam width, length penalty, early stopping and the lengths
# are read by it); a generation config that sets any of these to another value is refused, naming it.
DEFAULT_GENERATION = {
    "do_sample": False,
    "repetition_penalty": 1.0,
    "encoder_repetition_penalty": 1.0,
    "no_repeat_ngram_size": 0,
    "encoder_no_repeat_ngram_size": 0,
    "min_length": 0,
    "min_new_tokens": None,
    "bad_words_ids": None,
    "forced_bos_token_id": None,
    "forced_eos_token_id": None,
    "suppress_tokens": None,
    "begin_suppress_tokens": None,
    "exponential_decay_length_penalty": None,
    "num_return_sequences": 1,
}


def cache_names(prefix: str, num_layers: int, sides: tuple[str, ...] = CACHE_SIDES) -> list[str]:
    """`{prefix}{layer}.{side}.{key|value}` for every layer, in the graphs' order."""
    return [f"{prefix}{layer}.{side}.{part}" for layer in range(num_layers) for side in sides for part in CACHE_PARTS]


def past_names(num_layers: int) -> list[str]:
    """The next decoder step's cache inputs: each layer's self-attention and cross-attention keys and values."""
    return cache_names(PAST_PREFIX, num_layers)


def present_names(num_layers: int, sides: tuple[str, ...] = CACHE_SIDES) -> list[str]:
    """A decoder step's cache outputs (the first step's hold both sides, the next step's the decoder side)."""
    return cache_names(PRESENT_PREFIX, num_layers, sides)


class EncoderStates(torch.nn.Module):
    """The encoder's last hidden state: the encoder graph."""

    def __init__(self, model: MiniTFSeq2SeqForConditionalGeneration) -> None:
        super().__init__()
        self.encoder = model.model.encoder

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        return self.encoder(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state


def _layer_tensors(cache: DynamicCache) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Each layer's (keys, values) of a filled cache."""
    tensors = []
    for layer in cache.layers:
        # A MiniTF seq2seq config gives one full-attention DynamicLayer per layer, holding tensors once updated.
        assert isinstance(layer, DynamicLayer) and layer.keys is not None and layer.values is not None
        tensors.append((layer.keys, layer.values))
    return tensors


class FirstDecoderStep(torch.nn.Module):
    """The decoder on an empty cache: logits, and each layer's self-attention and cross-attention (keys, values)."""

    def __init__(self, model: MiniTFSeq2SeqForConditionalGeneration) -> None:
        super().__init__()
        self.model = model

    def forward(self, input_ids: torch.Tensor, encoder_attention_mask: torch.Tensor, encoder_hidden_states):
        config = self.model.config
        cache = EncoderDecoderCache(DynamicCache(config=config), DynamicCache(config=config))
        logits = self.model(
            encoder_outputs=(encoder_hidden_states,),
            attention_mask=encoder_attention_mask,
            decoder_input_ids=input_ids,
            cache=cache,
            use_cache=True,
        ).logits
        layers = zip(_layer_tensors(cache.self_attention_cache), _layer_tensors(cache.cross_attention_cache))
        return logits, [(*own, *cross) for own, cross in layers]


class NextDecoderStep(torch.nn.Module):
    """The decoder after cached tokens: the cross-attention keys and values come in with the cache (nothing
    recomputes them from the encoder output); logits and each layer's extended self-attention (keys, values) out."""

    def __init__(self, model: MiniTFSeq2SeqForConditionalGeneration) -> None:
        super().__init__()
        self.model = model

    def forward(self, input_ids: torch.Tensor, encoder_attention_mask: torch.Tensor, past: list):
        config = self.model.config
        cache = EncoderDecoderCache(DynamicCache(config=config), DynamicCache(config=config))
        for layer, (key, value, cross_key, cross_value) in enumerate(past):
            cache.self_attention_cache.update(key, value, layer)
            cache.cross_attention_cache.update(cross_key, cross_value, layer)
            cache.is_updated[layer] = True
        cross_key = past[0][2]
        # The decoder reads the encoder output's shape only (its masks); the cached cross keys and values stand for it.
        shape_only = cross_key.new_zeros(cross_key.shape[0], cross_key.shape[2], config.hidden_size)
        logits = self.model(
            encoder_outputs=(shape_only,),
            attention_mask=encoder_attention_mask,
            decoder_input_ids=input_ids,
            cache=cache,
            use_cache=True,
        ).logits
        return logits, _layer_tensors(cache.self_attention_cache)


def export_translator_graphs(model: MiniTFSeq2SeqForConditionalGeneration, folder: Path) -> None:
    """The three graphs of `ONNX_TRANSLATOR_GRAPHS` under `folder`: batch, source, target and cached lengths dynamic."""
    config = model.config
    layers, heads = config.num_hidden_layers, config.num_attention_heads
    head_dim = config.hidden_size // heads
    # Traced at sizes above 1 (torch.export fixes axes of size 0 or 1); the graphs run at any size.
    batch, source, target, cached = 2, 5, 3, 4
    input_ids = torch.arange(batch * source).reshape(batch, source) % config.src_vocab_size
    attention_mask = torch.ones(batch, source, dtype=torch.long)
    decoder_ids = torch.arange(batch * target).reshape(batch, target) % config.vocab_size
    states = torch.zeros(batch, source, config.hidden_size)
    past = [
        (*(torch.zeros(batch, heads, cached, head_dim) for _ in CACHE_PARTS),)
        + (*(torch.zeros(batch, heads, source, head_dim) for _ in CACHE_PARTS),)
        for _ in range(layers)
    ]
    batch_size = torch.export.Dim("batch_size")
    source_axes = {0: batch_size, 1: torch.export.Dim("encoder_sequence_length", max=config.max_position_embeddings)}
    target_axes = {0: batch_size, 1: torch.export.Dim("decoder_sequence_length")}
    own_axes = {0: batch_size, 2: torch.export.Dim("past_decoder_sequence_length")}
    cross_axes = {0: batch_size, 2: source_axes[1]}
    (folder / ENCODER_FILE).parent.mkdir(parents=True, exist_ok=True)
    export_graph(
        EncoderStates(model),
        (input_ids, attention_mask),
        list(ENCODER_INPUTS),
        ["last_hidden_state"],
        {"input_ids": source_axes, "attention_mask": source_axes},
        folder / ENCODER_FILE,
    )
    export_graph(
        FirstDecoderStep(model),
        (decoder_ids, attention_mask, states),
        [*DECODER_INPUTS, "encoder_hidden_states"],
        ["logits", *present_names(layers)],
        {"input_ids": target_axes, "encoder_attention_mask": source_axes, "encoder_hidden_states": source_axes},
        folder / DECODER_FILE,
    )
    export_graph(
        NextDecoderStep(model),
        (decoder_ids, attention_mask, past),
        [*DECODER_INPUTS, *past_names(layers)],
        ["logits", *present_names(layers, ("decoder",))],
        {
            "input_ids": target_axes,
            "encoder_attention_mask": source_axes,
            "past": [(own_axes, own_axes, cross_axes, cross_axes) for _ in range(layers)],
        },
        folder / DECODER_WITH_PAST_FILE,
    )


def check_translator(model: MiniTFSeq2SeqForConditionalGeneration) -> None:
    """Refuse what the cached graphs and the ONNX runner's search cannot reproduce, naming the field."""
    generation = model.generation_config
    if generation.use_cache is False:
        raise ValueError(
            "generation_config.use_cache=False: this model's translations need the whole target prefix recomputed "
            "at each step (hkproj's -1e9 mask overflowing under its first norm, in an untrained model), which the "
            "cached decoder graphs cannot reproduce. Export a trained model whose generation config caches."
        )
    for field, default in DEFAULT_GENERATION.items():
        value = getattr(generation, field, None)
        if value is not None and value != default:
            raise ValueError(
                f"generation_config.{field}={value!r}: the ONNX translator runs greedy and beam search with "
                f"num_beams, length_penalty and early_stopping only; set {field} to {default!r} to export it."
            )
    for field in ("eos_token_id", "decoder_start_token_id"):
        if getattr(generation, field, None) is None:
            raise ValueError(f"generation_config.{field} is not set: the translator starts and stops decoding at it.")


def write_translator_folder(model: MiniTFSeq2SeqForConditionalGeneration, tokenizer: Any, work: Path) -> None:
    """The translator's folder but for the quantized variants and the card: the paired tokenizer (its files and
    class, so that it loads without the model), the generation config and the three graphs."""
    check_translator(model)
    tokenizer.save_pretrained(work)
    model.generation_config.save_pretrained(work)
    export_translator_graphs(model, work)


def write_translator_card(
    work: Path, out: Path, config: Any, files: list[str], carried: dict, named: dict[str, Any], examples: list[str]
) -> None:
    """README.md of the translator's folder being written in `work` (to become `out`), from
    model_cards/onnx_translator_export.md, with the source card's license and held-out figures (`carried`), the
    source named as `named` says (`export_card`'s family, source_repo and source_revision) and its example
    sentences (`examples`)."""
    from hf_minitf.cards import export_card

    export_card(
        CARD_TEMPLATE,
        library_name="onnx",
        pipeline_tag="translation",
        tags=["onnx", "seq2seq"],
        carried=carried,
        **named,
        model_title=f"{out.name}: a MiniTF seq2seq model as ONNX",
        config=config,
        head_dim=config.hidden_size // config.num_attention_heads,
        files=files,
        examples=examples,
    ).save(work / "README.md")


__all__ = [
    "CACHE_SIDES",
    "DECODER_FILE",
    "DECODER_INPUTS",
    "DECODER_WITH_PAST_FILE",
    "ENCODER_FILE",
    "ENCODER_INPUTS",
    "export_translator_graphs",
    "past_names",
    "present_names",
    "write_translator_card",
    "write_translator_folder",
]
