"""Convert a FrawdLLM model (a training checkpoint, a bare state_dict, a Hugging Face folder FrawdLLM published
or its Hub repo id) to `MiniTFGPTForCausalLM` + its byte-level BPE tokenizer, and FrawdLLM's `Embeddings` layer to
the GPT's embedding weights.

Its help (`hf_minitf.catalog.converters`) says what it reads, what it infers from the weights and what must be given, its presets' inert
use_rmsnorm / use_swiglu flags, the chat template and the loss (`minitf convert frawdllm --help` shows it).

Run: `minitf convert frawdllm CHECKPOINT --tokenizer tokenizer.json --out DIR`, or
`minitf convert frawdllm OWNER/REPO_OR_FOLDER --out DIR`, or `convert_frawdllm`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, cast

import torch
from tokenizers import AddedToken, processors
from transformers import GenerationConfig, PreTrainedTokenizerFast

from hf_minitf.cards import render_model_card
from hf_minitf.catalog import FRAWDLLM_PRESETS
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
    tokenizer_record,
)
from hf_minitf.conversion.checkpoint import Checkpoint, ConversionError, PickledRecord, open_checkpoint, stand_in_class
from hf_minitf.conversion.gpt_common import gpt_rules, head_is_tied
from hf_minitf.hub.sources import HubSourceError, download_repo_files, looks_like_repo_id
from hf_minitf.modeling.configuration_minitf_gpt import MiniTFGPTConfig
from hf_minitf.modeling.modeling_minitf_gpt import MiniTFGPTForCausalLM
from hf_minitf.safety.output_folders import OutputFolder, existing_paths, output_folder
from hf_minitf.tokenization.gpt import BPE_SPECIAL_TOKENS, load_bpe_tokenizer

ModelConfigStandIn = stand_in_class("src.model.config.ModelConfig")

RULES = gpt_rules(
    "embeddings.token_emb", "embeddings.pos_emb", qkv="attn.qkv_proj", out="attn.out_proj", fc1="mlp.fc1", fc2="mlp.fc2"
)
BUFFERS = [r"blocks\.\d+\.attn\.mask"]
# FrawdLLM's tokenizer: <|pad|>=0 <|unk|>=1 <|bos|>=2 <|eos|>=3.
DEFAULT_IDS = {"pad_token_id": 0, "bos_token_id": 2, "eos_token_id": 3}
# FrawdLLM's ModelConfig fields, and the Hugging Face aliases its published config.json repeats.
FIELDS = (
    "vocab_size",
    "n_embd",
    "n_layer",
    "n_head",
    "context_length",
    "dropout",
    "use_rope",
    "use_rmsnorm",
    "use_swiglu",
    "pad_token_id",
    "bos_token_id",
    "eos_token_id",
    "head_dim",
)
ALIASES = {"hidden_size": "n_embd", "num_hidden_layers": "n_layer", "num_attention_heads": "n_head"}
INERT_FLAGS = {"use_rmsnorm": "RMSNorm", "use_swiglu": "SwiGLU"}
# The files of a FrawdLLM Hugging Face folder that conversion reads (its .py files are never read).
PUBLISHED_FILES = ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json")
USER_TOKEN, ASSISTANT_TOKEN = "<|user|>", "<|assistant|>"
# FrawdLLM's chat format (src/training/sft_dataset.py, scripts/chat.py), one exchange at a time:
# <|bos|><|user|>{instruction}<|assistant|>{response}<|eos|>. A conversation is its exchanges one after another.
_ALTERNATION = "FrawdLLM's chat format alternates user and assistant messages, starting with a user message."
CHAT_TEMPLATE = (
    "{%- for message in messages -%}"
    "{%- if message['role'] == 'user' -%}"
    '{%- if loop.index0 % 2 != 0 -%}{{ raise_exception("' + _ALTERNATION + '") }}{%- endif -%}'
    "{{ bos_token }}" + USER_TOKEN + "{{ message['content'] }}"
    "{%- elif message['role'] == 'assistant' -%}"
    '{%- if loop.index0 % 2 != 1 -%}{{ raise_exception("'
    + _ALTERNATION
    + '") }}{%- endif -%}'
    + ASSISTANT_TOKEN
    + "{{ message['content'] }}{{ eos_token }}"
    "{%- else -%}"
    "{{ raise_exception(\"FrawdLLM's chat format has only user and assistant messages, not '\" ~ message['role'] "
    '~ "\'.") }}'
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}" + ASSISTANT_TOKEN + "{%- endif -%}"
)


def stored_config(checkpoint: Checkpoint) -> dict[str, Any]:
    """The ModelConfig fields stored in a training checkpoint ({} for a bare state_dict)."""
    config = checkpoint.extras.get("config")
    if config is None:
        return {}
    fields = vars(config) if isinstance(config, PickledRecord) else config
    if not isinstance(fields, Mapping):
        raise ConversionError(
            f"{checkpoint.path}: the stored `config` is a {type(config).__name__}, not a ModelConfig."
        )
    return {key: value for key, value in fields.items() if not key.startswith("_")}


def published_fields(config: Mapping[str, Any], origin: str) -> dict[str, Any]:
    """FrawdLLM ModelConfig fields from a published config.json (FrawdLLM's names, else the HF aliases it also
    writes); the rest (auto_map, transformers_version, ...) is not FrawdLLM's model and is ignored."""
    fields = {key: config[key] for key in FIELDS if key in config}
    for alias, name in ALIASES.items():
        if alias in config:
            if name in fields and fields[name] != config[alias]:
                raise ConversionError(
                    f"{origin} says {name}={fields[name]} but {alias}={config[alias]}; they must agree."
                )
            fields.setdefault(name, config[alias])
    return fields


def _check_fields(fields: Mapping[str, Any], origin: str) -> None:
    for key, value in fields.items():
        if not isinstance(value, (bool, int, float, str, type(None))):
            raise ConversionError(f"{origin}: field {key} holds a {type(value).__name__}, expected a number or text.")


def check_layer_variant(checkpoint: Checkpoint) -> None:
    """Refuse weights that really are RMSNorm or SwiGLU (FrawdLLM's code builds neither), naming the keys.

    LayerNorm has a bias beside its weight, RMSNorm has none; FrawdLLM's MLP is fc1 -> GELU -> fc2 with
    fc1's output as wide as fc2's input, while SwiGLU adds a gate projection (or fuses it into a fc1 twice
    as wide)."""
    norms = sorted(
        {
            key.removesuffix(".weight")
            for key in checkpoint.keys()
            if re.fullmatch(r"(blocks\.\d+\.ln[12]|ln_f)\.weight", key)
        }
    )
    biasless = [f"{norm}.weight" for norm in norms if f"{norm}.bias" not in checkpoint]
    if biasless:
        raise ConversionError(
            f"{checkpoint.path}: {', '.join(biasless[:6])}{' ...' if len(biasless) > 6 else ''} have no bias: "
            "these are RMSNorm weights. FrawdLLM's code always builds LayerNorm (with bias), whatever use_rmsnorm "
            "says, and MiniTF GPT has no RMSNorm; this checkpoint was made by other code and cannot be converted."
        )
    mlp_parts = {"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"}
    gates = sorted(
        key
        for key in checkpoint.keys()
        if (m := re.fullmatch(r"blocks\.\d+\.mlp\.(.+)", key)) and m.group(1) not in mlp_parts
    )
    fused = [
        f"blocks.{index}.mlp.fc1.weight {list(checkpoint.shape(f'blocks.{index}.mlp.fc1.weight'))}"
        for index in range(count_layers(checkpoint, r"blocks\.(\d+)\."))
        if f"blocks.{index}.mlp.fc1.weight" in checkpoint
        and f"blocks.{index}.mlp.fc2.weight" in checkpoint
        and checkpoint.shape(f"blocks.{index}.mlp.fc1.weight")[0]
        != checkpoint.shape(f"blocks.{index}.mlp.fc2.weight")[1]
    ]
    if gates or fused:
        found = gates or [f"{fused[0]} (wider than fc2's input: a fused gate)"]
        raise ConversionError(
            f"{checkpoint.path}: {', '.join(found[:6])}{' ...' if len(found) > 6 else ''} are SwiGLU weights. "
            "FrawdLLM's code always builds the GELU MLP (fc1, fc2), whatever use_swiglu says, and MiniTF GPT has "
            "no SwiGLU; this checkpoint was made by other code and cannot be converted."
        )


def inert_flags(fields: Mapping[str, Any]) -> list[str]:
    """The use_rmsnorm / use_swiglu flags a config sets, which FrawdLLM's model code never reads."""
    return [flag for flag in INERT_FLAGS if fields.get(flag)]


def preset_heads(vocab_size: int, n_embd: int, n_layer: int, context_length: int, use_rope: bool) -> int | None:
    """The head count of the FrawdLLM preset with these sizes (chat models add tokens to a preset's vocabulary)."""
    for size in FRAWDLLM_PRESETS.values():
        if (size.hidden_size, size.num_layers, size.context_length, size.rope) == (
            n_embd,
            n_layer,
            context_length,
            use_rope,
        ) and vocab_size >= size.vocab_size:
            return size.num_heads
    return None


def infer_frawdllm_config(
    checkpoint: Checkpoint, given: Mapping[str, Any], num_heads: int | None, context_length: int | None
) -> dict[str, Any]:
    """FrawdLLM ModelConfig fields from the weights, completed and checked by `given` and the options."""
    vocab_size, n_embd = shape_of(checkpoint, "embeddings.token_emb.weight")
    use_rope = "embeddings.pos_emb.weight" not in checkpoint
    check_layer_variant(checkpoint)
    inferred: dict[str, Any] = dict(
        vocab_size=vocab_size, n_embd=n_embd, n_layer=count_layers(checkpoint, r"blocks\.(\d+)\."), use_rope=use_rope
    )
    if not use_rope:
        inferred["context_length"] = shape_of(checkpoint, "embeddings.pos_emb.weight")[0]
    elif "blocks.0.attn.mask" in checkpoint:
        inferred["context_length"] = checkpoint.shape("blocks.0.attn.mask")[-1] // 4
    check_given(given, inferred, "FrawdLLM config")
    fields = {**given, **inferred}
    for key, value, option in (
        ("context_length", context_length, "--context-length"),
        ("n_head", num_heads, "--num-heads"),
    ):
        if value is not None:
            if fields.get(key) is not None and fields[key] != value:
                raise ConversionError(
                    f"{option} {value} contradicts the checkpoint's {key}={fields[key]}; "
                    f"leave {option} out (or give the value the model was trained with)."
                )
            fields[key] = value
    if fields.get("context_length") is None:
        raise ConversionError(
            "A RoPE checkpoint without its attention-mask buffer does not tell its context length; "
            "pass --context-length (the ModelConfig's context_length)."
        )
    if fields.get("n_head") is None:
        fields["n_head"] = preset_heads(vocab_size, n_embd, fields["n_layer"], fields["context_length"], use_rope)
    fields["n_head"] = require_heads(fields.get("n_head"), n_embd, "--num-heads (or --config)")
    if fields.get("head_dim") not in (None, n_embd // fields["n_head"]):
        raise ConversionError(
            f"head_dim={fields['head_dim']} does not match n_embd/n_head={n_embd // fields['n_head']}."
        )
    for key, value in DEFAULT_IDS.items():
        if fields.get(key) is None:
            fields[key] = value
    return fields


def frawdllm_gpt_config(fields: Mapping[str, Any], tied: bool) -> MiniTFGPTConfig:
    """The MiniTFGPTConfig that computes what FrawdLLM with these ModelConfig fields computes."""
    rope = bool(fields["use_rope"])
    dropout = float(fields.get("dropout") or 0.0)
    return MiniTFGPTConfig(
        vocab_size=fields["vocab_size"],
        hidden_size=fields["n_embd"],
        num_hidden_layers=fields["n_layer"],
        num_attention_heads=fields["n_head"],
        intermediate_size=fields["intermediate_size"],
        # FrawdLLM accepts 4 x context_length tokens with RoPE, exactly context_length with learned positions.
        max_position_embeddings=fields["context_length"] * (4 if rope else 1),
        position_embedding_type="rope" if rope else "learned",
        rope_interleaved=True,
        rope_theta=10000.0,
        hidden_dropout=dropout,
        attention_dropout=dropout,
        layer_norm_eps=1e-5,
        tie_word_embeddings=tied,
        pad_token_id=fields["pad_token_id"],
        bos_token_id=fields["bos_token_id"],
        eos_token_id=fields["eos_token_id"],
    )


def bos_only_prompts(tokenizer: PreTrainedTokenizerFast) -> str | None:
    """FrawdLLM's tokenizer files frame every text as `<|bos|> text <|eos|>` (a whole training document). A prompt
    ending in <|eos|> asks for nothing, and FrawdLLM's own generation (scripts/chat.py, test_hf_model.py) encodes
    `<|bos|>prompt` instead: make `tokenizer(text)` do that. Returns a note when it changed something."""
    backend = tokenizer.backend_tokenizer
    post = json.loads(backend.to_str()).get("post_processor") or {}
    pieces = [next(iter(piece.values()))["id"] for piece in post.get("single", [])]
    bos, eos = tokenizer.bos_token, tokenizer.eos_token
    if post.get("type") != "TemplateProcessing" or pieces != [bos, "A", eos]:
        return None
    backend.post_processor = processors.TemplateProcessing(
        single=f"{bos} $A", pair=f"{bos} $A $B:1", special_tokens=[(bos, tokenizer.bos_token_id)]
    )
    return (
        f"tokenizer(text) gives {bos} text, as FrawdLLM's own generation encodes prompts (its tokenizer file also "
        f"appended {eos}, which ends a training document, not a prompt)"
    )


def frawdllm_tokenizer(path: str | Path, fields: Mapping[str, Any]) -> tuple[PreTrainedTokenizerFast, list[str], bool]:
    """FrawdLLM's BPE JSON as a fast tokenizer whose special ids and size fit the model, with FrawdLLM's chat
    template when it has the chat tokens; returns it, notes on what was changed or added, and whether prompts
    were made `<|bos|> text` (see `bos_only_prompts`)."""
    try:
        limit = fields["context_length"] * (4 if fields["use_rope"] else 1)
        tokenizer = load_bpe_tokenizer(path, model_max_length=limit)
    except ValueError as error:
        raise ConversionError(f"Tokenizer {path}: {error}") from error
    notes = []
    vocab = tokenizer.get_vocab()
    chat_tokens = [USER_TOKEN, ASSISTANT_TOKEN]
    held = [token for token in chat_tokens if token in vocab]
    # FrawdLLM's SFT and chat scripts add the chat tokens in memory, after the saved vocabulary.
    add_chat_tokens = not held and fields["vocab_size"] == len(vocab) + len(chat_tokens)
    if len(held) == 1:
        raise ConversionError(
            f"Tokenizer {path} holds {held[0]} but not the other chat token; FrawdLLM's chat "
            f"format needs both {USER_TOKEN} and {ASSISTANT_TOKEN}."
        )
    largest = max(vocab.values())
    if largest >= fields["vocab_size"]:
        raise ConversionError(
            f"Tokenizer {path} has token id {largest}, past the model's "
            f"vocab_size={fields['vocab_size']}; give the tokenizer the model was trained with."
        )
    for key in ("pad_token_id", "bos_token_id", "eos_token_id"):
        if getattr(tokenizer, key) != fields[key]:
            token = BPE_SPECIAL_TOKENS[key.replace("_id", "")]
            raise ConversionError(
                f"Tokenizer {path} gives {token} id {getattr(tokenizer, key)}, the model's config "
                f"says {key}={fields[key]}."
            )
    prompts = bos_only_prompts(tokenizer)
    if prompts:
        notes.append(prompts)
    if held or add_chat_tokens:
        # As special tokens: one id each wherever they appear in a text, dropped by skip_special_tokens.
        tokenizer.add_tokens(
            [AddedToken(token, special=True, normalized=False) for token in chat_tokens], special_tokens=True
        )
        tokenizer.chat_template = CHAT_TEMPLATE
        ids = cast(list[int], tokenizer.convert_tokens_to_ids(chat_tokens))  # a list of tokens gives a list of ids
        added = (
            (
                f"; the tokenizer file lacks them, so they were added as FrawdLLM's SFT and chat scripts add them "
                f"for a model of {fields['vocab_size']} tokens"
            )
            if add_chat_tokens
            else ""
        )
        notes.append(
            f"chat template: FrawdLLM's <|bos|><|user|>{{instruction}}<|assistant|>{{response}}<|eos|> "
            f"({USER_TOKEN}={ids[0]}, {ASSISTANT_TOKEN}={ids[1]}{added}); use "
            "tokenizer.apply_chat_template(messages, add_generation_prompt=True) or pass messages to "
            'pipeline("text-generation")'
        )
    return tokenizer, notes, prompts is not None


def fitting_prompt(tokenizer: PreTrainedTokenizerFast, text: str, max_tokens: int) -> str:
    """The longest start of `text`, in words, that `tokenizer` writes in at most `max_tokens` tokens: the card's
    example leaves the model room for the new tokens it asks for (model_cards/gpt.md: up to half its positions)."""
    words = text.split()
    while len(words) > 1 and len(tokenizer(" ".join(words)).input_ids) > max_tokens:
        words.pop()
    return " ".join(words)


def model_card(
    checkpoint_name: str,
    config: MiniTFGPTConfig,
    fields: Mapping[str, Any],
    plans,
    tokenizer: PreTrainedTokenizerFast,
    bos_prompts: bool,
) -> str:
    """The converted folder's card: what FrawdLLM model this is, where it came from, how it differs."""
    positions = (
        (
            "rotary positions (RoPE, interleaved pairs as FrawdLLM computes them; up to 4 x the "
            f"{fields['context_length']}-token training context)"
        )
        if fields["use_rope"]
        else f"learned positions ({fields['context_length']} tokens)"
    )
    sections = [
        "## Differences from FrawdLLM's own wrapper\n\nThis model has a KV cache, honours `attention_mask` "
        "(left-padded batches generate what each prompt generates alone) and uses transformers' `generate`. "
        "Its `labels` follow transformers (the input ids, shifted inside; -100 is ignored), while FrawdLLM's "
        "loss took pre-shifted targets and ignored pad id 0."
    ]
    flags = inert_flags(fields)
    if flags:
        sections.append(
            "## Configuration flags without effect\n\nThe original configuration sets "
            f"{' and '.join(f'`{flag}=True`' for flag in flags)} (FrawdLLM's `tiny-llama` / `small-llama` presets do), "
            "but FrawdLLM's model code never reads these flags: its blocks always build LayerNorm with bias and the "
            "GELU MLP, and this checkpoint's weights are exactly those. So this is a LayerNorm + GELU model, "
            f"converted as such (no {' or '.join(INERT_FLAGS[flag] for flag in flags)})."
        )
    if bos_prompts:
        sections.append(
            f"## Prompts\n\n`tokenizer(text)` gives `{tokenizer.bos_token}` then the text, as FrawdLLM's own "
            f"generation encodes a prompt. FrawdLLM's tokenizer file also appended `{tokenizer.eos_token}`, which "
            "ends a training document; to encode a whole document that way, add the token yourself."
        )
    chat = tokenizer.chat_template is not None
    if chat:
        sections.append(
            "## Chat format\n\nFrawdLLM's chat models were trained on "
            "`<|bos|><|user|>{instruction}<|assistant|>{response}<|eos|>`; the tokenizer's chat template writes "
            "exactly that, and generation stops at `<|eos|>`:\n\n```python\nfrom transformers import pipeline\n\n"
            'chat = pipeline("text-generation", model="path/to/this/folder")\n'
            'print(chat([{"role": "user", "content": "Tell me a story."}], max_new_tokens=100))\n```\n\n'
            "FrawdLLM trained single exchanges; a longer conversation is written as its exchanges one after "
            "another, each in that format. There is no system role."
        )
    return render_model_card(
        "gpt",
        config,
        title="FrawdLLM (converted)",
        prompt=fitting_prompt(tokenizer, "Once upon a time", config.max_position_embeddings // 2),
        summary=f"A FrawdLLM decoder-only language model with {positions} and a byte-level BPE tokenizer"
        f"{' and its chat tokens' if chat else ''}.",
        origin=f"Converted with `minitf convert frawdllm` from `{checkpoint_name}` (FrawdLLM, "
        "tsingla1998/FrawdLLM). The converted model gives the original's logits to float32 rounding.",
        notes="\n\n".join(sections),
        num_parameters=num_parameters(plans),
        original_project="FrawdLLM",
        converter="frawdllm",
        base_model=checkpoint_name if "/" in checkpoint_name else None,  # a Hub repo id, not a file name
    )


def plan_frawdllm(
    checkpoint: Checkpoint,
    tokenizer: str | Path,
    num_heads: int | None = None,
    config: Mapping[str, Any] | None = None,
    context_length: int | None = None,
    dtype: str = "auto",
    name: str | None = None,
) -> ConvertedModel:
    """Plan the conversion of an open FrawdLLM checkpoint (see `minitf convert frawdllm --help`); `name` is what the
    card says it was converted from (default: the file name)."""
    require_architecture(checkpoint, "frawdllm", "FrawdLLM")
    stored, given = stored_config(checkpoint), dict(config or {})
    _check_fields(stored, f"{checkpoint.path} (stored ModelConfig)")
    _check_fields(given, "the given FrawdLLM config")
    check_given(given, stored, "given FrawdLLM config (compared with the checkpoint's stored config)")
    fields = infer_frawdllm_config(checkpoint, {**stored, **given}, num_heads, context_length)
    fields["intermediate_size"] = shape_of(checkpoint, "blocks.0.mlp.fc1.weight")[0]
    tied = head_is_tied(checkpoint, "embeddings.token_emb.weight", "lm_head.weight")
    gpt_config = frawdllm_gpt_config(fields, tied)
    ignore = BUFFERS + ([r"lm_head\.weight"] if tied else [])
    plans = plan_weights(checkpoint, MiniTFGPTForCausalLM, gpt_config, RULES, ignore, dtype)
    fast_tokenizer, notes, bos_prompts = frawdllm_tokenizer(tokenizer, fields)
    flags_set = {flag: True for flag in INERT_FLAGS if fields.get(flag)}
    record_original(gpt_config, "frawdllm", **flags_set, tokenizer=tokenizer_record(tokenizer))
    generation_config = GenerationConfig(
        bos_token_id=fields["bos_token_id"], eos_token_id=fields["eos_token_id"], pad_token_id=fields["pad_token_id"]
    )
    flags = inert_flags(fields)
    if flags:
        notes.insert(
            0,
            f"{', '.join(f'{flag}=True' for flag in flags)} in the original config had no effect "
            "(FrawdLLM's model code never reads them); the weights are LayerNorm + GELU and were converted "
            "as such",
        )
    card = model_card(name or checkpoint.path.name, gpt_config, fields, plans, fast_tokenizer, bos_prompts)
    inferred = {key: fields[key] for key in ("vocab_size", "n_embd", "n_layer", "n_head", "context_length", "use_rope")}
    inferred.update(
        tied_lm_head=tied,
        inert_flags=flags,
        chat_template=fast_tokenizer.chat_template is not None,
        bos_only_prompts=bos_prompts,
    )
    return ConvertedModel(
        MiniTFGPTForCausalLM, gpt_config, plans, fast_tokenizer, generation_config, card, inferred, notes=notes
    )


def _published_folder(folder: Path, tokenizer: str | Path | None) -> tuple[Path, dict[str, Any], Path]:
    """The weights file, ModelConfig fields and tokenizer file of a FrawdLLM Hugging Face folder."""
    config_path = folder / "config.json"
    if not config_path.is_file():
        raise ConversionError(
            f"{folder} has no config.json: it is not a Hugging Face folder. Pass a FrawdLLM "
            "checkpoint file, or a folder made by FrawdLLM's scripts/convert_to_hf.py."
        )
    config = read_json(config_path, "FrawdLLM config")
    if config.get("model_type") != "frawdllm":
        hint = (
            " It is already a MiniTF folder: load it directly."
            if str(config.get("model_type", "")).startswith("minitf")
            else ""
        )
        raise ConversionError(
            f'{config_path} has model_type={config.get("model_type")!r}, not "frawdllm": this is '
            f"not a folder FrawdLLM published.{hint}"
        )
    weights = folder / "model.safetensors"
    if not weights.is_file():
        present = sorted(path.name for path in folder.iterdir() if path.suffix in (".safetensors", ".bin", ".json"))
        raise ConversionError(
            f"{folder} has no model.safetensors (found: {', '.join(present) or 'nothing'}); "
            "FrawdLLM's convert_to_hf.py writes one. Sharded or .bin weights are not supported."
        )
    tokenizer_path = Path(tokenizer) if tokenizer is not None else folder / "tokenizer.json"
    if not tokenizer_path.is_file():
        raise ConversionError(f"{folder} has no tokenizer.json; pass --tokenizer with FrawdLLM's tokenizer JSON.")
    return weights, published_fields(config, str(config_path)), tokenizer_path


def convert_frawdllm(
    checkpoint: str | Path,
    out: str | Path | OutputFolder,
    *,
    tokenizer: str | Path | None = None,
    num_heads: int | None = None,
    config: str | Path | Mapping[str, Any] | None = None,
    context_length: int | None = None,
    revision: str | None = None,
    dtype: str = "auto",
    overwrite: bool = False,
    license: str | None = None,
) -> ConvertedModel:
    """Convert a FrawdLLM checkpoint file, published Hugging Face folder or Hub repo id into the Hugging Face
    folder `out`; returns what was converted.
    `license` is the card's (default: the one the original project states, else `other`)."""
    target = output_folder(out, overwrite, existing_paths(checkpoint, tokenizer, config))
    given = read_json(config, "FrawdLLM config")
    name, prefix = None, ""
    if looks_like_repo_id(checkpoint):
        name = str(checkpoint)
        try:
            checkpoint = download_repo_files(name, PUBLISHED_FILES, revision)
        except HubSourceError as error:
            raise ConversionError(str(error)) from None
    elif revision is not None:
        raise ConversionError(f"--revision applies to a Hub repo id, but {checkpoint} is a local path.")
    checkpoint = Path(checkpoint)
    if not checkpoint.exists():
        raise ConversionError(
            f"{checkpoint} does not exist. Pass a FrawdLLM checkpoint file, a folder FrawdLLM's "
            "convert_to_hf.py wrote, or the Hub repo id (owner/name) of one."
        )
    if checkpoint.is_dir():
        checkpoint, published, tokenizer = _published_folder(checkpoint, tokenizer)
        check_given(given, published, "given FrawdLLM config (compared with the folder's config.json)")
        given, prefix = {**published, **given}, "model."
        name = name or checkpoint.parent.name
    elif tokenizer is None:
        raise ConversionError(
            "Pass --tokenizer (FrawdLLM's tokenizer JSON): a checkpoint file does not hold it. "
            "A published Hugging Face folder or repo id holds its own."
        )
    return convert_checkpoint(
        checkpoint,
        target,
        lambda source: plan_frawdllm(source, tokenizer, num_heads, given, context_length, dtype, name),
        license,
        allowed_classes=[ModelConfigStandIn],
        key_prefix=prefix,
    )


def convert_frawdllm_embeddings(
    checkpoint: str | Path, prefix: str = "model."
) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """FrawdLLM's `Embeddings` state_dict as MiniTF GPT embedding weights under `prefix`.

    Returns the weights (load them into a larger `MiniTFGPTModel`/`ForCausalLM` with `strict=False`; prefix ""
    for `MiniTFGPTModel`) and the config fields they fix (vocab_size, hidden_size, position_embedding_type,
    max_position_embeddings).
    """
    with open_checkpoint(checkpoint) as source:
        vocab_size, hidden_size = embedding_layer_size(
            source, "frawdllm-embeddings", "FrawdLLM Embeddings layer", optional=["pos_emb.weight"]
        )
        weights = {f"{prefix}embed_tokens.weight": source.get("token_emb.weight").clone()}
        fields: dict[str, Any] = dict(vocab_size=vocab_size, hidden_size=hidden_size, position_embedding_type="rope")
        if "pos_emb.weight" in source:
            positions, width = source.shape("pos_emb.weight")
            if width != hidden_size:
                raise ConversionError(
                    f"{source.path}: pos_emb.weight has width {width}, token_emb.weight {hidden_size}."
                )
            weights[f"{prefix}embed_positions.weight"] = source.get("pos_emb.weight").clone()
            fields.update(position_embedding_type="learned", max_position_embeddings=positions)
    return weights, fields
