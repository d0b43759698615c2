"""What differs between the transformers versions MiniTF supports (5.17 to 5.24 checked): the name of the KV cache
argument and output field, who writes continuous batching's paged cache, and a per-step cost of remote-code models.

This file is copied beside saved models with the modeling files, so it imports only torch and transformers.
"""

from __future__ import annotations

import inspect

from transformers.cache_utils import Cache
from transformers.modeling_outputs import BaseModelOutputWithPast

try:
    from transformers.generation.continuous_batching.cache import PagedAttentionCache
except ImportError:  # pragma: no cover - every supported transformers has it
    PagedAttentionCache = None  # type: ignore[assignment,misc]

# transformers 5.24 renamed the cache field of model outputs (and the forward argument) from
# `past_key_values` to `cache`; outputs are built with whichever name this transformers declares.
CACHE_FIELD = "cache" if "cache" in BaseModelOutputWithPast.__dataclass_fields__ else "past_key_values"

# Before transformers ~5.22 the paged attention functions wrote the paged cache themselves (given as
# `kwargs["cache"]`); later ones expect the layer to call `cache.update(..., kwargs=...)` like for any cache.
PAGED_CACHE_UPDATED_BY_ATTENTION = (
    PagedAttentionCache is not None and "kwargs" not in inspect.signature(PagedAttentionCache.update).parameters
)


def is_paged_cache(cache: Cache | None) -> bool:
    """Whether `cache` is continuous batching's paged cache (its requests are packed in one row)."""
    return PagedAttentionCache is not None and isinstance(cache, PagedAttentionCache)


def pick_cache(cache: Cache | None, past_key_values: Cache | None) -> Cache | None:
    """Return the cache given under either name (`cache` since transformers 5.24, `past_key_values` before)."""
    if cache is not None and past_key_values is not None and cache is not past_key_values:
        raise ValueError("Pass the KV cache once, as `cache` or as `past_key_values`, not both.")
    cache = cache if cache is not None else past_key_values
    if cache is not None and not isinstance(cache, Cache) and not is_paged_cache(cache):
        raise ValueError(
            f"The KV cache must be a transformers `Cache` (e.g. DynamicCache), got {type(cache).__name__}; "
            "tuple caches were removed in transformers 5."
        )
    return cache


def cached_length(cache: Cache | None) -> int:
    """Tokens already in the cache (0 without one, and for the paged cache, whose requests carry positions)."""
    if cache is None or is_paged_cache(cache):
        return 0
    return cache.get_seq_length()


def remember_forward_signature(model_class: type) -> type:
    """Class decorator: store the signature of `model_class.forward` on it.

    transformers asks for `inspect.signature(model.forward)` on every generation step of a model registered with an
    auto class (a check for remote code that still expects `cache_position`). `inspect` returns a stored
    `__signature__` at once, and it is the same one.
    """
    model_class.forward.__signature__ = inspect.signature(model_class.forward)  # type: ignore[attr-defined]  # functions take attributes
    return model_class


__all__ = [
    "CACHE_FIELD",
    "PAGED_CACHE_UPDATED_BY_ATTENTION",
    "cached_length",
    "is_paged_cache",
    "pick_cache",
    "remember_forward_signature",
]
