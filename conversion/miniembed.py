"""Convert a MiniEmbed embedding model to `MiniTFEncoderModel` + a fast tokenizer, saved as a folder that is
both a Hugging Face model and a SentenceTransformer (and a Transformer-embedding layer, `TransformerEmbedding`,
to the encoder's embedding weights).

Its help (`hf_minitf.catalog.converters`) says what it reads, what it infers from the weights and what must be given (`minitf convert
miniembed --help` shows it).

Run: `minitf convert miniembed model.safetensors --config config.json --tokenizer tokenizer.json --out DIR`, or
`convert_miniembed`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from hf_minitf.cards import render_model_card
from hf_minitf.conversion.base import (
    ConvertedModel,
    check_given,
    convert_checkpoint,
    count_layers,
    embedding_layer_size,
    num_parameters,
    plan_weights,
    read_json,
    record_original,
    require_architecture,
    require_heads,
    shape_of,
    sinusoidal_length,
)
from hf_minitf.conversion.checkpoint import Checkpoint, ConversionError, open_checkpoint
from hf_minitf.modeling.configuration_minitf_encoder import MiniTFEncoderConfig
from hf_minitf.modeling.modeling_minitf_encoder import MiniTFEncoderModel
from hf_minitf.safety.output_folders import OutputFolder, existing_paths, output_folder
from hf_minitf.sentence_transformers_folder import save_sentence_transformer
from hf_minitf.tokenization.miniembed import miniembed_tokenizer

RULES = [
    (r"embed_tokens\.weight", "token_embedding.weight"),
    (r"layers\.(\d+)\.self_attn_layer_norm\.(weight|bias)", r"layers.\1.norm1.\2"),
    (r"layers\.(\d+)\.self_attn\.q_proj\.(weight|bias)", r"layers.\1.attention.W_q.\2"),
    (r"layers\.(\d+)\.self_attn\.k_proj\.(weight|bias)", r"layers.\1.attention.W_k.\2"),
    (r"layers\.(\d+)\.self_attn\.v_proj\.(weight|bias)", r"layers.\1.attention.W_v.\2"),
    (r"layers\.(\d+)\.self_attn\.o_proj\.(weight|bias)", r"layers.\1.attention.W_o.\2"),
    (r"layers\.(\d+)\.mlp_layer_norm\.(weight|bias)", r"layers.\1.norm2.\2"),
    (r"layers\.(\d+)\.mlp\.fc1\.(weight|bias)", r"layers.\1.feed_forward.linear1.\2"),
    (r"layers\.(\d+)\.mlp\.fc2\.(weight|bias)", r"layers.\1.feed_forward.linear2.\2"),
    (r"norm\.(weight|bias)", r"final_norm.\1"),
]
BUFFERS = [r"positional_encoding\.pe"]


def miniembed_fields(config: Mapping[str, Any]) -> dict[str, Any]:
    """MiniEmbed's constructor arguments from its config.json (flat, or nested under `model_config`/`model`)."""
    for key in ("model_config", "model"):
        if isinstance(config.get(key), Mapping) and "d_model" in config[key]:
            return dict(config[key])
    return dict(config)


def plan_miniembed(
    checkpoint: Checkpoint,
    tokenizer: str | Path | Mapping,
    config: Mapping[str, Any] | None = None,
    num_heads: int | None = None,
    max_length: int | None = None,
    dtype: str = "auto",
) -> ConvertedModel:
    """Plan the conversion of an open MiniEmbed checkpoint (see `minitf convert miniembed --help`)."""
    require_architecture(checkpoint, "miniembed", "MiniEmbed")
    stored = checkpoint.extras.get("config")
    given = miniembed_fields({**(stored if isinstance(stored, Mapping) else {}), **(config or {})})
    vocab_size, hidden_size = shape_of(checkpoint, "token_embedding.weight")
    inferred: dict[str, Any] = dict(
        vocab_size=vocab_size,
        d_model=hidden_size,
        num_layers=count_layers(checkpoint, r"layers\.(\d+)\."),
        d_ff=shape_of(checkpoint, "layers.0.feed_forward.linear1.weight")[0],
    )
    if "positional_encoding.pe" in checkpoint:
        inferred["max_seq_len"] = sinusoidal_length(checkpoint, "positional_encoding.pe", hidden_size)
    check_given(given, inferred, "MiniEmbed config")
    fields = {**given, **inferred}
    for key, value in (("num_heads", num_heads), ("max_seq_len", max_length)):
        if value is not None:
            if fields.get(key) is not None and fields[key] != value:
                raise ConversionError(f"The given {key}={value} contradicts the checkpoint's {key}={fields[key]}.")
            fields[key] = value
    if fields.get("max_seq_len") is None:
        raise ConversionError(
            "The checkpoint has no positional table (positional_encoding.pe) to tell the maximum "
            "length; pass --config with max_seq_len or --max-length."
        )
    heads = require_heads(fields.get("num_heads"), hidden_size, "--config (MiniEmbed's config.json) or --num-heads")
    dropout = float(fields.get("dropout", 0.1))
    encoder_config = MiniTFEncoderConfig(
        vocab_size=vocab_size,
        hidden_size=hidden_size,
        num_hidden_layers=inferred["num_layers"],
        num_attention_heads=heads,
        intermediate_size=inferred["d_ff"],
        max_position_embeddings=fields["max_seq_len"],
        position_embedding_type="sinusoidal",
        scale_embeddings=True,
        hidden_act="gelu",
        layer_norm_eps=1e-5,
        hidden_dropout=dropout,
        attention_dropout=dropout,
        pad_token_id=int(fields.get("pad_token_id", 0)),
    )
    plans = plan_weights(checkpoint, MiniTFEncoderModel, encoder_config, RULES, BUFFERS, dtype)
    record_original(encoder_config, "miniembed")
    try:
        fast_tokenizer = miniembed_tokenizer(tokenizer, max_length=fields["max_seq_len"])
    except (OSError, ValueError) as error:
        raise ConversionError(f"MiniEmbed tokenizer {tokenizer}: {error}") from error
    largest = max(fast_tokenizer.get_vocab().values())
    if largest >= vocab_size:
        raise ConversionError(
            f"The tokenizer has word id {largest}, past the model's vocab_size={vocab_size}; "
            "give the tokenizer.json the model was trained with."
        )
    card = render_model_card(
        "encoder",
        encoder_config,
        title="MiniEmbed (converted)",
        prompt="How to train an embedding model?",
        summary=f"A MiniEmbed sentence-embedding model: {hidden_size}-dimensional, L2-normalized sentence vectors "
        "for semantic similarity, search and clustering, with MiniEmbed's lowercasing word-level tokenizer.",
        origin=f"Converted with `minitf convert miniembed` from `{checkpoint.path.name}` (MiniEmbed, "
        "bhandarisuraz/miniembed, MIT). Token states equal MiniEmbed's `forward` and sentence embeddings its "
        "`encode`, to float32 rounding.",
        notes="Inputs longer than the maximum length are truncated by the tokenizer. A text that is all padding "
        "embeds to the zero vector (MiniEmbed returned NaN).",
        num_parameters=num_parameters(plans),
        original_project="MiniEmbed",
        converter="miniembed",
        source_checkpoint=checkpoint.path,
    )
    inferred["num_heads"] = heads
    return ConvertedModel(
        MiniTFEncoderModel,
        encoder_config,
        plans,
        fast_tokenizer,
        None,
        card,
        inferred,
        save_model=lambda model, tok, folder: save_sentence_transformer(model, tok, folder),
    )


def convert_miniembed(
    checkpoint: str | Path,
    out: str | Path | OutputFolder,
    *,
    tokenizer: str | Path | Mapping,
    config: str | Path | Mapping[str, Any] | None = None,
    num_heads: int | None = None,
    max_length: int | None = None,
    dtype: str = "auto",
    overwrite: bool = False,
    license: str | None = None,
) -> ConvertedModel:
    """Convert a MiniEmbed checkpoint into the Hugging Face + SentenceTransformer folder `out`.
    `license` is the card's (default: the one the original project states, else `other`)."""
    target = output_folder(out, overwrite, existing_paths(checkpoint, tokenizer, config))
    miniembed_config = read_json(config, "MiniEmbed config")
    return convert_checkpoint(
        checkpoint,
        target,
        lambda source: plan_miniembed(source, tokenizer, miniembed_config, num_heads, max_length, dtype),
        license,
    )


def convert_transformer_embedding(
    checkpoint: str | Path, prefix: str = ""
) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """A Transformer-embedding layer's (`TransformerEmbedding`) state_dict as MiniTF encoder embedding weights
    under `prefix`.

    Returns the weights (load them into a larger `MiniTFEncoderModel` with `strict=False`; use prefix "model."
    for `MiniTFEncoderForSequenceClassification`) and the config fields they fix (vocab_size, hidden_size,
    max_position_embeddings, sinusoidal positions, scaled embeddings). The padding row of the embedding
    is the one the encoder's `pad_token_id` must name (the layer's `pad_idx`, 0 by default).
    """
    with open_checkpoint(checkpoint) as source:
        vocab_size, hidden_size = embedding_layer_size(
            source, "transformer-embedding", "Transformer-embedding layer (TransformerEmbedding)"
        )
        length = sinusoidal_length(source, "pe", hidden_size)
        weights = {f"{prefix}embed_tokens.weight": source.get("token_embedding.weight").clone()}
    fields = dict(
        vocab_size=vocab_size,
        hidden_size=hidden_size,
        max_position_embeddings=length,
        position_embedding_type="sinusoidal",
        scale_embeddings=True,
    )
    return weights, fields
