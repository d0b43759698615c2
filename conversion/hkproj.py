"""Convert an hkproj pytorch-transformer translation model (its early version and the later ones) to
`MiniTFSeq2SeqForConditionalGeneration` + the paired source/target tokenizer.

Its help (`hf_minitf.catalog.converters`) says what it reads, what it infers from the weights (the norm variant included) and what must be
given, what the model returns and when generation recomputes the prefix (`minitf convert hkproj --help` shows it).

Run: `minitf convert hkproj tmodel_19.pt --source-tokenizer tokenizer_en.json --target-tokenizer tokenizer_it.json
--num-heads 8 --out DIR`, or `convert_hkproj`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from transformers import GenerationConfig

from hf_minitf.cards import render_model_card
from hf_minitf.catalog.limits import HKPROJ_NORM_TYPES as NORM_TYPES
from hf_minitf.conversion.base import (
    ConvertedModel,
    Rule,
    check_given,
    convert_checkpoint,
    count_layers,
    num_parameters,
    plan_weights,
    read_json,
    record_original,
    require_architecture,
    require_heads,
    shape_of,
    sinusoidal_length,
    tokenizer_record,
)
from hf_minitf.conversion.checkpoint import Checkpoint, ConversionError
from hf_minitf.modeling.configuration_minitf_seq2seq import MiniTFSeq2SeqConfig
from hf_minitf.modeling.modeling_minitf_seq2seq import MiniTFSeq2SeqForConditionalGeneration
from hf_minitf.modeling.tokenization_minitf_seq2seq import MiniTFSeq2SeqTokenizer
from hf_minitf.safety.output_folders import OutputFolder, existing_paths, output_folder

BUFFERS = [r"src_pos\.pe", r"tgt_pos\.pe"]
# Scalar norm gains below this can only come from training the early version's `std * eps` norm (with `std + eps` they
# would scale every sublayer input down to nothing).
SMALL_GAIN = 1e-2


def hkproj_rules(projection: str) -> list[Rule]:
    """Key map onto MiniTFSeq2SeqForConditionalGeneration (`projection`: "project" in the early version, "proj"
    later)."""
    rules: list[Rule] = [
        (r"model\.encoder\.embed_tokens\.weight", "src_embed.embedding.weight"),
        (r"model\.decoder\.embed_tokens\.weight", "tgt_embed.embedding.weight"),
        (r"lm_head\.(weight|bias)", rf"projection_layer.{projection}.\1"),
    ]
    norms = {
        "encoder": ("self_attn_layer_norm", "mlp_layer_norm"),
        "decoder": ("self_attn_layer_norm", "cross_attn_layer_norm", "mlp_layer_norm"),
    }
    attention = {"self_attn": "self_attention_block", "cross_attn": "cross_attention_block"}
    for stack, layer_norms in norms.items():
        layer = rf"model\.{stack}\.layers\.(\d+)\."
        original = rf"{stack}.layers.\1."
        for index, norm in enumerate(layer_norms):
            rules += [
                (rf"{layer}{norm}\.weight", rf"{original}residual_connections.{index}.norm.alpha"),
                (rf"{layer}{norm}\.bias", rf"{original}residual_connections.{index}.norm.bias"),
            ]
        for target, block in attention.items():
            rules.append((rf"{layer}{target}\.(q|k|v|o)_proj\.(weight|bias)", rf"{original}{block}.w_\2.\3"))
        rules += [
            (rf"{layer}mlp\.fc1\.(weight|bias)", rf"{original}feed_forward_block.linear_1.\2"),
            (rf"{layer}mlp\.fc2\.(weight|bias)", rf"{original}feed_forward_block.linear_2.\2"),
            (rf"model\.{stack}\.norm\.weight", f"{stack}.norm.alpha"),
            (rf"model\.{stack}\.norm\.bias", f"{stack}.norm.bias"),
        ]
    return rules


def largest_norm_gain(checkpoint: Checkpoint) -> float:
    """The largest |gain| of the checkpoint's LayerNormalization modules."""
    gain_keys = [key for key in checkpoint.keys() if key.endswith("norm.alpha")]
    if not gain_keys:
        raise ConversionError(f"{checkpoint.path} has no LayerNormalization gains (*.norm.alpha).")
    return max(checkpoint.get(key).abs().max().item() for key in gain_keys)


def infer_norm_type(checkpoint: Checkpoint, hidden_size: int, norm_type: str) -> str:
    """The norm formula: per-feature gains say hkproj's last version; tiny scalar gains say the early version."""
    gain = largest_norm_gain(checkpoint)
    sizes = {checkpoint.shape(key) for key in checkpoint.keys() if key.endswith("norm.alpha")}
    found: str | None  # the norm type the gains say, None where they fit two
    if sizes == {(hidden_size,)}:
        found = "per_feature_std_plus_eps"
    elif sizes == {(1,)}:
        found = "scalar_std_times_eps" if gain < SMALL_GAIN else None
    else:
        raise ConversionError(
            f"{checkpoint.path}: the norm gains have shapes {sorted(sizes)}; expected all (1,) or all ({hidden_size},)."
        )
    if norm_type == "auto":
        if found is None:
            raise ConversionError(
                "The norm gains are near 1, which fits both the early version's LayerNormalization (divides by "
                "std * eps; an untrained model) and hkproj's fix (divides by std + eps); the weights cannot tell which "
                "code made them. Pass --norm-type scalar_std_times_eps (`/ (std * self.eps)` in the model's code) or "
                "scalar_std_plus_eps (`/ (std + self.eps)`)."
            )
        return found
    if norm_type not in NORM_TYPES:
        raise ConversionError(f"norm_type={norm_type!r} is unknown; choose one of {NORM_TYPES}.")
    if (norm_type == "per_feature_std_plus_eps") != (found == "per_feature_std_plus_eps"):
        raise ConversionError(f"norm_type={norm_type} does not fit the checkpoint's gains of shape {sorted(sizes)[0]}.")
    if found == "scalar_std_times_eps" and norm_type != found:
        raise ConversionError(
            f"norm_type={norm_type} does not fit gains below {SMALL_GAIN}, which only the early "
            "version's std * eps norm produces."
        )
    return norm_type


def pair_tokenizer(
    source: str | Path, target: str | Path, src_vocab_size: int, tgt_vocab_size: int, max_length: int
) -> MiniTFSeq2SeqTokenizer:
    """The paired tokenizer from hkproj's two files, checked against the model's vocabularies."""
    try:
        tokenizer = MiniTFSeq2SeqTokenizer(
            source_tokenizer_file=str(source), target_tokenizer_file=str(target), model_max_length=max_length
        )
    except Exception as error:
        raise ConversionError(f"Tokenizers {source}, {target}: {error}") from error
    for side, size, limit in (
        ("source", tokenizer.source_vocab_size, src_vocab_size),
        ("target", tokenizer.target_vocab_size, tgt_vocab_size),
    ):
        if size > limit:
            raise ConversionError(
                f"The {side} tokenizer has {size} tokens but the model's {side} vocabulary {limit}; "
                "give the tokenizer files the model was trained with (and in the right order)."
            )
    return tokenizer


def plan_hkproj(
    checkpoint: Checkpoint,
    source_tokenizer: str | Path,
    target_tokenizer: str | Path,
    num_heads: int | None = None,
    norm_type: str = "auto",
    config: Mapping[str, Any] | None = None,
    max_length: int | None = None,
    dtype: str = "auto",
) -> ConvertedModel:
    """Plan the conversion of an open hkproj checkpoint (see `minitf convert hkproj --help`)."""
    require_architecture(checkpoint, "hkproj", "hkproj pytorch-transformer")
    given = dict(config or {})
    src_vocab, d_model = shape_of(checkpoint, "src_embed.embedding.weight")
    tgt_vocab = shape_of(checkpoint, "tgt_embed.embedding.weight")[0]
    layers = count_layers(checkpoint, r"encoder\.layers\.(\d+)\.")
    if count_layers(checkpoint, r"decoder\.layers\.(\d+)\.") != layers:
        raise ConversionError(
            f"{checkpoint.path}: the encoder and decoder have different layer counts; "
            "MiniTF seq2seq uses one count for both."
        )
    inferred: dict[str, Any] = dict(
        src_vocab_size=src_vocab,
        tgt_vocab_size=tgt_vocab,
        d_model=d_model,
        N=layers,
        d_ff=shape_of(checkpoint, "encoder.layers.0.feed_forward_block.linear_1.weight")[0],
    )
    for key, name in (("src_pos.pe", "src_seq_len"), ("tgt_pos.pe", "tgt_seq_len")):
        if key in checkpoint:
            inferred[name] = sinusoidal_length(checkpoint, key, d_model)
    check_given(given, inferred, "build_transformer arguments")
    fields = {**given, **inferred}
    heads = require_heads(
        num_heads, d_model, "--num-heads (hkproj's train.py uses build_transformer's default, 8)", fields.get("h")
    )
    lengths = [fields[name] for name in ("src_seq_len", "tgt_seq_len") if fields.get(name) is not None]
    max_positions = max_length or (max(lengths) if lengths else None)
    if max_positions is None:
        raise ConversionError(
            "The checkpoint has no positional tables (src_pos.pe, tgt_pos.pe) to tell the maximum "
            "length; pass --max-length (the config's seq_len)."
        )
    projection = "proj" if "projection_layer.proj.weight" in checkpoint else "project"
    norm = infer_norm_type(checkpoint, d_model, norm_type)
    tokenizer = pair_tokenizer(source_tokenizer, target_tokenizer, src_vocab, tgt_vocab, max_positions)
    specials = {
        "pad_token_id": tokenizer.pad_token_id,
        "bos_token_id": tokenizer.bos_token_id,
        "eos_token_id": tokenizer.eos_token_id,
    }
    seq2seq_config = MiniTFSeq2SeqConfig(
        src_vocab_size=src_vocab,
        vocab_size=tgt_vocab,
        hidden_size=d_model,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        intermediate_size=inferred["d_ff"],
        max_position_embeddings=max_positions,
        hidden_act="relu",
        hidden_dropout=float(fields.get("dropout", 0.1)),
        attention_dropout=float(fields.get("dropout", 0.1)),
        norm_type=norm,
        layer_norm_eps=1e-6,
        attention_bias="encoder.layers.0.self_attention_block.w_q.bias" in checkpoint,
        attention_mask_value=-1e9,
        scale_embedding=True,
        lm_head_bias=f"projection_layer.{projection}.bias" in checkpoint,
        output_log_softmax=norm != "per_feature_std_plus_eps",
        decoder_start_token_id=specials["bos_token_id"],
        **specials,
    )
    plans = plan_weights(
        checkpoint, MiniTFSeq2SeqForConditionalGeneration, seq2seq_config, hkproj_rules(projection), BUFFERS, dtype
    )
    record_original(
        seq2seq_config,
        "hkproj",
        **{name: fields[name] for name in ("src_seq_len", "tgt_seq_len") if fields.get(name) is not None},
        projection=projection,
        source_tokenizer=Path(source_tokenizer).name,
        target_tokenizer=Path(target_tokenizer).name,
        tokenizers={"source": tokenizer_record(source_tokenizer), "target": tokenizer_record(target_tokenizer)},
    )
    # With the early version's std * eps norm and gains near 1, activations reach ~1e6 and attention scores ~1e12, so
    # the original's masked scores (set to -1e9) do not vanish in the softmax: masked future positions leak into earlier
    # ones, and a decoder state depends on how long the prefix is. Only recomputing the whole prefix at each step,
    # as the original's greedy_decode does, reproduces its outputs; a KV cache keeps states from shorter prefixes.
    leaky_mask = norm == "scalar_std_times_eps" and largest_norm_gain(checkpoint) >= SMALL_GAIN
    generation_config = GenerationConfig(
        decoder_start_token_id=specials["bos_token_id"], max_length=max_positions, use_cache=not leaky_mask, **specials
    )
    card = render_model_card(
        "seq2seq",
        seq2seq_config,
        title="hkproj Transformer translation model (converted)",
        prompt="Hello world",
        summary='An encoder-decoder Transformer ("Attention Is All You Need") for translation, with separate source '
        "and target word-level vocabularies.",
        origin=f"Converted with `minitf convert hkproj` from `{checkpoint.path.name}` (hkproj/pytorch-transformer). "
        f"The norm is `{norm}` as in the original code, so the converted model gives the original's numbers "
        "(to float32 rounding, relative where activations are large).",
        notes=" ".join(
            note
            for note, shown in (
                (
                    "`logits` are log-probabilities, as the original's ProjectionLayer returns.",
                    seq2seq_config.output_log_softmax,
                ),
                (
                    "With this norm and gains near 1 the attention scores are so large that the original's masking (-1e9) "
                    "leaks; the generation config sets `use_cache=False` so `generate` recomputes the prefix at each step "
                    "and reproduces the original's decoding.",
                    leaky_mask,
                ),
            )
            if shown
        ),
        num_parameters=num_parameters(plans),
        original_project="pytorch-transformer",
        converter="hkproj",
        source_checkpoint=checkpoint.path,
    )
    inferred.update(
        h=heads,
        norm_type=norm,
        attention_bias=seq2seq_config.attention_bias,
        output_log_softmax=seq2seq_config.output_log_softmax,
        generate_use_cache=not leaky_mask,
    )
    return ConvertedModel(
        MiniTFSeq2SeqForConditionalGeneration, seq2seq_config, plans, tokenizer, generation_config, card, inferred
    )


def convert_hkproj(
    checkpoint: str | Path,
    out: str | Path | OutputFolder,
    *,
    source_tokenizer: str | Path,
    target_tokenizer: str | Path,
    num_heads: int | None = None,
    norm_type: str = "auto",
    config: str | Path | Mapping[str, Any] | None = None,
    max_length: int | None = None,
    dtype: str = "auto",
    overwrite: bool = False,
    license: str | None = None,
) -> ConvertedModel:
    """Convert an hkproj checkpoint into the Hugging Face folder `out`; returns what was converted.
    `license` is the card's (default: the one the original project states, else `other`)."""
    target = output_folder(out, overwrite, existing_paths(checkpoint, source_tokenizer, target_tokenizer, config))
    build_arguments = read_json(config, "build_transformer arguments")

    def plan(source: Checkpoint) -> ConvertedModel:
        return plan_hkproj(
            source, source_tokenizer, target_tokenizer, num_heads, norm_type, build_arguments, max_length, dtype
        )

    return convert_checkpoint(checkpoint, target, plan, license)
