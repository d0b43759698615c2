"""Export MiniTF models to CTranslate2, the C++ inference engine for Transformers.

A GPT becomes a `ctranslate2.Generator` folder, a seq2seq model a `ctranslate2.Translator` folder, an encoder a
`ctranslate2.Encoder` folder. The model specification is filled from the MiniTF weights with CTranslate2's own spec
classes (`TransformerDecoderModelSpec`, `TransformerSpec`, `TransformerEncoderModelSpec`), the way its converters
fill them, so no transformers class is loaded or patched:

- GPT: pre-norm, fused `[q | k | v]` projection (CTranslate2's own layout), GELU, final LayerNorm, `lm_head` tied
  to the token embedding. Learned positions become the position table; rotary positions become CTranslate2's
  rotary attention, interleaved pairs for FrawdLLM's layout (`rope_interleaved=True`) or halves for transformers'.
- seq2seq (hkproj's pytorch-transformer): pre-norm encoder and decoder with ReLU feed-forwards, separate source
  and target vocabularies, token embeddings scaled by sqrt(hidden_size), the interleaved sinusoid (sin on even,
  cos on odd features, which is not CTranslate2's built-in [sin | cos] one) written as an explicit position table,
  the norms' eps from the config. hkproj's first norm, `weight * (x - mean) / (std * eps) + bias`, is a LayerNorm
  with eps 0 whose gain is `weight / (eps * sqrt(n / (n - 1)))`, written so; its later `std + eps` forms have no
  LayerNorm equivalent and are refused.
- encoder (MiniEmbed): pre-norm layers and a final LayerNorm, q|k|v fused, GELU, token embeddings scaled by
  sqrt(hidden_size) when `scale_embeddings`, the interleaved sinusoid or the learned positions as the position
  table. The engine returns the token states; the runner pools them (masked mean, L2 norm) as the
  SentenceTransformer folder does.

Anything the engine cannot reproduce exactly is refused with a ValueError naming the field. The folder also holds
the tokenizer files, the generation config and a README saying how to run it; it is written whole or not at all.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

import torch
from tokenizers import Tokenizer

from hf_minitf.cards import PLACEHOLDER_MODEL_ID, export_card, export_card_data, model_examples, source_naming
from hf_minitf.catalog.families import FAMILIES
from hf_minitf.catalog.limits import CTRANSLATE2_QUANTIZATIONS as QUANTIZATIONS
from hf_minitf.catalog.verification import SOURCE_HASHES_FIELD
from hf_minitf.export.formats.ctranslate2 import FORMAT
from hf_minitf.export.source import EXPORT_FILE, accepts_src, check_sentence_transformer_folder, open_source_of
from hf_minitf.safety.output_folders import atomic_output_dir

# transformers' activation names (ACT2FN) that CTranslate2 computes the same way.
ACTIVATIONS = {
    "relu": "RELU",
    "gelu": "GELU",
    "gelu_new": "GELUTanh",
    "gelu_pytorch_tanh": "GELUTanh",
    "silu": "SWISH",
    "swish": "SWISH",
    "tanh": "Tanh",
    "sigmoid": "Sigmoid",
}
PIPELINE_TAGS = {"generator": "text-generation", "translator": "translation", "embedder": "sentence-similarity"}
# A MiniTF layer, norm or projection, read by attribute name (torch types a module's attributes Tensor | Module).
ModelPart = Any


def _activation(name: str):
    from ctranslate2.specs import common_spec

    if name not in ACTIVATIONS:
        raise ValueError(f"hidden_act={name!r} has no CTranslate2 equivalent (it has {sorted(ACTIVATIONS)}).")
    return getattr(common_spec.Activation, ACTIVATIONS[name])


def _tensor(value: torch.Tensor) -> torch.Tensor:
    return value.detach().to(torch.float32).contiguous()


def _set_layer_norm(spec, norm: ModelPart, norm_type: str = "layer_norm", hidden_size: int = 0) -> None:
    """A LayerNorm's gain and bias; hkproj's first norm as the LayerNorm (eps 0) it equals: the gain times
    1 / (eps * sqrt(n / (n - 1))), its one gain and bias repeated over the `hidden_size` features."""
    gamma, beta = _tensor(norm.weight), _tensor(norm.bias)
    if norm_type == "scalar_std_times_eps":
        gamma = gamma / (norm.eps * math.sqrt(hidden_size / (hidden_size - 1)))
        gamma, beta = gamma.expand(hidden_size).contiguous(), beta.expand(hidden_size).contiguous()
    spec.gamma, spec.beta = gamma, beta


def _set_feed_forward(spec, layer: ModelPart, norm_type: str = "layer_norm", hidden_size: int = 0) -> None:
    _set_layer_norm(spec.layer_norm, layer.mlp_layer_norm, norm_type, hidden_size)
    _set_linear(spec.linear_0, layer.mlp.fc1)
    _set_linear(spec.linear_1, layer.mlp.fc2)


def _set_linear(spec, linear: ModelPart) -> None:
    spec.weight = _tensor(linear.weight)
    if linear.bias is not None:
        spec.bias = _tensor(linear.bias)


def _set_fused_linear(spec, linears: list[ModelPart]) -> None:
    """One projection from several stacked along the output dimension (CTranslate2's fused q|k|v and k|v)."""
    spec.weight = torch.cat([_tensor(linear.weight) for linear in linears])
    if linears[0].bias is not None:
        spec.bias = torch.cat([_tensor(linear.bias) for linear in linears])


def _check_token_strings(tokens: list[str], side: str) -> None:
    seen: dict[str, int] = {}
    for index, token in enumerate(tokens):
        if token in seen:
            raise ValueError(
                f"The {side} vocabulary holds {token!r} at ids {seen[token]} and {index}; CTranslate2 "
                "addresses tokens by their text, so each must be unique."
            )
        seen[token] = index


def vocabulary_tokens(tokenizer_file: Path, size: int, side: str) -> list[str]:
    """The token text of ids 0..size-1 in a `tokenizers` file; ids the tokenizer lacks (a model vocabulary larger
    than the tokenizer's) get placeholder names, as CTranslate2's transformers converter does."""
    tokenizer = Tokenizer.from_file(str(tokenizer_file))
    known = [tokenizer.id_to_token(index) for index in range(size)]
    tokens = [token if token is not None else f"<extra_id_{index}>" for index, token in enumerate(known)]
    _check_token_strings(tokens, side)
    return tokens


def _token(tokens: list[str], token_id, field: str) -> str | None:
    if isinstance(token_id, list):
        token_id = token_id[0] if token_id else None
    if token_id is None:
        return None
    if not 0 <= token_id < len(tokens):
        raise ValueError(f"{field}={token_id} lies outside the vocabulary of {len(tokens)} tokens.")
    return tokens[token_id]


def _refuse_uncached_generation(model) -> None:
    if model.generation_config.use_cache is False:
        field = (
            "context_overflow='crop'"
            if getattr(model.config, "context_overflow", None) == "crop"
            else "generation_config.use_cache=False"
        )
        raise ValueError(
            f"{field}: this model's outputs need the whole prefix recomputed at each step (the nanoGPT-style char "
            "GPT's sliding window, or hkproj's -1e9 mask overflowing under its first norm), which CTranslate2's "
            "cached decoding cannot reproduce. Set context_overflow='error' (inputs past max_position_embeddings are "
            "then refused) or export a trained model whose generation config caches."
        )


def gpt_spec(model, tokenizer_file: Path):
    """CTranslate2's decoder-only spec for a `MiniTFGPTForCausalLM`, with its vocabulary and special tokens."""
    from ctranslate2.specs import transformer_spec

    config = model.config
    _refuse_uncached_generation(model)
    if config.context_overflow != "error":
        raise ValueError(f"context_overflow={config.context_overflow!r} has no CTranslate2 equivalent.")
    rope = config.position_embedding_type == "rope"
    spec = transformer_spec.TransformerDecoderModelSpec.from_config(
        config.num_hidden_layers,
        config.num_attention_heads,
        pre_norm=True,
        activation=_activation(config.hidden_act),
        rotary_dim=0 if rope else None,
        rotary_interleave=config.rope_interleaved,
        rotary_base=config.rope_theta,
    )
    decoder, body = spec.decoder, model.model
    decoder.scale_embeddings = False
    decoder.embeddings.weight = _tensor(body.embed_tokens.weight)
    if not rope:
        decoder.position_encodings.encodings = _tensor(body.embed_positions.weight)
    _set_layer_norm(decoder.layer_norm, body.norm)
    for layer_spec, layer in zip(decoder.layer, body.layers):
        _set_layer_norm(layer_spec.self_attention.layer_norm, layer.self_attn_layer_norm)
        _set_linear(layer_spec.self_attention.linear[0], layer.self_attn.qkv_proj)
        _set_linear(layer_spec.self_attention.linear[1], layer.self_attn.o_proj)
        _set_feed_forward(layer_spec.ffn, layer)
    _set_linear(decoder.projection, model.lm_head)

    tokens = vocabulary_tokens(tokenizer_file, config.vocab_size, "model")
    spec.register_vocabulary(tokens)
    # CTranslate2 needs some token for each role; generation stops at eos only when the model has one (the
    # runner passes the end tokens explicitly).
    eos = _token(tokens, model.generation_config.eos_token_id or config.eos_token_id, "eos_token_id")
    bos = _token(tokens, model.generation_config.bos_token_id or config.bos_token_id, "bos_token_id")
    spec.config.eos_token = eos or tokens[0]
    spec.config.bos_token = bos or spec.config.eos_token
    spec.config.unk_token = spec.config.eos_token
    spec.config.layer_norm_epsilon = config.layer_norm_eps
    return spec


def encoder_spec(model, tokenizer_file: Path, unk_token: str):
    """CTranslate2's `TransformerEncoderModelSpec` for a `MiniTFEncoderModel`, with its vocabulary; no pooling layer
    (the runner pools the token states as the SentenceTransformer folder does)."""
    from ctranslate2.specs import transformer_spec

    config = model.config
    spec = transformer_spec.TransformerEncoderModelSpec(
        transformer_spec.TransformerEncoderSpec(
            config.num_hidden_layers,
            config.num_attention_heads,
            pre_norm=True,
            activation=_activation(config.hidden_act),
        )
    )
    encoder = spec.encoder
    encoder.scale_embeddings = config.scale_embeddings
    encoder.embeddings[0].weight = _tensor(model.embed_tokens.weight)
    if config.position_embedding_type == "learned":
        encoder.position_encodings.encodings = _tensor(model.embed_positions.weight)
    else:
        table = model.sinusoidal_positions(torch.arange(config.max_position_embeddings)[None])[0]
        encoder.position_encodings.encodings = _tensor(table)
    _set_layer_norm(encoder.layer_norm, model.norm)
    for layer_spec, layer in zip(encoder.layer, model.layers):
        attention = layer.self_attn
        _set_layer_norm(layer_spec.self_attention.layer_norm, layer.self_attn_layer_norm)
        _set_fused_linear(layer_spec.self_attention.linear[0], [attention.q_proj, attention.k_proj, attention.v_proj])
        _set_linear(layer_spec.self_attention.linear[1], attention.o_proj)
        _set_feed_forward(layer_spec.ffn, layer)

    tokens = vocabulary_tokens(tokenizer_file, config.vocab_size, "model")
    spec.register_vocabulary(tokens)
    spec.config.unk_token = unk_token
    spec.config.layer_norm_epsilon = config.layer_norm_eps
    return spec


def translator_spec(model, source_tokenizer_file: Path, target_tokenizer_file: Path, unk_token: str):
    """CTranslate2's `TransformerSpec` for a `MiniTFSeq2SeqForConditionalGeneration`, with both vocabularies."""
    from ctranslate2.specs import transformer_spec

    config = model.config
    _refuse_uncached_generation(model)
    if config.norm_type not in ("layer_norm", "scalar_std_times_eps"):
        raise ValueError(
            f"norm_type={config.norm_type!r} divides by std + eps, which no LayerNorm (sqrt(var + eps)) computes "
            "exactly; CTranslate2 has only LayerNorm and RMSNorm. Export models with norm_type='layer_norm' or "
            "hkproj's first norm ('scalar_std_times_eps')."
        )
    spec = transformer_spec.TransformerSpec.from_config(
        config.num_hidden_layers,
        config.num_attention_heads,
        pre_norm=True,
        activation=_activation(config.hidden_act),
    )
    hidden_size = config.hidden_size
    norm = {"norm_type": config.norm_type, "hidden_size": hidden_size}
    positions = model.model.encoder.embed_positions(torch.arange(config.max_position_embeddings)[None])[0]
    stacks = ((spec.encoder, model.model.encoder), (spec.decoder, model.model.decoder))
    for stack_spec, stack in stacks:
        stack_spec.scale_embeddings = config.scale_embedding
        embeddings = stack_spec.embeddings[0] if isinstance(stack_spec.embeddings, list) else stack_spec.embeddings
        embeddings.weight = _tensor(stack.embed_tokens.weight)
        stack_spec.position_encodings.encodings = _tensor(positions)
        _set_layer_norm(stack_spec.layer_norm, stack.norm, **norm)
        for layer_spec, layer in zip(stack_spec.layer, stack.layers):
            attention = layer.self_attn
            _set_layer_norm(layer_spec.self_attention.layer_norm, layer.self_attn_layer_norm, **norm)
            _set_fused_linear(
                layer_spec.self_attention.linear[0], [attention.q_proj, attention.k_proj, attention.v_proj]
            )
            _set_linear(layer_spec.self_attention.linear[1], attention.o_proj)
            if stack is model.model.decoder:
                cross = layer.cross_attn
                _set_layer_norm(layer_spec.attention.layer_norm, layer.cross_attn_layer_norm, **norm)
                _set_linear(layer_spec.attention.linear[0], cross.q_proj)
                _set_fused_linear(layer_spec.attention.linear[1], [cross.k_proj, cross.v_proj])
                _set_linear(layer_spec.attention.linear[2], cross.o_proj)
            _set_feed_forward(layer_spec.ffn, layer, **norm)
    _set_linear(spec.decoder.projection, model.lm_head)

    source = vocabulary_tokens(source_tokenizer_file, config.src_vocab_size, "source")
    target = vocabulary_tokens(target_tokenizer_file, config.vocab_size, "target")
    spec.register_source_vocabulary(source)
    spec.register_target_vocabulary(target)
    generation = model.generation_config
    spec.config.bos_token = _token(target, generation.bos_token_id, "bos_token_id") or unk_token
    spec.config.eos_token = _token(target, generation.eos_token_id, "eos_token_id")
    spec.config.decoder_start_token = _token(target, generation.decoder_start_token_id, "decoder_start_token_id")
    if spec.config.eos_token is None or spec.config.decoder_start_token is None:
        raise ValueError(
            "eos_token_id and decoder_start_token_id must be set in the generation config: "
            "CTranslate2 starts and stops decoding at them."
        )
    spec.config.unk_token = unk_token
    spec.config.layer_norm_epsilon = 0.0 if config.norm_type == "scalar_std_times_eps" else config.layer_norm_eps
    return spec


@accepts_src
def export_ctranslate2(
    source: str | os.PathLike,
    out: str | os.PathLike,
    quantization: str = "float32",
    overwrite: bool = False,
    revision: str | None = None,
    license: str | None = None,
    source_repo: str | None = None,
) -> Path:
    """Write the MiniTF GPT, seq2seq or encoder model at `source` (a folder or Hub repo id) as a CTranslate2 folder
    at `out`: `model.bin` + vocabularies + `config.json` (CTranslate2's), the tokenizer files, the generation config
    (GPT and seq2seq), `minitf_export.json` (what the folder is, for `minitf generate/translate/embed`) and a model
    card carrying the source card's license (`license` overrides it), its held-out figures where the weights are
    float32 (a quantized model's were not measured), and `source_repo` (the Hub repo the source is published as;
    default: `source` when that is a repo id) as its `base_model`.

    `quantization` is the weight type CTranslate2 stores (`float32`, `int8`, `int8_float32`, `bfloat16`); float32
    gives MiniTF's greedy tokens and embeddings. `revision` picks the branch, tag or commit of a Hub repo id.
    An encoder must pool as MiniTF's SentenceTransformer folders do (mean, then Normalize). Returns the folder.
    """
    import ctranslate2  # noqa: F401 (a clear ImportError before any work when the engine is missing)

    if quantization not in QUANTIZATIONS:
        raise ValueError(f"quantization must be one of {', '.join(QUANTIZATIONS)}; got {quantization!r}.")
    opened = open_source_of(
        source,
        FORMAT.families,
        "the CTranslate2 export",
        "every MiniTF family has a CTranslate2 form",
        revision,
    )
    model, tokenizer = opened.load_model(torch.float32), opened.load_tokenizer()
    kind = FAMILIES[opened.family].engine_kind
    if kind == "embedder" and (opened.folder / "modules.json").is_file():
        check_sentence_transformer_folder(opened.folder)
    inputs = [] if opened.repo_id else [opened.folder]
    with torch.no_grad(), atomic_output_dir(out, overwrite=overwrite, inputs=inputs) as work:
        tokenizer.save_pretrained(work)
        if kind == "generator":
            spec = gpt_spec(model, work / "tokenizer.json")
        elif kind == "embedder":
            spec = encoder_spec(model, work / "tokenizer.json", tokenizer.unk_token)
        else:
            spec = translator_spec(
                model, work / "source_tokenizer.json", work / "target_tokenizer.json", tokenizer.unk_token
            )
        spec.validate()
        spec.optimize(quantization=quantization)
        spec.save(str(work))
        if kind != "embedder":
            model.generation_config.save_pretrained(work)
        (work / EXPORT_FILE).write_text(
            json.dumps(
                {
                    "engine": "ctranslate2",
                    "kind": kind,
                    "family": model.config.model_type,
                    "quantization": quantization,
                    "max_position_embeddings": model.config.max_position_embeddings,
                    "position_embedding_type": getattr(model.config, "position_embedding_type", "sinusoidal"),
                    "source": opened.recorded,
                    SOURCE_HASHES_FIELD: opened.hashes(),
                },
                indent=2,
            )
            + "\n",
            encoding="utf-8",
        )
        card_data = export_card_data(
            opened.folder, license, figures=quantization in FORMAT.exact_precisions, model_name=Path(out).name
        )
        named = source_naming(opened.family, opened.repo_id, opened.revision, source_repo)
        examples = model_examples(opened.folder)
        readme = _readme(kind, quantization, card_data, named, examples, model.config.max_position_embeddings)
        (work / "README.md").write_text(readme, encoding="utf-8")
    return Path(out)


def _readme(
    kind: str,
    quantization: str,
    card_data: dict[str, Any],
    named: dict[str, Any],
    examples: list[str],
    max_positions: int,
) -> str:
    """The folder's model card from model_cards/ctranslate2_export.md: metadata (`card_data`: license, model-index;
    the base model and the source's name, `named`) and how to run it on `examples` (the source's example texts)
    within the model's `max_positions`."""
    card = export_card(
        FORMAT.card_template,
        library_name="ctranslate2",
        pipeline_tag=PIPELINE_TAGS[kind],
        tags=["ctranslate2"],
        carried=card_data,
        **named,
        kind=kind,
        quantization=quantization,
        model_id=PLACEHOLDER_MODEL_ID,
        examples=examples,
        max_positions=max_positions,
    )
    return f"{card}\n"  # Jinja drops the template's last newline; the file ends with one


__all__ = ["QUANTIZATIONS", "export_ctranslate2"]
