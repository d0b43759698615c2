"""The way back: a MiniTF folder (converted, then fine-tuned or trained further) written as the checkpoint and side
files of the original project it came from, which that project's own code loads and gives the same numbers with.

Each format is a source of `minitf convert` (`hf_minitf.catalog.converters` names them and what each export writes);
the key maps are the converters' own, read the other way. The format a conversion recorded in config.json
(`ORIGINAL_FORMAT_FIELD`) is the default; a folder without the record (converted by an older version, trained by
`minitf train`) is matched to the original whose layout it fits. Whatever the original code cannot compute (a rotary
variant, another norm, a chat template, a tokenizer it does not read, ...) is refused before anything is written,
naming the field. Pickled files hold tensors and plain containers only (`torch.load(weights_only=True)` reads them).

Run: `minitf export original FOLDER OUT [--format SOURCE]`, or `export_original`.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from safetensors import safe_open
from safetensors.torch import save_file

from hf_minitf.catalog.converters import CONVERTERS, ORIGINAL_FORMAT_FIELD
from hf_minitf.catalog.families import family_of_model_type
from hf_minitf.conversion.base import Rule, expected_weights, original_name, read_json_file
from hf_minitf.conversion.char_gpt import RULES as CHAR_GPT_RULES
from hf_minitf.conversion.checkpoint import ConversionError
from hf_minitf.conversion.frawdllm import ASSISTANT_TOKEN, USER_TOKEN
from hf_minitf.conversion.frawdllm import CHAT_TEMPLATE as FRAWDLLM_CHAT_TEMPLATE
from hf_minitf.conversion.frawdllm import RULES as FRAWDLLM_RULES
from hf_minitf.conversion.hkproj import NORM_TYPES as HKPROJ_NORM_TYPES
from hf_minitf.conversion.hkproj import hkproj_rules
from hf_minitf.conversion.miniembed import RULES as MINIEMBED_RULES
from hf_minitf.safety.output_folders import atomic_output_dir, existing_paths
from hf_minitf.tokenization.gpt import BPE_SPECIAL_TOKENS
from hf_minitf.tokenization.miniembed import miniembed_tokenizer

# The formats that take a whole model, by the MiniTF family each reads; the embedding layers take the folder their
# `minitf convert` writes (EMBEDDING_FILES).
MODEL_FORMATS = {"char-gpt": "gpt", "frawdllm": "gpt", "miniembed": "encoder", "hkproj": "seq2seq"}
LAYER_FORMATS = ("transformer-embedding", "frawdllm-embeddings")
EMBEDDING_FILES = ("embeddings.safetensors", "embedding_config.json")
# What conversion adds to an original tokenizer file, undone on the way back from what it recorded: the tokens it
# registers (hkproj's specials; FrawdLLM's specials and chat tokens, when its file lacked them as added tokens) and
# the post-processor it sets.
REGISTERED_TOKENS = {
    "hkproj": ("[UNK]", "[PAD]", "[SOS]", "[EOS]"),
    "frawdllm": (*BPE_SPECIAL_TOKENS.values(), USER_TOKEN, ASSISTANT_TOKEN),
}
# FrawdLLM's tokenizer files frame every text as <|bos|> text <|eos|> (conversion makes prompts <|bos|> text).
FRAWDLLM_POST_PROCESSOR = {
    "type": "TemplateProcessing",
    "single": [
        {"SpecialToken": {"id": "<|bos|>", "type_id": 0}},
        {"Sequence": {"id": "A", "type_id": 0}},
        {"SpecialToken": {"id": "<|eos|>", "type_id": 0}},
    ],
    "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
}
HKPROJ_TOKENIZER_NAMES = {"source": "tokenizer_source.json", "target": "tokenizer_target.json"}


class OriginalRefused(ConversionError):
    """A model the original project's code cannot compute; the message names the field and why."""


@dataclass
class ExportedOriginal:
    """What `export_original` wrote: the format (a source of `minitf convert`), the folder and its files."""

    format: str
    path: Path
    files: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def summary(self, source: str | Path) -> str:
        """What a user reads after the export."""
        converter = CONVERTERS[self.format]
        lines = [f"Exported {source} to {self.path} as {converter.project} ({self.format})"]
        lines += [f"  files: {', '.join(self.files)}"]
        lines += [f"  note:  {note}" for note in self.notes]
        lines.append(f"  back:  minitf convert {self.format} {self.path / converter.checkpoint_file} ...")
        return "\n".join(lines)


# ------------------------------------------------------------------------------------------------ what the original
def sinusoidal_table(length: int, width: int) -> torch.Tensor:
    """The fixed (1, length, width) table MiniEmbed, hkproj and the Transformer-embedding layer register as `pe`:
    sin on even features, cos on odd ones, base 10000, computed in float32 in the same order of operations, so the
    stored buffer is bit for bit the one their constructors make."""
    table = torch.zeros(length, width)
    position = torch.arange(0, length, dtype=torch.float).unsqueeze(1)
    frequencies = torch.exp(torch.arange(0, width, 2).float() * (-math.log(10000.0) / width))
    table[:, 0::2] = torch.sin(position * frequencies)
    table[:, 1::2] = torch.cos(position * frequencies)
    return table.unsqueeze(0)


def causal_mask(length: int, dtype: torch.dtype) -> torch.Tensor:
    """The (1, 1, length, length) lower-triangular mask of ones the char GPT and FrawdLLM register per layer."""
    return torch.tril(torch.ones(length, length)).view(1, 1, length, length).to(dtype)


def _refuse(name: str, field_name: str, value: Any, why: str) -> OriginalRefused:
    return OriginalRefused(f"{CONVERTERS[name].project} cannot express {field_name}={value!r}: {why}")


def _require(config: Any, name: str, checks: Mapping[str, tuple[Callable[[Any], bool], str]]) -> None:
    """Refuse, naming the first field, a config whose field fails its check (`checks`: field -> (test, why))."""
    for field_name, (test, why) in checks.items():
        value = getattr(config, field_name, None)
        if not test(value):
            raise _refuse(name, field_name, value, why)


def _one_dropout(config: Any, name: str) -> None:
    if config.hidden_dropout != config.attention_dropout:
        raise _refuse(
            name,
            "attention_dropout",
            config.attention_dropout,
            f"the original has one dropout for everything, and hidden_dropout is {config.hidden_dropout}",
        )


def check_gpt(config: Any, name: str) -> None:
    """The GPT fields both originals fix: GELU, LayerNorm eps 1e-5, biased fused qkv, a 4x MLP, a tied head."""
    _require(
        config,
        name,
        {
            "hidden_act": (lambda value: value == "gelu", "its MLP is nn.GELU() (exact)"),
            "layer_norm_eps": (lambda value: value == 1e-5, "its LayerNorms keep PyTorch's eps 1e-5"),
            "attention_bias": (lambda value: value is True, "its qkv and output projections have biases"),
            "intermediate_size": (
                lambda value: value == 4 * config.hidden_size,
                f"its MLP is 4 x n_embd = {4 * config.hidden_size} wide",
            ),
            "tie_word_embeddings": (lambda value: value is True, "its lm_head is the token embedding"),
        },
    )
    _one_dropout(config, name)
    if name == "char-gpt":
        _require(
            config,
            name,
            {
                "position_embedding_type": (
                    lambda value: value == "learned",
                    "it has learned positions (wpe) only; FrawdLLM has rotary ones",
                )
            },
        )
        return
    _require(config, name, {"pad_token_id": (lambda value: isinstance(value, int), "ModelConfig holds an id")})
    _require(config, name, {"bos_token_id": (lambda value: isinstance(value, int), "ModelConfig holds an id")})
    _require(config, name, {"eos_token_id": (lambda value: isinstance(value, int), "ModelConfig holds one id")})
    if config.position_embedding_type == "rope":
        _require(
            config,
            name,
            {
                "rope_interleaved": (lambda value: value is True, "it rotates interleaved pairs (x[2i], x[2i+1])"),
                "rope_theta": (lambda value: value == 10000.0, "its rotary base is 10000"),
                "max_position_embeddings": (
                    lambda value: value % 4 == 0,
                    "with RoPE it reads 4 x context_length tokens, so the length must be a multiple of 4",
                ),
            },
        )
    elif config.position_embedding_type != "learned":
        raise _refuse(name, "position_embedding_type", config.position_embedding_type, "it has learned or rope")


def check_encoder(config: Any, architecture: str) -> None:
    """MiniEmbed: sinusoidal positions, scaled embeddings, GELU, eps 1e-5, biased attention, one dropout."""
    if architecture != "MiniTFEncoderModel":
        raise _refuse("miniembed", "architectures", [architecture], "MiniEmbed is the bare encoder, with no head")
    _require(
        config,
        "miniembed",
        {
            "position_embedding_type": (lambda value: value == "sinusoidal", "its positions are a sinusoidal table"),
            "scale_embeddings": (lambda value: value is True, "it scales token embeddings by sqrt(d_model)"),
            "hidden_act": (lambda value: value == "gelu", "its feed-forward uses F.gelu (exact)"),
            "layer_norm_eps": (lambda value: value == 1e-5, "its LayerNorms keep PyTorch's eps 1e-5"),
            "attention_bias": (lambda value: value is True, "W_q, W_k, W_v and W_o have biases"),
            "pad_token_id": (lambda value: isinstance(value, int), "its embedding has a padding row"),
        },
    )
    _one_dropout(config, "miniembed")


def check_seq2seq(config: Any) -> None:
    """hkproj: one of its norms, eps 1e-6, ReLU, scaled embeddings, -1e9 masking, log_softmax where its version has it."""
    per_feature = config.norm_type == "per_feature_std_plus_eps"
    _require(
        config,
        "hkproj",
        {
            "norm_type": (
                lambda value: value in HKPROJ_NORM_TYPES and value != "auto",
                "its LayerNormalization divides by std * eps (scalar gain), std + eps (scalar gain) or std + eps "
                "(per-feature gain); none computes sqrt(var + eps)",
            ),
            "layer_norm_eps": (lambda value: value == 1e-6, "its LayerNormalization keeps eps 1e-6"),
            "hidden_act": (lambda value: value == "relu", "its feed-forward is torch.relu"),
            "scale_embedding": (lambda value: value is True, "its InputEmbedding scales by sqrt(d_model)"),
            "attention_mask_value": (lambda value: value == -1e9, "it sets masked scores to -1e9"),
            "output_log_softmax": (
                lambda value: value is (not per_feature),
                "its ProjectionLayer ends in log_softmax in the scalar-norm versions and not in the per-feature one",
            ),
            "tie_word_embeddings": (lambda value: not value, "its projection is a weight of its own"),
        },
    )
    _one_dropout(config, "hkproj")


# ------------------------------------------------------------------------------------------------ the source folder
@dataclass
class SourceFolder:
    """A MiniTF model folder, or the folder an embedding layer's conversion wrote."""

    path: Path
    config: dict[str, Any]
    layer: bool = False

    @property
    def recorded(self) -> dict[str, Any]:
        record = self.config.get(ORIGINAL_FORMAT_FIELD)
        return dict(record) if isinstance(record, Mapping) else {}

    def json(self, name: str, what: str, expected: type = dict) -> Any:
        return read_json_file(self.path / name, what, "save or convert the model again", expected)

    def chat_template(self) -> str | None:
        """The tokenizer's chat template (chat_template.jinja, else tokenizer_config.json's), or None."""
        jinja = self.path / "chat_template.jinja"
        if jinja.is_file():
            return jinja.read_text(encoding="utf-8")
        if (self.path / "tokenizer_config.json").is_file():
            return self.json("tokenizer_config.json", "the tokenizer settings").get("chat_template")
        return None


def open_folder(folder: str | Path) -> SourceFolder:
    path = Path(folder)
    if not path.is_dir():
        raise ConversionError(f"{path} is not a folder; give a MiniTF model folder (converted, fine-tuned or trained).")
    if all((path / name).is_file() for name in EMBEDDING_FILES):
        config = read_json_file(path / EMBEDDING_FILES[1], "the embedding config", "convert the layer again")
        return SourceFolder(path, config, layer=True)
    if not (path / "config.json").is_file():
        raise ConversionError(
            f"{path} has no config.json (nor {' and '.join(EMBEDDING_FILES)}); give a MiniTF model folder, or the "
            "folder `minitf convert transformer-embedding/frawdllm-embeddings` wrote."
        )
    config = read_json_file(path / "config.json", "the model config", "save or convert the model again")
    if family_of_model_type(config.get("model_type")) is None:
        raise ConversionError(
            f"{path}/config.json has model_type={config.get('model_type')!r}, not a MiniTF model; only MiniTF folders "
            "export back to their original format."
        )
    return SourceFolder(path, config)


def _is_char_tokenizer(data: Mapping[str, Any]) -> bool:
    model = data.get("model") or {}
    vocab = model.get("vocab") or {}
    return (
        model.get("type") == "BPE"
        and not model.get("merges")
        and not data.get("added_tokens")
        and all(isinstance(token, str) and len(token) == 1 for token in vocab)
    )


def choose_format(source: SourceFolder, requested: str | None) -> str:
    """The format to write: `requested`, else the recorded one, else the original whose layout the folder fits."""
    if requested is not None and requested not in CONVERTERS:
        raise ConversionError(f"format {requested!r} is unknown; choose one of {', '.join(CONVERTERS)}.")
    if source.layer:
        positions = source.config.get("position_embedding_type")
        found = "transformer-embedding" if positions == "sinusoidal" else "frawdllm-embeddings"
        if requested not in (None, found):
            raise ConversionError(
                f"{source.path} holds an embedding layer with {positions} positions, which is the "
                f"{CONVERTERS[found].project}'s layout, not {requested}'s."
            )
        return found
    family = family_of_model_type(source.config["model_type"])
    assert family is not None  # open_folder checked it
    takes = [name for name, family_name in MODEL_FORMATS.items() if family_name == family.name]
    if requested is not None:
        if requested not in takes:
            hint = f" (for {family.name} models: {', '.join(takes)})" if takes else ""
            raise ConversionError(
                f"{source.path} is a {family.name} model; --format {requested} writes "
                f"{CONVERTERS[requested].project}'s files from "
                + (
                    "the folder its embedding-layer conversion wrote"
                    if requested in LAYER_FORMATS
                    else f"{MODEL_FORMATS[requested]} models"
                )
                + hint
                + "."
            )
        return requested
    recorded = source.recorded.get("format")
    if recorded in takes:
        return recorded
    if len(takes) == 1:
        return takes[0]
    # A GPT: the char GPT reads a list of characters, FrawdLLM a byte-level BPE.
    tokenizer = source.path / "tokenizer.json"
    data = source.json("tokenizer.json", "the tokenizer") if tokenizer.is_file() else {}
    return "char-gpt" if _is_char_tokenizer(data) else "frawdllm"


# ------------------------------------------------------------------------------------------------ each format
def _weights(model: Any, rules: list[Rule], name: str) -> dict[str, torch.Tensor]:
    """The model's weights under the original's names (through the converter's key map); a tied head comes back as the
    token embedding's own tensor, as the original's state_dict holds it."""
    weights = {}
    state = model.state_dict()
    for key in [*expected_weights(model), *(k for k in state if k not in expected_weights(model))]:
        original = original_name(key, rules)
        if original is None:
            raise ConversionError(f"Internal key map error: {key} has no {CONVERTERS[name].project} name.")
        weights[original] = state[key].detach()
    return weights


def _ordered(weights: Mapping[str, torch.Tensor], order: list[str], name: str) -> dict[str, torch.Tensor]:
    missing = [key for key in order if key not in weights]
    extra = sorted(set(weights) - set(order))
    if missing or extra:
        raise ConversionError(f"Internal error writing {name}: missing {missing[:6]}, unexpected {extra[:6]}.")
    return {key: weights[key].contiguous() for key in order}


def _floating_dtype(weights: Mapping[str, torch.Tensor]) -> torch.dtype:
    return next((tensor.dtype for tensor in weights.values() if tensor.is_floating_point()), torch.float32)


def _linear(prefix: str, bias: bool = True) -> list[str]:
    return [f"{prefix}.weight", *([f"{prefix}.bias"] if bias else [])]


def _norm(prefix: str) -> list[str]:
    return [f"{prefix}.weight", f"{prefix}.bias"]


def char_gpt_files(model: Any, source: SourceFolder) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    config = model.config
    check_gpt(config, "char-gpt")
    data = source.json("tokenizer.json", "the tokenizer")
    if not _is_char_tokenizer(data):
        raise OriginalRefused(
            f"{source.path}/tokenizer.json is no character list (a {data.get('model', {}).get('type')} model with "
            "merges, added or longer tokens): the char GPT reads vocab.json, one character per id."
        )
    vocab = data["model"]["vocab"]
    chars = sorted(vocab, key=vocab.__getitem__)
    if sorted(vocab.values()) != list(range(config.vocab_size)):
        raise _refuse("char-gpt", "vocab_size", config.vocab_size, f"its tokenizer has {len(chars)} characters")
    weights = _weights(model, CHAR_GPT_RULES, "char-gpt")
    blocks = config.max_position_embeddings
    order = ["wte.weight", "wpe.weight"]
    for index in range(config.num_hidden_layers):
        block = f"blocks.{index}"
        weights[f"{block}.attn.causal"] = causal_mask(blocks, _floating_dtype(weights))
        order += [*_norm(f"{block}.ln1"), f"{block}.attn.causal", *_linear(f"{block}.attn.qkv")]
        order += [*_linear(f"{block}.attn.proj"), *_norm(f"{block}.ln2")]
        order += [*_linear(f"{block}.mlp.net.0"), *_linear(f"{block}.mlp.net.2")]
    order += [*_norm("ln_f"), "lm_head.weight"]
    arguments = dict(
        vocab_size=config.vocab_size,
        block_size=blocks,
        n_embd=config.hidden_size,
        n_head=config.num_attention_heads,
        n_layer=config.num_hidden_layers,
        dropout=config.hidden_dropout,
    )
    return _ordered(weights, order, "char-gpt"), {"vocab.json": chars, "config.json": arguments}


def restored_tokenizer(data: dict[str, Any], recorded: Mapping[str, Any], name: str) -> dict[str, Any]:
    """A tokenizer file as the original wrote it: the post-processor and the added tokens conversion recorded (the
    tokens conversion registered dropped, those added since kept), else `data` with the original's post-processor."""
    restored = dict(data)
    if "post_processor" in recorded:
        restored["post_processor"] = recorded["post_processor"]
    if "added_tokens" in recorded:
        originals = {token["content"]: token for token in recorded["added_tokens"]}
        restored["added_tokens"] = [
            originals.get(token["content"], token)
            for token in data.get("added_tokens") or []
            if token["content"] in originals or token["content"] not in REGISTERED_TOKENS[name]
        ]
    return restored


def frawdllm_files(model: Any, source: SourceFolder) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    config = model.config
    check_gpt(config, "frawdllm")
    template = source.chat_template()
    if template is not None and template != FRAWDLLM_CHAT_TEMPLATE:
        raise OriginalRefused(
            "FrawdLLM cannot express this chat_template: its chat format is only "
            "<|bos|><|user|>{instruction}<|assistant|>{response}<|eos|> (the template `minitf convert frawdllm` "
            "sets); remove chat_template.jinja (and tokenizer_config.json's chat_template) or set that one."
        )
    data = source.json("tokenizer.json", "the tokenizer")
    if (data.get("model") or {}).get("type") != "BPE":
        raise OriginalRefused(
            f"{source.path}/tokenizer.json is a {(data.get('model') or {}).get('type')} tokenizer; FrawdLLM reads a "
            "byte-level BPE."
        )
    ids = {token["content"]: token["id"] for token in data.get("added_tokens") or []}
    ids = {**data["model"].get("vocab", {}), **ids}
    for key in ("pad_token_id", "bos_token_id", "eos_token_id"):
        token = BPE_SPECIAL_TOKENS[key.removesuffix("_id")]
        if ids.get(token) != getattr(config, key):
            raise OriginalRefused(
                f"FrawdLLM cannot express {key}={getattr(config, key)}: its tokenizer gives {token} id "
                f"{ids.get(token)}, and FrawdLLM's code reads the id from the config and the token from the tokenizer."
            )
    recorded = source.recorded
    tokenizer = restored_tokenizer(
        data,
        recorded.get("tokenizer") or {"post_processor": {**FRAWDLLM_POST_PROCESSOR, **_special_ids(data)}},
        "frawdllm",
    )
    rope = config.position_embedding_type == "rope"
    context = config.max_position_embeddings // (4 if rope else 1)
    weights = _weights(model, FRAWDLLM_RULES, "frawdllm")
    order = ["embeddings.token_emb.weight", *([] if rope else ["embeddings.pos_emb.weight"])]
    for index in range(config.num_hidden_layers):
        block = f"blocks.{index}"
        weights[f"{block}.attn.mask"] = causal_mask(config.max_position_embeddings, _floating_dtype(weights))
        order += [*_norm(f"{block}.ln1"), *_norm(f"{block}.ln2"), f"{block}.attn.mask"]
        order += [*_linear(f"{block}.attn.qkv_proj"), *_linear(f"{block}.attn.out_proj")]
        order += [*_linear(f"{block}.mlp.fc1"), *_linear(f"{block}.mlp.fc2")]
    order += [*_norm("ln_f"), "lm_head.weight"]
    fields = dict(
        vocab_size=config.vocab_size,
        n_embd=config.hidden_size,
        n_layer=config.num_hidden_layers,
        n_head=config.num_attention_heads,
        context_length=context,
        dropout=config.hidden_dropout,
        use_rope=rope,
        use_rmsnorm=bool(recorded.get("use_rmsnorm", False)),
        use_swiglu=bool(recorded.get("use_swiglu", False)),
        pad_token_id=config.pad_token_id,
        bos_token_id=config.bos_token_id,
        eos_token_id=config.eos_token_id,
    )
    return _ordered(weights, order, "frawdllm"), {"config.json": fields, "tokenizer.json": tokenizer}


def _special_ids(data: Mapping[str, Any]) -> dict[str, Any]:
    """The special_tokens entry of FrawdLLM's post-processor, with this tokenizer's ids of <|bos|> and <|eos|>."""
    ids = {
        **(data.get("model") or {}).get("vocab", {}),
        **{t["content"]: t["id"] for t in data.get("added_tokens") or []},
    }
    tokens = ("<|bos|>", "<|eos|>")
    return {"special_tokens": {token: {"id": token, "ids": [ids.get(token)], "tokens": [token]} for token in tokens}}


def miniembed_files(model: Any, source: SourceFolder) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    config = model.config
    check_encoder(config, (source.config.get("architectures") or ["MiniTFEncoderModel"])[0])
    if source.chat_template() is not None:
        raise OriginalRefused("MiniEmbed cannot express a chat_template: it embeds texts; remove chat_template.jinja.")
    data = source.json("tokenizer.json", "the tokenizer")
    model_part = data.get("model") or {}
    words = model_part.get("vocab") if model_part.get("type") == "WordLevel" else None
    if not isinstance(words, dict):
        raise OriginalRefused(
            f"{source.path}/tokenizer.json is a {model_part.get('type')} tokenizer; MiniEmbed reads a word-level "
            "vocabulary ({vocab_size, word_to_id}) split as its SimpleTokenizer splits."
        )
    word_to_id = dict(sorted(words.items(), key=lambda item: item[1]))
    vocabulary = {"vocab_size": len(word_to_id), "word_to_id": word_to_id}
    rebuilt = json.loads(miniembed_tokenizer(vocabulary).backend_tokenizer.to_str())
    for part in ("normalizer", "pre_tokenizer", "post_processor", "decoder"):
        if data.get(part) != rebuilt.get(part):
            raise OriginalRefused(
                f"MiniEmbed cannot express this tokenizer's {part}: its SimpleTokenizer lowercases, splits on "
                r"\b\w+\b|[^\w\s] and frames [CLS] ... [SEP], exactly as `minitf convert miniembed` writes it."
            )
    weights = _weights(model, MINIEMBED_RULES, "miniembed")
    weights["positional_encoding.pe"] = sinusoidal_table(config.max_position_embeddings, config.hidden_size).to(
        _floating_dtype(weights)
    )
    order = ["token_embedding.weight", "positional_encoding.pe"]
    for index in range(config.num_hidden_layers):
        layer = f"layers.{index}"
        order += [*_norm(f"{layer}.norm1"), *_norm(f"{layer}.norm2")]
        order += [name for part in "qkvo" for name in _linear(f"{layer}.attention.W_{part}")]
        order += [*_linear(f"{layer}.feed_forward.linear1"), *_linear(f"{layer}.feed_forward.linear2")]
    order += _norm("final_norm")
    arguments = dict(
        vocab_size=config.vocab_size,
        d_model=config.hidden_size,
        num_heads=config.num_attention_heads,
        num_layers=config.num_hidden_layers,
        d_ff=config.intermediate_size,
        max_seq_len=config.max_position_embeddings,
        dropout=config.hidden_dropout,
        pad_token_id=config.pad_token_id,
    )
    return _ordered(weights, order, "miniembed"), {"config.json": arguments, "tokenizer.json": vocabulary}


def hkproj_files(model: Any, source: SourceFolder) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    config = model.config
    check_seq2seq(config)
    if source.chat_template() is not None:
        raise OriginalRefused(
            "hkproj's pytorch-transformer cannot express a chat_template; remove chat_template.jinja."
        )
    recorded = source.recorded
    per_feature = config.norm_type == "per_feature_std_plus_eps"
    projection = recorded.get("projection") or ("proj" if per_feature else "project")
    # Both tables as the original built them (recorded), unless training since changed the length MiniTF keeps.
    recorded_lengths = [recorded.get(f"{side}_seq_len") for side in ("src", "tgt")]
    known = [value for value in recorded_lengths if isinstance(value, int)]
    lengths = dict.fromkeys(("src", "tgt"), int(config.max_position_embeddings))
    if len(known) == 2 and max(known) == lengths["src"]:
        lengths = dict(zip(("src", "tgt"), known))
    weights = _weights(model, hkproj_rules(projection), "hkproj")
    dtype = _floating_dtype(weights)
    for side, length in lengths.items():
        weights[f"{side}_pos.pe"] = sinusoidal_table(length, config.hidden_size).to(dtype)
    bias = config.attention_bias
    order: list[str] = []
    for stack, blocks in (("encoder", ("self",)), ("decoder", ("self", "cross"))):
        for index in range(config.num_hidden_layers):
            layer = f"{stack}.layers.{index}"
            for block in blocks:
                order += [n for part in "qkvo" for n in _linear(f"{layer}.{block}_attention_block.w_{part}", bias)]
            order += [
                *_linear(f"{layer}.feed_forward_block.linear_1"),
                *_linear(f"{layer}.feed_forward_block.linear_2"),
            ]
            for norm in range(len(blocks) + 1):
                order += [
                    f"{layer}.residual_connections.{norm}.norm.alpha",
                    f"{layer}.residual_connections.{norm}.norm.bias",
                ]
        order += [f"{stack}.norm.alpha", f"{stack}.norm.bias"]
    order += ["src_embed.embedding.weight", "tgt_embed.embedding.weight", "src_pos.pe", "tgt_pos.pe"]
    order += _linear(f"projection_layer.{projection}", config.lm_head_bias)
    arguments = dict(
        src_vocab_size=config.src_vocab_size,
        tgt_vocab_size=config.vocab_size,
        src_seq_len=lengths["src"],
        tgt_seq_len=lengths["tgt"],
        d_model=config.hidden_size,
        N=config.num_hidden_layers,
        h=config.num_attention_heads,
        dropout=config.hidden_dropout,
        d_ff=config.intermediate_size,
    )
    files: dict[str, Any] = {"config.json": arguments}
    tokenizers = recorded.get("tokenizers") or {}
    for side, default in HKPROJ_TOKENIZER_NAMES.items():
        data = source.json(f"{side}_tokenizer.json", f"the {side} tokenizer")
        name = recorded.get(f"{side}_tokenizer") or default
        if not re.fullmatch(r"[\w.-]+\.json", str(name)) or name == "config.json":
            raise ConversionError(
                f"config.json's {ORIGINAL_FORMAT_FIELD} names the tokenizer file {name!r}; convert the model again."
            )
        files[name] = restored_tokenizer(data, tokenizers.get(side) or {"post_processor": None}, "hkproj")
    return _ordered(weights, order, "hkproj"), files


def embedding_layer_files(source: SourceFolder, name: str) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """The embedding layers: the weights `minitf convert` wrote under MiniTF names (any prefix), back under theirs."""
    config = source.config
    with safe_open(str(source.path / EMBEDDING_FILES[0]), "pt") as handle:
        stored = {key: handle.get_tensor(key) for key in handle.keys()}

    def tensor(suffix: str) -> torch.Tensor | None:
        found = [value for key, value in stored.items() if key.endswith(suffix)]
        if len(found) > 1:
            raise ConversionError(f"{source.path / EMBEDDING_FILES[0]} holds several *{suffix}; keep one.")
        return found[0] if found else None

    tokens, positions = tensor("embed_tokens.weight"), tensor("embed_positions.weight")
    if tokens is None:
        raise ConversionError(
            f"{source.path / EMBEDDING_FILES[0]} holds no embed_tokens.weight; convert the layer again."
        )
    vocab_size, width = tokens.shape
    if name == "transformer-embedding":
        if config.get("scale_embeddings") is not True:
            raise _refuse(name, "scale_embeddings", config.get("scale_embeddings"), "it scales by sqrt(d_model)")
        length = int(config["max_position_embeddings"])
        weights = {"pe": sinusoidal_table(length, width).to(tokens.dtype), "token_embedding.weight": tokens}
        arguments = dict(vocab_size=vocab_size, d_model=width, max_len=length, pad_idx=0)
        return weights, {"config.json": arguments}
    weights = {"token_emb.weight": tokens}
    fields: dict[str, Any] = dict(vocab_size=vocab_size, n_embd=width, use_rope=True)
    if config.get("position_embedding_type") == "learned":
        if positions is None:
            raise ConversionError(
                f"{source.path / EMBEDDING_FILES[0]} lacks embed_positions.weight (learned positions)."
            )
        weights["pos_emb.weight"] = positions
        fields.update(use_rope=False, context_length=positions.shape[0])
    return weights, {"config.json": fields}


MODEL_WRITERS = {
    "char-gpt": char_gpt_files,
    "frawdllm": frawdllm_files,
    "miniembed": miniembed_files,
    "hkproj": hkproj_files,
}


def load_model(source: SourceFolder) -> Any:
    """The folder's model, built from this package's classes (no code of the folder runs), in eval mode."""
    from hf_minitf.modeling.modeling_minitf_encoder import MiniTFEncoderModel
    from hf_minitf.modeling.modeling_minitf_gpt import MiniTFGPTForCausalLM
    from hf_minitf.modeling.modeling_minitf_seq2seq import MiniTFSeq2SeqForConditionalGeneration

    classes: dict[str, Any] = {
        "gpt": MiniTFGPTForCausalLM,
        "encoder": MiniTFEncoderModel,
        "seq2seq": MiniTFSeq2SeqForConditionalGeneration,
    }
    family = family_of_model_type(source.config["model_type"])
    assert family is not None
    return classes[family.name].from_pretrained(source.path, trust_remote_code=False).eval()


def _write_json(path: Path, value: Any, name: str) -> None:
    """A side file formatted as the original writes it (a char list on one line, objects indented by 2)."""
    if isinstance(value, list):
        text = json.dumps(value) + "\n"
    elif name == "tokenizer.json" and "word_to_id" in value:
        text = json.dumps(value, indent=2)
    elif "model" in value and "added_tokens" in value:  # a `tokenizers` file: as tokenizers.Tokenizer.save writes it
        from tokenizers import Tokenizer

        text = Tokenizer.from_str(json.dumps(value)).to_str(pretty=True)
    else:
        text = json.dumps(value, indent=2) + "\n"
    path.write_text(text, encoding="utf-8")


def export_original(
    folder: str | Path, out: str | Path, *, format: str | None = None, overwrite: bool = False
) -> ExportedOriginal:
    """Write the MiniTF folder `folder` as the checkpoint and side files of its original project, into the folder `out`
    (atomically: all of it or nothing). `format` is a source of `minitf convert` (default: the one the conversion
    recorded, else the original whose layout the folder fits); what that original cannot compute is refused,
    naming the field, before anything is written."""
    source = open_folder(folder)
    name = choose_format(source, format)
    if source.layer:
        weights, side_files = embedding_layer_files(source, name)
    else:
        if name in LAYER_FORMATS:
            raise ConversionError(
                f"--format {name} takes the folder `minitf convert {name}` wrote, not a model folder."
            )
        weights, side_files = MODEL_WRITERS[name](load_model(source), source)
    checkpoint = CONVERTERS[name].checkpoint_file
    notes = []
    with atomic_output_dir(out, overwrite, existing_paths(folder)) as work:
        if checkpoint.endswith(".safetensors"):
            save_file(weights, str(work / checkpoint), {"format": "pt"})
        else:
            torch.save(_checkpoint_layout(name, weights, side_files), work / checkpoint)
        for file_name, value in side_files.items():
            _write_json(work / file_name, value, file_name)
    if name == "frawdllm":
        notes.append("best.pt's `config` is a plain dict: FrawdLLM(ModelConfig(**checkpoint['config']))")
    return ExportedOriginal(name, Path(out), [checkpoint, *side_files], notes)


def _checkpoint_layout(name: str, weights: dict[str, torch.Tensor], side_files: Mapping[str, Any]) -> Any:
    """What each original's torch.save file holds: a bare state_dict, or its training checkpoint's dict."""
    if name == "frawdllm":
        return {
            "epoch": 0,
            "global_step": 0,
            "model_state_dict": weights,
            "optimizer_state_dict": {},
            "scheduler_state_dict": {},
            "val_loss": None,
            "config": dict(side_files["config.json"]),
        }
    if name == "hkproj":
        return {"epoch": 0, "model_state_dict": weights, "optimizer_state_dict": {}, "global_step": 0}
    return weights


__all__ = ["ExportedOriginal", "OriginalRefused", "causal_mask", "export_original", "sinusoidal_table"]
