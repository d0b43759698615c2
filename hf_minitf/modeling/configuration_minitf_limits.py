"""Bounds on the sizes of a MiniTF config, and the names its choice fields take (read by the parser too), so a config that could never be built here (a downloaded
`config.json` asking for 10^9 layers or a hidden size of 2^40) fails at once, naming the field, instead of
building modules until the machine runs out of memory or time.

The bound is a lower estimate of what the model would take: its matrices (embeddings, attention and
feed-forward weights of every layer) in 16-bit floats, plus a small fixed cost of the Python modules of each
layer. A config whose estimate exceeds the machine's memory cannot be built here in any dtype; one with more
than `MAX_LAYERS` layers is refused whatever their size. Checked from
each config's `__post_init__`; whether the weights on disk match the config is transformers' check at loading.
This file is copied beside saved models with the configs, so it imports nothing heavy.
"""

from __future__ import annotations

import os
from typing import Any

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

# How each norm is computed (mean and std over the hidden features, std unbiased for the "scalar"/"per_feature" ones):
#   layer_norm               nn.LayerNorm: per-feature weight/bias, (x - mean) / sqrt(var + eps)    (default)
#   scalar_std_times_eps     hkproj's first version: one weight and one bias, weight * (x - mean) / (std * eps) + bias
#   scalar_std_plus_eps      hkproj's fix: one weight and one bias, weight * (x - mean) / (std + eps) + bias
#   per_feature_std_plus_eps hkproj's last version: per-feature weight/bias, weight * (x - mean) / (std + eps) + bias
NORM_TYPES = ("layer_norm", "scalar_std_times_eps", "scalar_std_plus_eps", "per_feature_std_plus_eps")


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


__all__ = ["MAX_LAYERS", "check_model_fits", "format_bytes", "machine_memory"]
