"""Machinery every source shares: key maps checked against the target model, config inference helpers,
and writing a complete Hugging Face folder (weights streamed, config, generation config, code, tokenizer,
card) atomically."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file
from transformers import GenerationConfig, PreTrainedConfig, PreTrainedModel, PreTrainedTokenizerBase
from transformers.dynamic_module_utils import custom_object_save

from hf_minitf.cards import relicense_card
from hf_minitf.catalog.converters import CONVERTERS, ORIGINAL_FORMAT_FIELD
from hf_minitf.catalog.limits import DTYPE_NAMES
from hf_minitf.conversion.checkpoint import Checkpoint, ConversionError, open_checkpoint
from hf_minitf.conversion.output import TensorPlan, cast_for_output, write_safetensors
from hf_minitf.modeling.layers import SinusoidalPositionalEmbedding
from hf_minitf.safety.json_files import JSON_KINDS
from hf_minitf.safety.json_files import read_json as read_checked_json
from hf_minitf.safety.output_folders import OutputFolder, atomic_output_dir, existing_paths, output_folder

# The dtypes a conversion can write, by the names `dtype=` (and `minitf convert --dtype`) takes; "auto" keeps the
# checkpoint's.
DTYPES = {name: getattr(torch, name) for name in DTYPE_NAMES}

# Anchor keys that identify each original codebase (by its `minitf convert` source name), to name the right
# converter when given the wrong one. Checked in this order: a whole model before its embedding layer.
SIGNATURES = {
    "char-gpt": ("wte.weight", "blocks.0.attn.qkv.weight"),
    "frawdllm": ("embeddings.token_emb.weight", "blocks.0.attn.qkv_proj.weight"),
    "miniembed": ("token_embedding.weight", "layers.0.attention.W_q.weight"),
    "hkproj": ("src_embed.embedding.weight", "encoder.layers.0.self_attention_block.w_q.weight"),
    "transformer-embedding": ("token_embedding.weight", "pe"),
    "frawdllm-embeddings": ("token_emb.weight",),
}


# A key-map rule: a regex over the target model's parameter names, and the template (using the regex's
# groups, as in `re.Match.expand`) of the original name the weight is copied from.
Rule = tuple[str, str]


def _short(items: Sequence[str], limit: int = 12) -> str:
    shown = ", ".join(items[:limit])
    return shown + (f", ... ({len(items) - limit} more)" if len(items) > limit else "")


def identify(checkpoint: Checkpoint) -> str | None:
    """The original codebase a checkpoint's keys look like (by anchor keys), or None."""
    for name, anchors in SIGNATURES.items():
        if all(anchor in checkpoint for anchor in anchors):
            return name
    return None


def require_architecture(checkpoint: Checkpoint, source: str, description: str) -> None:
    """Raise a clear error when the checkpoint lacks this source's anchor keys, naming the missing ones and,
    when the keys are another source's, the command and function that convert it."""
    missing = [anchor for anchor in SIGNATURES[source] if anchor not in checkpoint]
    if not missing:
        return
    found = identify(checkpoint)
    hint = ""
    if found:
        hint = (
            f" It looks like a {CONVERTERS[found].project} checkpoint: use `minitf convert {found}` "
            f"(or `hf_minitf.conversion.{CONVERTERS[found].function}`)."
        )
    raise ConversionError(
        f"{checkpoint.path} is not a {description} checkpoint: it lacks {', '.join(missing)}. "
        f"Its keys: {_short(sorted(checkpoint.keys()), 8)}.{hint}"
    )


def count_layers(checkpoint: Checkpoint, pattern: str) -> int:
    """Number of layers from keys matching `pattern` (one group: the layer index); indices must be 0..N-1."""
    indices = {int(m.group(1)) for key in checkpoint.keys() if (m := re.match(pattern, key))}
    if not indices:
        raise ConversionError(f"{checkpoint.path} has no layer keys matching {pattern!r}.")
    if indices != set(range(len(indices))):
        missing = sorted(set(range(max(indices) + 1)) - indices)
        raise ConversionError(f"{checkpoint.path}: layers {missing} are missing (found layers {sorted(indices)}).")
    return len(indices)


def shape_of(checkpoint: Checkpoint, key: str) -> tuple[int, ...]:
    """Shape of an original tensor needed to infer the config; a clear error when it is absent."""
    if key not in checkpoint:
        raise ConversionError(f"{checkpoint.path} lacks {key}, needed to infer the model's size.")
    return checkpoint.shape(key)


def _divisors(number: int) -> list[int]:
    """The divisors of `number`, found up to its square root (a width claimed by zero-size tensors can be huge)."""
    small = [divisor for divisor in range(1, math.isqrt(number) + 1) if number % divisor == 0]
    return sorted({*small, *(number // divisor for divisor in small)})


def require_heads(num_heads: int | None, hidden_size: int, option: str, stored: int | None = None) -> int:
    """The head count, which no weight shape reveals: the option, else the `stored` config's value; an error
    listing the valid choices when neither is given, or when they disagree."""
    if num_heads is not None and stored is not None and num_heads != stored:
        raise ConversionError(f"{option.split()[0]} {num_heads} contradicts the given config's head count {stored}.")
    num_heads = num_heads if num_heads is not None else stored
    if num_heads is not None and num_heads > 0 and hidden_size > 0 and hidden_size % num_heads == 0:
        return num_heads
    choices = _divisors(hidden_size)
    if num_heads is None:
        raise ConversionError(
            f"The checkpoint cannot tell the number of attention heads (hidden size {hidden_size} splits into any "
            f"of {choices} heads and the weights look the same); pass {option} with the value the model was "
            "trained with."
        )
    if num_heads not in choices:
        raise ConversionError(f"{num_heads} heads do not divide hidden size {hidden_size}; valid: {choices}.")
    return num_heads


def sinusoidal_length(checkpoint: Checkpoint, key: str, hidden_size: int) -> int:
    """Rows of a stored sinusoidal table (shape (1, L, d) or (L, d)), checked against the formula the
    converted model computes on the fly, so a different table is an error rather than silently other numbers."""
    shape = checkpoint.shape(key)
    if len(shape) not in (2, 3) or shape[-1] != hidden_size or (len(shape) == 3 and shape[0] != 1):
        raise ConversionError(f"{checkpoint.path}: {key} has shape {list(shape)}, expected (1, length, {hidden_size}).")
    stored = checkpoint.get(key).reshape(shape[-2], hidden_size).float()
    computed = SinusoidalPositionalEmbedding(hidden_size)(torch.arange(shape[-2]))
    difference = (stored - computed).abs().max().item() if stored.numel() else 0.0
    if difference > 1e-4:
        raise ConversionError(
            f"{checkpoint.path}: the positional table {key} differs from the standard sinusoidal one (sin on even, "
            f"cos on odd features, base 10000) by up to {difference:.3g}; this model cannot reproduce it."
        )
    return shape[-2]


def read_json(path: str | Path | Mapping[str, Any] | None, what: str) -> dict[str, Any]:
    """A JSON object from a file, with a clear error naming the file; a mapping given instead is copied, None
    gives {}."""
    if isinstance(path, Mapping):
        return dict(path)
    if path is None:
        return {}
    return read_json_file(Path(path), what, f"give the {what} as a JSON object")


def read_json_file(path: Path, what: str, advice: str, expected: type = dict) -> Any:
    """The JSON value of the file `path` through the package's one reader, a ConversionError naming `what` and the
    file when it cannot be read, is not JSON or holds another kind of value (`advice` says what to do)."""
    try:
        return read_checked_json(path, expected, f"a JSON {JSON_KINDS.get(expected, 'value')}", advice, ConversionError)
    except OSError as error:
        raise ConversionError(f"Cannot read {what} {path}: {error}") from error


def check_given(given: Mapping[str, Any], inferred: Mapping[str, Any], source: str) -> None:
    """Raise when values given by the user (or a stored config) contradict what the weights say."""
    clashes = [
        f"{key}={given[key]} but the weights say {value}"
        for key, value in inferred.items()
        if given.get(key) is not None and given[key] != value
    ]
    if clashes:
        raise ConversionError(f"The {source} does not match the checkpoint: {'; '.join(clashes)}.")


def record_original(config: PreTrainedConfig, source: str, **fields: Any) -> None:
    """Record in the config (saved in config.json, kept by every later save_pretrained) that the model came from the
    `source` of `minitf convert`, with what the original's files hold that the config does not (`fields`), so that
    `minitf export original` writes the same files back."""
    setattr(config, ORIGINAL_FORMAT_FIELD, {"format": source, **fields})


def tokenizer_record(path: str | Path) -> dict[str, Any]:
    """The parts of an original `tokenizers` file that conversion changes (its added tokens and post-processor), as
    they were, for `record_original`."""
    data = read_json_file(Path(path), "the tokenizer", "give the original tokenizer file")
    return {"added_tokens": data.get("added_tokens") or [], "post_processor": data.get("post_processor")}


def output_dtype(checkpoint: Checkpoint, keys: Iterable[str], dtype: str) -> torch.dtype:
    """`dtype` by name; "auto" keeps the checkpoint's floating dtype (float32 when its tensors disagree)."""
    if dtype != "auto":
        if dtype not in DTYPES:
            raise ConversionError(f"dtype={dtype!r} is not supported; choose auto or one of {sorted(DTYPES)}.")
        return DTYPES[dtype]
    found = {checkpoint.dtype(key) for key in keys if checkpoint.dtype(key).is_floating_point}
    return found.pop() if len(found) == 1 else torch.float32


def meta_model(model_class: type[PreTrainedModel], config: PreTrainedConfig) -> PreTrainedModel:
    """The target model with no storage: its parameter names and shapes are the contract the map must meet."""
    with torch.device("meta"):
        return model_class(config)


def expected_weights(model: PreTrainedModel) -> dict[str, torch.Tensor]:
    """What `save_pretrained` would write: the state_dict without tied copies."""
    tied = set(getattr(model, "all_tied_weights_keys", None) or {})
    return {name: tensor for name, tensor in model.state_dict().items() if name not in tied}


def original_name(name: str, rules: Sequence[Rule]) -> str | None:
    """The original key a target weight comes from under `rules` (the first rule whose pattern matches)."""
    for pattern, template in rules:
        match = re.fullmatch(pattern, name)
        if match:
            return match.expand(template)
    return None


def map_weights(
    checkpoint: Checkpoint,
    model: PreTrainedModel,
    rules: Sequence[Rule],
    ignore: Sequence[str] = (),
    dtype: torch.dtype = torch.float32,
    hint: str = "",
) -> list[TensorPlan]:
    """Plan every weight of `model` from the checkpoint through `rules`; check all names and shapes first.

    Every target weight must match a rule and find its original tensor with the right shape; every
    original tensor must be used or match an `ignore` pattern (buffers the target recomputes). All
    problems are reported together, naming original and target keys and shapes, then `hint`.
    """
    plans, missing, mismatched, unmapped = [], [], [], []
    used: set[str] = set()
    for name, target in expected_weights(model).items():
        original = original_name(name, rules)
        if original is None:
            unmapped.append(name)
            continue
        if original not in checkpoint:
            missing.append(f"{original} (for {name}, shape {list(target.shape)})")
            continue
        used.add(original)
        shape = checkpoint.shape(original)
        if tuple(shape) != tuple(target.shape):
            mismatched.append(f"{original}: {list(shape)}, but {name} needs {list(target.shape)}")
            continue
        plan_dtype = dtype if target.dtype.is_floating_point else target.dtype
        plans.append(
            TensorPlan(name, tuple(target.shape), plan_dtype, lambda key=original: checkpoint.get(key), origin=original)
        )
    if unmapped:
        raise ConversionError(f"Internal key map error: no rule for target weights {_short(unmapped)}.")
    unexpected = sorted(
        key for key in checkpoint.keys() if key not in used and not any(re.fullmatch(p, key) for p in ignore)
    )
    problems = []
    if missing:
        problems.append(f"missing keys: {_short(missing)}")
    if unexpected:
        problems.append(f"unexpected keys: {_short([f'{k} {list(checkpoint.shape(k))}' for k in unexpected])}")
    if mismatched:
        problems.append(f"wrong shapes: {_short(mismatched)}")
    if problems:
        raise ConversionError(
            f"{checkpoint.path} does not fit the model the checkpoint implies: "
            f"{'; '.join(problems)}.{' ' + hint if hint else ''}"
        )
    return plans


def plan_weights(
    checkpoint: Checkpoint,
    model_class: type[PreTrainedModel],
    config: PreTrainedConfig,
    rules: Sequence[Rule],
    ignore: Sequence[str] = (),
    dtype: str = "auto",
) -> list[TensorPlan]:
    """Every weight of `model_class(config)` planned from the checkpoint through `rules` (`map_weights`: all names
    and shapes checked first), in the dtype named `dtype` (`output_dtype`: "auto" keeps the checkpoint's)."""
    target_dtype = output_dtype(checkpoint, checkpoint.keys(), dtype)
    return map_weights(checkpoint, meta_model(model_class, config), rules, ignore, target_dtype)


@dataclass
class ConvertedModel:
    """Everything a converted folder holds, before it is written; the weights are still lazy."""

    model_class: type[PreTrainedModel]
    config: PreTrainedConfig
    plans: list[TensorPlan]
    tokenizer: PreTrainedTokenizerBase | None
    generation_config: GenerationConfig | None
    card: str
    inferred: dict[str, Any] = field(default_factory=dict)
    # Lines for the user about this conversion (flags that had no effect, a chat template, ...).
    notes: list[str] = field(default_factory=list)
    # When set, the model is built in memory and this writes it (with the tokenizer) instead of the streamed
    # write: for folders another library lays out, such as a SentenceTransformer folder.
    save_model: Callable[[PreTrainedModel, PreTrainedTokenizerBase | None, Path], None] | None = None


def num_parameters(plans: Sequence[TensorPlan]) -> int:
    """Parameter count of the planned weights (tied copies counted once)."""
    return sum(torch.Size(plan.shape).numel() for plan in plans)


def materialize(converted: ConvertedModel) -> PreTrainedModel:
    """Build the converted model in memory (one copy of the weights), in eval mode."""
    model = meta_model(converted.model_class, converted.config)
    state = {}
    for plan in converted.plans:
        tensor = plan.produce()
        if tuple(tensor.shape) != tuple(plan.shape):
            raise ConversionError(
                f"{plan.name} (from {plan.origin}) has shape {list(tensor.shape)}, "
                f"the model expects {list(plan.shape)}."
            )
        state[plan.name] = cast_for_output(tensor, plan.dtype, plan.label)
    result = model.load_state_dict(state, strict=False, assign=True)
    tied = set(getattr(model, "all_tied_weights_keys", None) or {})
    if set(result.missing_keys) - tied or result.unexpected_keys:
        raise ConversionError(f"Internal error: missing {result.missing_keys}, unexpected {result.unexpected_keys}.")
    model.tie_weights()
    left = [name for name, tensor in [*model.named_parameters(), *model.named_buffers()] if tensor.is_meta]
    if left:
        raise ConversionError(f"Internal error: {left} have no value after conversion.")
    return model.eval()


def save_converted(
    converted: ConvertedModel,
    out: str | Path | OutputFolder,
    overwrite: bool = False,
    inputs: Sequence[Path] = (),
    license: str | None = None,
) -> Path:
    """Write the folder atomically: model.safetensors (streamed), config.json with auto_map and the model
    code, generation_config.json, tokenizer files and README.md (or what `save_model` writes instead).

    `out` (unless it is an OutputFolder checked already) must not be or hold one of the `inputs` (the files
    converted): replacing it would delete them. `license` replaces the card's (the original project's, or
    `other` where it states none)."""
    if license is not None:
        converted.card = relicense_card(converted.card, license)
    target = output_folder(out, overwrite, inputs)
    config = converted.config
    floating = {plan.dtype for plan in converted.plans if plan.dtype.is_floating_point}
    config.dtype = str(floating.pop() if len(floating) == 1 else torch.float32).removeprefix("torch.")
    config.architectures = [converted.model_class.__name__]
    with target.write() as work:
        if converted.save_model is not None:
            converted.save_model(materialize(converted), converted.tokenizer, work)
        else:
            write_safetensors(work / "model.safetensors", converted.plans, {"format": "pt"})
            if converted.model_class._auto_class is not None:  # copy the model code and fill auto_map
                custom_object_save(meta_model(converted.model_class, config), work, config=config)
            config.save_pretrained(work)
            if converted.tokenizer is not None:
                converted.tokenizer.save_pretrained(work)
        if converted.generation_config is not None:
            converted.generation_config.save_pretrained(work)
        (work / "README.md").write_text(converted.card, encoding="utf-8")
    return target.path


# How a user loads each converted model class, `{out}` being the folder.
LOADING = {
    "MiniTFGPTForCausalLM": (
        'AutoModelForCausalLM.from_pretrained("{out}") or pipeline("text-generation", model="{out}")'
    ),
    "MiniTFEncoderModel": 'SentenceTransformer("{out}") or AutoModel.from_pretrained("{out}")',
    "MiniTFSeq2SeqForConditionalGeneration": (
        'AutoModelForSeq2SeqLM.from_pretrained("{out}") or pipeline("minitf-translation", model="{out}")'
    ),
}


def embedding_layer_size(
    checkpoint: Checkpoint, source: str, description: str, optional: Iterable[str] = ()
) -> tuple[int, int]:
    """(vocab_size, hidden_size) of an embedding layer's token embedding (the first of the source's anchor keys),
    once the state_dict is checked to hold the anchors and nothing but them and the `optional` keys."""
    require_architecture(checkpoint, source, description)
    unexpected = sorted(set(checkpoint.keys()) - {*SIGNATURES[source], *optional})
    if unexpected:
        raise ConversionError(f"{checkpoint.path}: unexpected keys {unexpected} for a {description}.")
    vocab_size, hidden_size = checkpoint.shape(SIGNATURES[source][0])
    return vocab_size, hidden_size


def save_embedding_layer(
    weights: Mapping[str, torch.Tensor],
    fields: Mapping[str, Any],
    out: str | Path | OutputFolder,
    what: str,
    config_class: str,
    source: str | Path,
    dtype: str = "auto",
    overwrite: bool = False,
) -> str:
    """Write an embedding layer's converted weights (`embeddings.safetensors`, MiniTF names) and the config fields
    they fix (`embedding_config.json`) into the folder `out`, atomically; returns what to tell the user."""
    if dtype != "auto" and dtype not in DTYPES:
        raise ConversionError(f"dtype={dtype!r} is not supported; choose auto or one of {sorted(DTYPES)}.")

    def target_dtype(tensor: torch.Tensor) -> torch.dtype:  # "auto" keeps a float's dtype; the cast refuses others
        return DTYPES[dtype] if dtype != "auto" else tensor.dtype if tensor.is_floating_point() else torch.float32

    with atomic_output_dir(out, overwrite, existing_paths(source)) as work:
        save_file(
            {
                name: cast_for_output(tensor, target_dtype(tensor), name).contiguous()
                for name, tensor in weights.items()
            },
            str(work / "embeddings.safetensors"),
        )
        (work / "embedding_config.json").write_text(json.dumps(dict(fields), indent=2) + "\n", encoding="utf-8")
    count = sum(tensor.numel() for tensor in weights.values())
    return "\n".join(
        [
            f"Converted {what} {source} into {Path(out)}",
            f"  weights: embeddings.safetensors ({', '.join(weights)}; {count:,} parameters)",
            f"  config:  embedding_config.json ({', '.join(f'{key}={value}' for key, value in fields.items())})",
            f"  use:     model = <model class>({config_class}(**<embedding_config.json>, <the other sizes>)); "
            'model.load_state_dict(safetensors.torch.load_file("embeddings.safetensors"), strict=False)',
        ]
    )


def conversion_summary(converted: ConvertedModel, what: str, out: str | Path) -> str:
    """What a user reads after a conversion: what was converted, into where, the model's size, how to load it."""
    config = converted.config
    sizes = f"{config.num_hidden_layers} layers, hidden size {config.hidden_size}, {config.num_attention_heads} heads"
    positions = getattr(config, "position_embedding_type", None)
    if positions:
        sizes += f", {'RoPE' if positions == 'rope' else positions + ' positions'}"
    plans = converted.plans
    dtypes = sorted({str(plan.dtype).removeprefix("torch.") for plan in plans if plan.dtype.is_floating_point})
    name = converted.model_class.__name__
    lines = [
        f"Converted {what} into {out}",
        f"  model: {name} ({config.model_type}), {sizes}, {num_parameters(plans):,} parameters ({'/'.join(dtypes)})",
    ]
    lines += [f"  note:  {note}" for note in converted.notes]
    loading = LOADING.get(name, name + '.from_pretrained("{out}")')
    lines.append(f"  load:  {loading.format(out=out)}")
    lines.append("         (without hf_minitf installed, add trust_remote_code=True)")
    return "\n".join(lines)


def convert_checkpoint(
    checkpoint: str | Path,
    target: OutputFolder,
    plan: Callable[[Checkpoint], ConvertedModel],
    license: str | None = None,
    **open_options: Any,
) -> ConvertedModel:
    """Open the checkpoint (`open_options` go to `open_checkpoint`), `plan` its conversion and write it into the
    checked output folder `target`; returns what was converted."""
    with open_checkpoint(checkpoint, **open_options) as source:
        converted = plan(source)
        save_converted(converted, target, license=license)
    return converted


__all__ = [
    "DTYPES",
    "LOADING",
    "SIGNATURES",
    "ConvertedModel",
    "Rule",
    "check_given",
    "conversion_summary",
    "convert_checkpoint",
    "count_layers",
    "embedding_layer_size",
    "expected_weights",
    "identify",
    "map_weights",
    "materialize",
    "meta_model",
    "num_parameters",
    "original_name",
    "output_dtype",
    "plan_weights",
    "read_json",
    "read_json_file",
    "record_original",
    "require_architecture",
    "require_heads",
    "save_converted",
    "save_embedding_layer",
    "shape_of",
    "sinusoidal_length",
    "tokenizer_record",
]
