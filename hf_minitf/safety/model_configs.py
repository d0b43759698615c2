"""The checks of a MiniTF config that hf_minitf adds where it is installed (`hf_minitf.registration` installs
them on each config class as it loads; a folder's copied code, loaded without the package, has transformers'
usual behaviour): every field is checked when set, the whole config once built.

A bad value fails when the config is built (or loaded from a hand-edited config.json) with a ValueError naming the
field, the value and what is expected, rather than later, deep inside the model: `FIELD_CHECKS` (field name ->
check, per model type) whenever a value is set (by the constructor, `from_pretrained(..., field=value)` or by
hand), `check_config` once the config is complete: the sizes against this machine's memory (a downloaded
config.json asking for 10^9 layers or a hidden size of 2^40 fails at once, naming the field, instead of building
modules until the machine runs out of memory or time), the heads against the hidden size, the special tokens
against the vocabularies, and each family's own rules.

The memory bound is a lower estimate of what the model would take: its matrices (embeddings, attention and
feed-forward weights of every layer) in 16-bit floats, plus a small fixed cost of the Python modules of each
layer. A config whose estimate exceeds the machine's memory cannot be built here in any dtype; one with more
than `MAX_LAYERS` layers is refused whatever their size. Whether the weights on disk match the config is
transformers' check at loading (and `hf_minitf.safety.weights`).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from hf_minitf.catalog.limits import NORM_TYPES

# Fields that size a model: the estimate uses those a config has.
SIZE_FIELDS = (
    "vocab_size",
    "src_vocab_size",
    "hidden_size",
    "intermediate_size",
    "num_hidden_layers",
    "max_position_embeddings",
)
BYTES_PER_PARAMETER = 2  # bfloat16/float16: the least any weight takes
BYTES_PER_LAYER = 16 * 1024  # the Python objects of a layer's modules and parameters (a tiny GPT's take ~32 KiB)
# More layers than any published transformer has by far: each layer takes building and running time whatever
# its size, so a count beyond this is a broken or hostile config even when its matrices are tiny.
MAX_LAYERS = 10_000

# A check returns None for a good value, else what is expected ("a positive integer").
Check = Callable[[Any], "str | None"]


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    """An int or a finite float: a config.json may hold NaN or Infinity (json reads both), which no field takes."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def integer(minimum: int = 1, optional: bool = False, maximum: int | None = None) -> Check:
    """An int (not a bool, a float or a string) of at least `minimum` (and at most `maximum`)."""
    if maximum is not None:
        expected = f"an integer in [{minimum}, {maximum}]"
    else:
        expected = "a positive integer" if minimum == 1 else f"an integer >= {minimum}"
    expected += " or null" if optional else ""

    def check(value: Any) -> str | None:
        if value is None and optional:
            return None
        return None if _is_int(value) and minimum <= value <= (value if maximum is None else maximum) else expected

    return check


def number(
    minimum: float | None = None,
    maximum: float | None = None,
    *,
    above: bool = False,
    below: bool = False,
    optional: bool = False,
) -> Check:
    """A finite int or float (not NaN or infinite) in the range; `above`/`below` exclude the bounds."""
    low = "" if minimum is None else ("(" if above else "[") + f"{minimum}"
    high = "" if maximum is None else f"{maximum}" + (")" if below else "]")
    if low and high:
        expected = f"a finite number in {low}, {high}"
    elif low:
        expected = f"a finite number {'>' if above else '>='} {minimum}"
    elif high:
        expected = f"a finite number {'<' if below else '<='} {maximum}"
    else:
        expected = "a finite number"
    expected += " or null" if optional else ""

    def check(value: Any) -> str | None:
        if value is None and optional:
            return None
        if not _is_number(value):
            return expected
        if minimum is not None and (value <= minimum if above else value < minimum):
            return expected
        if maximum is not None and (value >= maximum if below else value > maximum):
            return expected
        return None

    return check


def probability(optional: bool = False) -> Check:
    """A dropout probability in [0, 1): a probability of 1 would zero every activation it applies to."""
    return number(0.0, 1.0, below=True, optional=optional)


def boolean() -> Check:
    """true or false (not 0/1 or a string)."""
    return lambda value: None if isinstance(value, bool) else "true or false"


def always(expected: bool) -> Check:
    """Exactly `expected`: a field transformers reads that describes the architecture, not a choice."""
    return lambda value: None if value is expected else f"{str(expected).lower()} (it describes this architecture)"


def choice(options: Iterable[str]) -> Check:
    """One of the given strings."""
    options = tuple(options)
    return lambda value: None if isinstance(value, str) and value in options else f"one of {options}"


def activation() -> Check:
    """The name of an activation function transformers knows (`transformers.activations.ACT2FN`)."""

    def check(value: Any) -> str | None:
        from transformers.activations import ACT2FN  # imports torch: only when a config is built

        if isinstance(value, str) and value in ACT2FN:
            return None
        return f"an activation name known to transformers, such as 'gelu', 'relu' or 'silu' (all: {sorted(ACT2FN)})"

    return check


def token_ids(allow_list: bool = False) -> Check:
    """null, a token id (int >= 0) or, with `allow_list`, a list of them (as `eos_token_id` may be)."""
    expected = "null, an integer >= 0" + (" or a list of them" if allow_list else "")

    def check(value: Any) -> str | None:
        values = value if allow_list and isinstance(value, list) else [value]
        if value is None or all(_is_int(item) and item >= 0 for item in values):
            return None
        return expected

    return check


# What the fields every family has accept; a family adds its own fields' checks (and may override one of these).
SHARED_FIELD_CHECKS: Mapping[str, Check] = {
    "vocab_size": integer(),
    "hidden_size": integer(),
    "num_hidden_layers": integer(),
    "num_attention_heads": integer(),
    "intermediate_size": integer(),
    "max_position_embeddings": integer(),
    "hidden_act": activation(),
    "layer_norm_eps": number(0, above=True),
    "hidden_dropout": probability(),
    "attention_dropout": probability(),
    "attention_bias": boolean(),
    "initializer_range": number(0),
    "pad_token_id": token_ids(),
}

# What the fields of the language-model families (GPT and seq2seq) accept: a tied output projection, the KV cache
# and generation's special tokens.
LM_FIELD_CHECKS: Mapping[str, Check] = {
    "use_cache": boolean(),
    "tie_word_embeddings": boolean(),
    "bos_token_id": token_ids(),
    "eos_token_id": token_ids(allow_list=True),
}


def check_field(config_name: str, checks: Mapping[str, Check], name: str, value: Any) -> None:
    """Raise a ValueError when `checks` has a check for `name` and `value` fails it."""
    check = checks.get(name)
    expected = check(value) if check is not None else None
    if expected is not None:
        got = f"{value!r} ({type(value).__name__})"
        raise ValueError(f"{config_name}: {name} must be {expected}, got {got}.")


def check_heads(config_name: str, hidden_size: int, num_attention_heads: int) -> int:
    """The head dimension; an error when the heads do not divide the hidden size."""
    if hidden_size % num_attention_heads != 0:
        divisors = [n for n in range(1, hidden_size + 1) if hidden_size % n == 0]
        raise ValueError(
            f"{config_name}: hidden_size={hidden_size} is not divisible by num_attention_heads="
            f"{num_attention_heads}; choose a head count that divides it ({divisors[:12]}"
            f"{', ...' if len(divisors) > 12 else ''})."
        )
    return hidden_size // num_attention_heads


def check_token_ids_in_vocabulary(config: Any, names: Iterable[str], vocab_size: int, vocabulary: str) -> None:
    """Each named token id (or list of ids) must be None or inside [0, vocab_size)."""
    for name in names:
        value = getattr(config, name)
        for token_id in value if isinstance(value, list) else [value]:
            if token_id is not None and not 0 <= token_id < vocab_size:
                raise ValueError(
                    f"{type(config).__name__}: {name}={value} is outside the {vocabulary} "
                    f"(ids 0..{vocab_size - 1}); use a token of the vocabulary or null."
                )


def machine_memory() -> int | None:
    """Bytes of physical memory of this machine, None where the system does not say."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return None


def _estimate(sizes: dict[str, int], learned_positions: bool) -> int:
    """Least bytes a model of these sizes takes (see the module docstring)."""
    hidden = sizes["hidden_size"]
    intermediate = sizes.get("intermediate_size") or 4 * hidden
    layers = sizes["num_hidden_layers"]
    vocabulary = sizes.get("vocab_size", 0) + sizes.get("src_vocab_size", 0)
    positions = sizes.get("max_position_embeddings", 0) if learned_positions else 0
    parameters = (vocabulary + positions) * hidden + layers * (4 * hidden * hidden + 2 * hidden * intermediate)
    return parameters * BYTES_PER_PARAMETER + layers * BYTES_PER_LAYER


def format_bytes(count: float) -> str:
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if count < 1024 or unit == "PiB":
            return f"{count:.3g} {unit}"
        count /= 1024
    return f"{count:.3g} PiB"


def check_model_fits(config: Any, memory: int | None = None) -> None:
    """Raise a ValueError naming the field when a model of `config`'s sizes cannot fit in `memory` bytes (default:
    this machine's memory). The field named is the one whose default value would shrink the estimate most."""
    memory = memory if memory is not None else machine_memory()
    if memory is None:
        return
    sizes = {name: getattr(config, name) for name in SIZE_FIELDS if isinstance(getattr(config, name, None), int)}
    if "hidden_size" not in sizes or "num_hidden_layers" not in sizes:
        return
    if sizes["num_hidden_layers"] > MAX_LAYERS:
        raise ValueError(
            f"{type(config).__name__}: num_hidden_layers={sizes['num_hidden_layers']} is more than the {MAX_LAYERS:,} "
            "layers a model built here may have; check num_hidden_layers (a config.json from elsewhere may not "
            "describe the weights beside it)."
        )
    learned = getattr(config, "position_embedding_type", None) == "learned"
    needed = _estimate(sizes, learned)
    if needed <= memory:
        return
    defaults = getattr(type(config), "__dataclass_fields__", {})

    def with_default(name: str) -> int:
        default = getattr(defaults.get(name), "default", None)
        return _estimate({**sizes, name: default if isinstance(default, int) else 1}, learned)

    culprit = min(sizes, key=with_default)
    others = ", ".join(f"{name}={value}" for name, value in sizes.items() if name != culprit)
    raise ValueError(
        f"{type(config).__name__}: {culprit}={sizes[culprit]} (with {others}) makes a model of at least "
        f"{format_bytes(needed)}, more than this machine's {format_bytes(memory)} of memory could hold; check "
        f"{culprit} (a config.json from elsewhere may not describe the weights beside it)."
    )


# What each family's fields accept (on top of the shared ones), by model type.
FIELD_CHECKS: Mapping[str, Mapping[str, Check]] = {
    "minitf_gpt": {
        **SHARED_FIELD_CHECKS,
        **LM_FIELD_CHECKS,
        "intermediate_size": integer(optional=True),  # None: 4 * hidden_size
        "position_embedding_type": choice(("learned", "rope")),
        "context_overflow": choice(("error", "crop")),
        "rope_theta": number(0, above=True),
        "rope_interleaved": boolean(),
    },
    "minitf_encoder": {
        **SHARED_FIELD_CHECKS,
        "position_embedding_type": choice(("sinusoidal", "learned")),
        "scale_embeddings": boolean(),
        "classifier_dropout": probability(optional=True),
    },
    "minitf_seq2seq": {
        **SHARED_FIELD_CHECKS,
        **LM_FIELD_CHECKS,
        "src_vocab_size": integer(),
        "norm_type": choice(NORM_TYPES),
        "attention_mask_value": number(maximum=0, optional=True),
        "scale_embedding": boolean(),
        "lm_head_bias": boolean(),
        "output_log_softmax": boolean(),
        "label_smoothing": number(0, 1, below=True),
        "is_encoder_decoder": always(True),
        "decoder_start_token_id": token_ids(),
    },
}


def check_gpt(config: Any, head_dim: int) -> None:
    if config.position_embedding_type == "rope" and head_dim % 2 != 0:
        raise ValueError(
            f"Rotary positions need an even head dimension, but hidden_size / num_attention_heads = {head_dim}; "
            "change hidden_size or num_attention_heads, or use position_embedding_type='learned'."
        )
    check_token_ids_in_vocabulary(
        config, ("pad_token_id", "bos_token_id", "eos_token_id"), config.vocab_size, "vocabulary"
    )
    # transformers' rotary scaling (it keeps `rope_scaling` and `rope_parameters` as one): not MiniTF's to ignore
    scaling = getattr(config, "rope_parameters", None) or getattr(config, "rope_scaling", None)
    kind = scaling.get("rope_type", scaling.get("type", "default")) if isinstance(scaling, dict) else scaling
    if scaling is not None and kind != "default":
        raise ValueError(
            f"{type(config).__name__}: rope_parameters (rope_scaling) {scaling!r} asks for {kind!r} rotary "
            "scaling, which MiniTF's positions do not implement (the model would ignore it and give the unscaled "
            "logits); remove rope_parameters and rope_scaling from config.json."
        )


def check_encoder(config: Any, head_dim: int) -> None:
    check_token_ids_in_vocabulary(config, ("pad_token_id",), config.vocab_size, "vocabulary")


def check_seq2seq(config: Any, head_dim: int) -> None:
    if config.hidden_size % 2 != 0:
        raise ValueError(
            f"{type(config).__name__}: sinusoidal positions need an even hidden_size, got {config.hidden_size}."
        )
    # Special tokens are shared by both vocabularies (the tokenizer pair gives them the same ids).
    check_token_ids_in_vocabulary(
        config,
        ("pad_token_id", "bos_token_id", "eos_token_id", "decoder_start_token_id"),
        min(config.src_vocab_size, config.vocab_size),
        "source or target vocabulary",
    )


# Each family's checks across fields, by model type: after the memory bound and the heads.
FAMILY_CHECKS: Mapping[str, Callable[[Any, int], None]] = {
    "minitf_gpt": check_gpt,
    "minitf_encoder": check_encoder,
    "minitf_seq2seq": check_seq2seq,
}


def check_config(config: Any) -> None:
    """Check a complete config across its fields (a ValueError naming the fields and what to change)."""
    check_model_fits(config)  # before anything whose cost grows with the sizes
    head_dim = check_heads(type(config).__name__, config.hidden_size, config.num_attention_heads)
    FAMILY_CHECKS[config.model_type](config, head_dim)


__all__ = [
    "FIELD_CHECKS",
    "MAX_LAYERS",
    "Check",
    "check_config",
    "check_field",
    "check_model_fits",
    "format_bytes",
    "integer",
    "machine_memory",
    "number",
]
