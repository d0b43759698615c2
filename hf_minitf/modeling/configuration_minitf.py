"""What the MiniTF configs share: `MiniTFConfig`, their base class, and the checks of their fields.

A bad value fails when the config is built (or loaded from a hand-edited config.json) with a ValueError naming
the field, the value and what is expected, rather than later, deep inside the model. Each config declares
`field_checks` (field name -> check); `MiniTFConfig.__setattr__` runs them whenever a value is set: by the
constructor, by `from_pretrained(..., field=value)` or by hand. Checks across fields (head counts, token ids
inside the vocabulary) run once the config is complete (`complete_fields`).
This file is copied beside saved models with the configs, so it imports only transformers and its neighbours.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any, ClassVar

from transformers import PreTrainedConfig

from .configuration_minitf_limits import check_model_fits
from .modeling_minitf_hooks import PACKAGE_HOOKS

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


class MiniTFConfig(PreTrainedConfig):
    """Base of the MiniTF configs: every field is checked when set, the whole config once built, and `auto_map`
    names this family's classes, so a folder saved with its code loads with `trust_remote_code=True`.

    A family declares `field_checks` (field name -> check), `family_auto_map` (Auto class -> "module.Class") and
    extends `complete_fields`. The class attributes below are the architecture of a family (which layers
    it builds), not fields: they are not saved, and a family that differs overrides them.
    """

    field_checks: ClassVar[Mapping[str, Check]] = {}
    family_auto_map: ClassVar[Mapping[str, str]] = {}
    # One `qkv_proj` laid out [q | k | v] (GPT style) rather than separate q/k/v projections.
    fused_qkv = False
    # Which norm the layers use (see layers.make_norm); the seq2seq family makes it a field.
    norm_type = "layer_norm"
    # hkproj's fixed value for masked attention scores (see layers.eager_attention_forward); None adds
    # the mask as usual. The seq2seq family makes it a field.
    attention_mask_value = None

    def __setattr__(self, name: str, value: Any) -> None:
        check_field(type(self).__name__, self.field_checks, self.attribute_map.get(name, name), value)
        super().__setattr__(name, value)

    def __post_init__(self, **kwargs) -> None:
        super().__post_init__(**kwargs)
        self.auto_map = {**self.family_auto_map, **(getattr(self, "auto_map", None) or {})}
        self.complete_fields()
        if PACKAGE_HOOKS.config_built is not None:
            PACKAGE_HOOKS.config_built(self)

    def complete_fields(self) -> None:
        """Once every field is set: fill fields derived from others, then check across fields (a ValueError
        naming the fields and what to change)."""
        check_model_fits(self)  # before anything whose cost grows with the sizes
        check_heads(type(self).__name__, self.hidden_size, self.num_attention_heads)


__all__ = [
    "LM_FIELD_CHECKS",
    "SHARED_FIELD_CHECKS",
    "Check",
    "MiniTFConfig",
    "activation",
    "always",
    "boolean",
    "check_field",
    "check_heads",
    "check_token_ids_in_vocabulary",
    "choice",
    "integer",
    "number",
    "probability",
    "token_ids",
]
