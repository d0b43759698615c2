"""What the installed hf_minitf package adds to the model code (`PACKAGE_HOOKS`), filled in by
`hf_minitf/__init__.py` when the package is imported. In a saved folder's copy of the code nothing fills them in,
and the model works without them: it keeps the card it has, names a refused pickle plainly, and its config tells
nobody it was built.

The model code asks these hooks instead of importing the package above it, so a saved folder's code is the model
and nothing else.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType


@dataclass
class PackageHooks:
    card_writer: Callable[[], ModuleType] | None = None
    """Returns hf_minitf's card writer (`render_model_card`, `update_model_card`, ...) for `save_pretrained`."""
    pickle_diagnosis: Callable[[], ModuleType] | None = None
    """Returns hf_minitf's pickle diagnosis (`RefusedPickleError`, `refused_pickle_message`) for a refused file."""
    config_built: Callable[[object], None] | None = None
    """Called with each MiniTF config once built: hf_minitf registers the family's model classes with the Auto
    classes then, before an Auto class looks them up (`hf_minitf.registration.config_built`)."""


PACKAGE_HOOKS = PackageHooks()

__all__ = ["PACKAGE_HOOKS", "PackageHooks"]
