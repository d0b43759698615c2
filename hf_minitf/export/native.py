"""Export a MiniTF model to the transformers architecture that computes exactly the same function, so that it runs
where remote code never does: transformers without `trust_remote_code`, `transformers serve`, vLLM, TGI, optimum,
transformers.js, and (through `export_gguf`) llama.cpp and Ollama.

| MiniTF | native architecture | layout changes |
|---|---|---|
| GPT, learned positions | `GPT2LMHeadModel` | Conv1D weights are the transposed Linear weights; `[q|k|v]` kept |
| GPT, rotary positions | `GPTNeoXForCausalLM` (sequential residual, full rotary) | fused qkv regrouped per head `[q_h, k_h, v_h]`; FrawdLLM's interleaved rotary pairs permuted to rotate-half order within each head's q/k rows |
| encoder | `XLMRobertaXLModel` in a SentenceTransformer folder | word embeddings times sqrt(d) when scaled; positions at XLM-R's `padding_idx + 1` offset; zero token types |
| seq2seq (translator) | `PegasusForConditionalGeneration` | one joint vocabulary and tokenizer; the residual stream scaled for Pegasus's fixed LayerNorm eps (`native_seq2seq`) |

A config with no exact native form is refused with one line naming the field (`native_refusal`): nothing is
exported approximately. The written config.json and tokenizer files also read correctly in transformers 4.x.
"""

from __future__ import annotations

import json
import math
import os
import shlex
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file

from hf_minitf.cards.render import local_model_id
from hf_minitf.catalog.exports import NATIVE_ARCHITECTURES, NATIVE_MODEL_TYPES
from hf_minitf.catalog.families import FAMILIES
from hf_minitf.catalog.publishing import TOKENIZER_LOADING_STATE
from hf_minitf.catalog.verification import SOURCE_CARD_FIELD, SOURCE_HASHES_FIELD
from hf_minitf.export.formats.native import FORMAT
from hf_minitf.export.native_seq2seq import save_native_seq2seq_files
from hf_minitf.export.source import ExportRefused, MiniTFSource, check_native, open_source, split_qkv_heads
from hf_minitf.safety.json_files import read_json
from hf_minitf.safety.output_folders import atomic_output_dir, output_folder, weights_bytes

# A tokenizer class every transformers release since 4.0 knows and loads from tokenizer.json alone
# (5.x writes `TokenizersBackend`, which 4.x cannot resolve).
PORTABLE_TOKENIZER_CLASS = "PreTrainedTokenizerFast"


# Each block's weights and biases by name in the native architecture -> the MiniTF layer's module.
GPT2_LAYER = {
    "ln_1": "self_attn_layer_norm",
    "attn.c_attn": "self_attn.qkv_proj",
    "attn.c_proj": "self_attn.o_proj",
    "ln_2": "mlp_layer_norm",
    "mlp.c_fc": "mlp.fc1",
    "mlp.c_proj": "mlp.fc2",
}
GPT2_CONV1D = ("attn.c_attn", "attn.c_proj", "mlp.c_fc", "mlp.c_proj")  # Conv1D: Linear weights transposed
GPT_NEOX_LAYER = {
    "input_layernorm": "self_attn_layer_norm",
    "attention.query_key_value": "self_attn.qkv_proj",
    "attention.dense": "self_attn.o_proj",
    "post_attention_layernorm": "mlp_layer_norm",
    "mlp.dense_h_to_4h": "mlp.fc1",
    "mlp.dense_4h_to_h": "mlp.fc2",
}
XLM_ROBERTA_XL_LAYER = {
    "attention.self_attn_layer_norm": "self_attn_layer_norm",
    "attention.self.query": "self_attn.q_proj",
    "attention.self.key": "self_attn.k_proj",
    "attention.self.value": "self_attn.v_proj",
    "attention.output.dense": "self_attn.o_proj",
    "LayerNorm": "mlp_layer_norm",
    "intermediate.dense": "mlp.fc1",
    "output.dense": "mlp.fc2",
}


def renamed_layers(
    state: dict[str, torch.Tensor],
    config: Any,
    prefix: str,
    names: dict[str, str],
    convert: Callable[[str, torch.Tensor], torch.Tensor] = lambda name, tensor: tensor,
) -> dict[str, torch.Tensor]:
    """Every MiniTF layer's weights and biases under `prefix{index}.` and the native names of `names`, each passed
    through `convert(native name, tensor)`. A module without a bias (`attention_bias=False`) gets zeros: the same
    function."""
    out = {}
    for index in range(config.num_hidden_layers):
        for native, minitf in names.items():
            weight = state[f"model.layers.{index}.{minitf}.weight"]
            bias = state.get(f"model.layers.{index}.{minitf}.bias", torch.zeros(weight.shape[0], dtype=weight.dtype))
            out[f"{prefix}{index}.{native}.weight"] = convert(native, weight)
            out[f"{prefix}{index}.{native}.bias"] = convert(native, bias)
    return out


def gpt2_state_dict(state: dict[str, torch.Tensor], config: Any) -> dict[str, torch.Tensor]:
    """MiniTF GPT (learned positions) weights under GPT2LMHeadModel's names; Conv1D stores Linear weights transposed."""
    out = {
        "transformer.wte.weight": state["model.embed_tokens.weight"],
        "transformer.wpe.weight": state["model.embed_positions.weight"],
        "transformer.ln_f.weight": state["model.norm.weight"],
        "transformer.ln_f.bias": state["model.norm.bias"],
    }
    out |= renamed_layers(
        state,
        config,
        "transformer.h.",
        GPT2_LAYER,
        lambda name, tensor: tensor.t() if name in GPT2_CONV1D and tensor.dim() == 2 else tensor,
    )
    if not config.tie_word_embeddings:
        out["lm_head.weight"] = state["lm_head.weight"]
    return out


def gpt_neox_qkv(tensor: torch.Tensor, config: Any) -> torch.Tensor:
    """A fused `[q | k | v]` weight (rows) or bias regrouped per head `[q_h, k_h, v_h]` as GPT-NeoX splits it, with
    q/k rows taken from interleaved to rotate-half order when the MiniTF model rotates interleaved pairs."""
    return split_qkv_heads(tensor, config).transpose(0, 1).reshape(tensor.shape).contiguous()


def gpt_neox_state_dict(state: dict[str, torch.Tensor], config: Any) -> dict[str, torch.Tensor]:
    """MiniTF GPT (rotary positions) weights under GPTNeoXForCausalLM's names (the head as `embed_out`, the name
    every transformers release reads; 5.x renames it to `lm_head` on load)."""
    out = {
        "gpt_neox.embed_in.weight": state["model.embed_tokens.weight"],
        "gpt_neox.final_layer_norm.weight": state["model.norm.weight"],
        "gpt_neox.final_layer_norm.bias": state["model.norm.bias"],
    }
    out |= renamed_layers(
        state,
        config,
        "gpt_neox.layers.",
        GPT_NEOX_LAYER,
        lambda name, tensor: gpt_neox_qkv(tensor, config) if name == "attention.query_key_value" else tensor,
    )
    if not config.tie_word_embeddings:
        out["embed_out.weight"] = state["lm_head.weight"]
    return out


def _token_ids(config: Any) -> dict[str, Any]:
    return {
        "bos_token_id": config.bos_token_id,
        "eos_token_id": config.eos_token_id,
        "pad_token_id": config.pad_token_id,
    }


def gpt2_config(config: Any) -> dict[str, Any]:
    """GPT2Config fields of a MiniTF GPT with learned positions (`n_ctx` too: transformers 4.x readers want it)."""
    return {
        "architectures": [NATIVE_ARCHITECTURES["learned"]],
        "model_type": NATIVE_MODEL_TYPES["learned"],
        "vocab_size": config.vocab_size,
        "n_positions": config.max_position_embeddings,
        "n_ctx": config.max_position_embeddings,
        "n_embd": config.hidden_size,
        "n_layer": config.num_hidden_layers,
        "n_head": config.num_attention_heads,
        "n_inner": config.intermediate_size,
        "activation_function": config.hidden_act,
        "layer_norm_epsilon": config.layer_norm_eps,
        "resid_pdrop": config.hidden_dropout,
        "embd_pdrop": config.hidden_dropout,
        "attn_pdrop": config.attention_dropout,
        "initializer_range": config.initializer_range,
        "scale_attn_weights": True,
        "scale_attn_by_inverse_layer_idx": False,
        "reorder_and_upcast_attn": False,
        "tie_word_embeddings": config.tie_word_embeddings,
        "use_cache": True,
        **_token_ids(config),
    }


def gpt_neox_config(config: Any) -> dict[str, Any]:
    """GPTNeoXConfig fields of a MiniTF GPT with rotary positions: sequential residual, rotary on every feature.

    `rope_parameters` is what transformers 5 reads; `rotary_pct` and `rotary_emb_base` what 4.x reads (its
    default `rotary_pct` of 0.25 would silently rotate a quarter of the features).
    """
    return {
        "architectures": [NATIVE_ARCHITECTURES["rope"]],
        "model_type": NATIVE_MODEL_TYPES["rope"],
        "vocab_size": config.vocab_size,
        "hidden_size": config.hidden_size,
        "num_hidden_layers": config.num_hidden_layers,
        "num_attention_heads": config.num_attention_heads,
        "intermediate_size": config.intermediate_size,
        "hidden_act": config.hidden_act,
        "max_position_embeddings": config.max_position_embeddings,
        "layer_norm_eps": config.layer_norm_eps,
        "hidden_dropout": config.hidden_dropout,
        "attention_dropout": config.attention_dropout,
        "initializer_range": config.initializer_range,
        "use_parallel_residual": False,
        "attention_bias": True,
        "rope_parameters": {
            "rope_type": "default",
            "rope_theta": float(config.rope_theta),
            "partial_rotary_factor": 1.0,
        },
        "rotary_pct": 1.0,
        "rotary_emb_base": float(config.rope_theta),
        "rope_scaling": None,
        "tie_word_embeddings": config.tie_word_embeddings,
        "use_cache": True,
        **_token_ids(config),
    }


# --------------------------------------------------------------------------------------------- encoder weights
def xlm_roberta_xl_state_dict(state: dict[str, torch.Tensor], config: Any) -> dict[str, torch.Tensor]:
    """MiniTF encoder weights under XLMRobertaXLModel's names.

    XLM-R numbers real tokens from `padding_idx + 1`, so MiniTF's position p is written at row `padding_idx + 1 + p`
    (the sinusoid table computed, or the learned rows copied); rows before stay zero. The scale MiniTF applies to
    the token embedding is multiplied in; the one token type is a zero row. The pooler (unused: the sentence
    embedding is the mean of the token states) is zero.
    """
    from hf_minitf.modeling.layers import SinusoidalPositionalEmbedding

    hidden, offset = config.hidden_size, config.pad_token_id + 1
    dtype = state["model.embed_tokens.weight"].dtype
    scale = math.sqrt(hidden) if config.scale_embeddings else 1.0
    if config.position_embedding_type == "learned":
        table = state["model.embed_positions.weight"]
    else:
        positions = torch.arange(config.max_position_embeddings)[None]
        table = SinusoidalPositionalEmbedding(hidden)(positions)[0].to(dtype)
    position_rows = torch.zeros(offset + config.max_position_embeddings, hidden, dtype=dtype)
    position_rows[offset:] = table
    out = {
        "embeddings.word_embeddings.weight": (state["model.embed_tokens.weight"].float() * scale).to(dtype),
        "embeddings.position_embeddings.weight": position_rows,
        "embeddings.token_type_embeddings.weight": torch.zeros(1, hidden, dtype=dtype),
        "encoder.LayerNorm.weight": state["model.norm.weight"],
        "encoder.LayerNorm.bias": state["model.norm.bias"],
        "pooler.dense.weight": torch.zeros(hidden, hidden, dtype=dtype),
        "pooler.dense.bias": torch.zeros(hidden, dtype=dtype),
    }
    return out | renamed_layers(state, config, "encoder.layer.", XLM_ROBERTA_XL_LAYER)


def xlm_roberta_xl_config(config: Any) -> dict[str, Any]:
    """XLMRobertaXLConfig fields of a MiniTF encoder (positions widened by XLM-R's `padding_idx + 1` offset)."""
    return {
        "architectures": [NATIVE_ARCHITECTURES["encoder"]],
        "model_type": NATIVE_MODEL_TYPES["encoder"],
        "vocab_size": config.vocab_size,
        "hidden_size": config.hidden_size,
        "num_hidden_layers": config.num_hidden_layers,
        "num_attention_heads": config.num_attention_heads,
        "intermediate_size": config.intermediate_size,
        "hidden_act": config.hidden_act,
        "hidden_dropout_prob": config.hidden_dropout,
        "attention_probs_dropout_prob": config.attention_dropout,
        "max_position_embeddings": config.max_position_embeddings + config.pad_token_id + 1,
        "type_vocab_size": 1,
        "layer_norm_eps": config.layer_norm_eps,
        "initializer_range": config.initializer_range,
        "position_embedding_type": "absolute",
        "pad_token_id": config.pad_token_id,
        "bos_token_id": None,
        "eos_token_id": None,
        "is_decoder": False,
        "add_cross_attention": False,
        "classifier_dropout": config.classifier_dropout,
    }


# ------------------------------------------------------------------------------------------------ the folder
def _save_weights(tensors: dict[str, torch.Tensor], folder: Path) -> None:
    save_file(
        {name: tensor.detach().contiguous() for name, tensor in tensors.items()},
        str(folder / "model.safetensors"),
        metadata={"format": "pt"},
    )


def _save_config(fields: dict[str, Any], dtype: torch.dtype, folder: Path) -> None:
    """config.json through the native config class (so 5.x's own fields are complete), with every field given here
    written explicitly for older readers."""
    from transformers import AutoConfig

    native = AutoConfig.for_model(
        **{
            key: value
            for key, value in fields.items()
            if key not in ("architectures", "rotary_pct", "rotary_emb_base", "n_ctx")
        }
    )
    native.architectures = fields["architectures"]
    native.dtype = dtype
    data = {**native.to_diff_dict(), **fields, "dtype": str(dtype).removeprefix("torch.")}
    (folder / "config.json").write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def _save_tokenizer(tokenizer, folder: Path, max_length: int) -> None:
    """The tokenizer, with a class name and `model_max_length` that transformers 4.x reads too."""
    tokenizer.model_max_length = min(tokenizer.model_max_length, max_length)
    tokenizer.save_pretrained(folder)
    path = folder / "tokenizer_config.json"
    data = read_json(path)
    data.update(tokenizer_class=PORTABLE_TOKENIZER_CLASS, model_max_length=tokenizer.model_max_length)
    for key in ("auto_map", *TOKENIZER_LOADING_STATE):
        data.pop(key, None)
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def _save_generation_config(source: MiniTFSource, config: Any, folder: Path) -> None:
    from transformers import GenerationConfig

    generation = source.load_generation_config() or GenerationConfig()
    for name, value in _token_ids(config).items():
        if getattr(generation, name, None) is None and value is not None:
            setattr(generation, name, value)
    generation.save_pretrained(folder)


def save_native_gpt_files(source: MiniTFSource, config: Any, tokenizer, dtype: torch.dtype, folder: Path) -> None:
    """Everything but the weights of a GPT's native folder: config.json (GPT-2 or GPT-NeoX), the tokenizer and the
    generation config, which the ONNX export writes beside its graph too."""
    learned = config.position_embedding_type == "learned"
    _save_config(gpt2_config(config) if learned else gpt_neox_config(config), dtype, folder)
    _save_tokenizer(tokenizer, folder, config.max_position_embeddings)
    _save_generation_config(source, config, folder)


def write_native_card(
    folder: Path,
    source: MiniTFSource,
    config: Any,
    kind: str,
    model_id: str,
    gguf_files: Sequence[str] = (),
    license: str | None = None,
    source_repo: str | None = None,
) -> None:
    """README.md from model_cards/native_export.md: what the folder is, where it came from (`source_repo`, the Hub
    repo the source is published as, else the source's own repo id, else no repo), how to run it (`model_id`: the
    folder or Hub repo id the snippets load; `gguf_files`: GGUF files beside it), with the source card's license (or
    `license`) and held-out figures (`export_card_data`)."""
    from hf_minitf.cards import export_card, export_card_data, model_examples, source_naming

    encoder = kind == "encoder"
    name = Path(model_id).name or model_id
    carried = export_card_data(source.folder, license, model_name=name)
    if source.recorded is not None:
        carried |= {
            SOURCE_CARD_FIELD: source.recorded,  # what `minitf verify` measures the export against
            SOURCE_HASHES_FIELD: source.hashes(),  # and what it checks that folder still holds
        }
    title = f"{name}: a MiniTF {source.family} model as {NATIVE_ARCHITECTURES[kind]}"
    card = export_card(
        FORMAT.card_template,
        library_name="sentence-transformers" if encoder else "transformers",
        pipeline_tag={"encoder": "sentence-similarity", "seq2seq": "translation"}.get(kind, "text-generation"),
        tags=[NATIVE_MODEL_TYPES[kind], *(["sentence-transformers", "feature-extraction"] if encoder else [])],
        carried=carried,
        **source_naming(source.family, source.repo_id, source.revision, source_repo),
        model_title=title,
        kind=kind,
        architecture=NATIVE_ARCHITECTURES[kind],
        model_type=NATIVE_MODEL_TYPES[kind],
        config=config,
        head_dim=config.hidden_size // config.num_attention_heads,
        model_id=model_id,
        model_id_shell=shlex.quote(model_id),
        examples=model_examples(source.folder),
        gguf_files=[(name, shlex.quote(name), name.rsplit("-", 1)[-1].removesuffix(".gguf")) for name in gguf_files],
        on_hub=Path(model_id).exists() is False and "/" in model_id,
    )
    card.save(folder / "README.md")


def native_tensors(source: MiniTFSource, config: Any) -> dict[str, torch.Tensor]:
    """The tensors of a GPT's or an encoder's native model.safetensors (a translator's: `pegasus_state_dict`), by
    their native names, in the saved weights' dtype: what `export_native` writes and what `minitf verify` compares a
    native export's file with, tensor by tensor."""
    model = source.load_model()
    if source.family == "seq2seq":
        from hf_minitf.export.native_seq2seq import pegasus_state_dict

        return pegasus_state_dict(model)
    state = model.state_dict()
    if source.family == "encoder":  # the bare encoder: the same names as the GPT's `model.` part
        return xlm_roberta_xl_state_dict({f"model.{name}": tensor for name, tensor in state.items()}, config)
    if config.position_embedding_type == "learned":
        return gpt2_state_dict(state, config)
    return gpt_neox_state_dict(state, config)


def export_native(
    source: str | os.PathLike,
    out: str | os.PathLike,
    *,
    overwrite: bool = False,
    revision: str | None = None,
    gguf_dtypes: Sequence[str] = (),
    model_id: str | None = None,
    license: str | None = None,
    source_repo: str | None = None,
    published: bool = False,
) -> Path:
    """Write the MiniTF model `source` (a folder or a Hub repo id) to `out` as its native transformers architecture,
    with tokenizer, generation config and model card; no code, no `auto_map`. Returns `out`.

    GPT with learned positions -> GPT2LMHeadModel; GPT with rotary positions -> GPTNeoXForCausalLM; encoder -> a
    SentenceTransformer folder around XLMRobertaXLModel. Raises ExportRefused (a ValueError) naming the field when
    the model has no exact native form; `out` is written whole or not at all.

    `gguf_dtypes` (GPT only) also writes `<name>-<DTYPE>.gguf` files of `export_gguf` into the folder, as GGUF repos
    on the Hub hold them; `model_id` is the folder or repo id the card's snippets load (default: `out`). The card
    carries the source card's license (`license` overrides it) and held-out figures (its model-index), and names the
    source by `source_repo` (the Hub repo it is published as; default: `source` when that is a repo id) as its
    `base_model`, or by no name where it has no repo. The card and the GGUF files record the source `minitf verify`
    measures them against: its absolute path or repo id, or, when the folder is written to be uploaded (`published`),
    `source_repo` or its repo id or nothing, never a folder of this machine (`MiniTFSource.recorded`).
    """
    from hf_minitf.export.gguf import check_gguf_dtype

    for gguf_dtype in gguf_dtypes:
        check_gguf_dtype(gguf_dtype)
    opened = open_source(source, revision, published=published, published_as=source_repo)
    family = FAMILIES[opened.family]
    config = family.load(family.config_class).from_pretrained(opened.folder)
    check_native(config)
    model = opened.load_model()
    tokenizer = opened.load_tokenizer()
    dtype = next(model.parameters()).dtype
    out = Path(out)
    inputs = [opened.folder] if opened.repo_id is None else []
    target = output_folder(out, overwrite=overwrite, inputs=inputs)
    target.check_space(weights_bytes(model.parameters()), "the weights")  # written in their own dtype
    if opened.family == "gpt":
        kind = config.position_embedding_type
        model_id = model_id or local_model_id(out)
        with atomic_output_dir(target) as work:
            _save_weights(native_tensors(opened, config), work)
            save_native_gpt_files(opened, config, tokenizer, dtype, work)
            gguf_files = _save_gguf_files(opened, work, gguf_dtypes, model_id, license)
            write_native_card(work, opened, config, kind, model_id, gguf_files, license, source_repo)
        return out
    if gguf_dtypes:
        where = " and write the encoder's GGUF with `minitf export gguf`" if opened.family == "encoder" else ""
        raise ExportRefused(
            f"cannot add GGUF files to a {opened.family} model's native export (only a GPT's carries them); drop "
            f"the GGUF types{where}."
        )
    if opened.family == "seq2seq":
        if model.generation_config.use_cache is False:
            raise ExportRefused(
                "cannot export to a native architecture: generation_config.use_cache=False: this translator's "
                "outputs need the whole prefix recomputed at each step (hkproj's -1e9 mask overflowing under its "
                "first norm), which Pegasus's cached decoding cannot reproduce; export a trained model whose "
                "generation config caches."
            )
        with atomic_output_dir(target) as work:
            save_native_seq2seq_files(opened, model, tokenizer, work)
            write_native_card(
                work,
                opened,
                config,
                "seq2seq",
                model_id or local_model_id(out),
                license=license,
                source_repo=source_repo,
            )
        return out
    with (
        tempfile.TemporaryDirectory() as staging_dir,
        atomic_output_dir(target) as work,
    ):
        staging = Path(staging_dir)
        _save_weights(native_tensors(opened, config), staging)
        _save_config(xlm_roberta_xl_config(config), dtype, staging)
        _save_tokenizer(tokenizer, staging, config.max_position_embeddings)
        _save_sentence_transformer(staging, work, config)
        write_native_card(
            work, opened, config, "encoder", model_id or local_model_id(out), license=license, source_repo=source_repo
        )
    return out


def _save_gguf_files(
    source: MiniTFSource, folder: Path, dtypes: Sequence[str], model_id: str, license: str | None
) -> list[str]:
    """`<name>-<DTYPE>.gguf` for each GGUF type, beside the native files (each recording the source as the card
    does); returns their names."""
    from hf_minitf.export.gguf import write_gguf_report

    names = [f"{Path(model_id).name}-{dtype.upper()}.gguf" for dtype in dtypes]
    for dtype, name in zip(dtypes, names):
        write_gguf_report(source, folder / name, dtype, license, agreement_text=None)
    return names


def _save_sentence_transformer(model_folder: Path, work: Path, config: Any) -> None:
    """The native encoder in `model_folder` as a SentenceTransformer folder in `work`, written by
    sentence-transformers itself: Transformer -> Pooling(mean) -> Normalize, padding on the right."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Normalize, Pooling, Transformer

    transformer = Transformer(str(model_folder), max_seq_length=config.max_position_embeddings)
    transformer.tokenizer.padding_side = "right"
    sentence_model = SentenceTransformer(
        modules=[transformer, Pooling(config.hidden_size, "mean"), Normalize()],
        similarity_fn_name="cosine",
        device="cpu",
    )
    sentence_model.save(str(work))
    for name in ("config.json", "tokenizer_config.json"):  # keep the portable files written above
        (work / name).write_text((model_folder / name).read_text(encoding="utf-8"), encoding="utf-8")


__all__ = [
    "native_tensors",
    "ExportRefused",
    "check_native",
    "export_native",
    "gpt2_config",
    "gpt2_state_dict",
    "gpt_neox_config",
    "gpt_neox_qkv",
    "gpt_neox_state_dict",
    "save_native_gpt_files",
    "xlm_roberta_xl_config",
    "xlm_roberta_xl_state_dict",
]
