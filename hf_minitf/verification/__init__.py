"""`minitf verify`: an export re-measured against the MiniTF folder it came from, its "Runs in" table written into
the cards. It chains the exports' runtimes (`hf_minitf.engines`, transformers, llama.cpp) and the MiniTF models, so
it sits with the other chains, above the engines and the tools.

`runners` says which runtime runs which file of an export (`RUNNERS`, by engine and kind) and reads an export;
`runs` runs each runtime (and the MiniTF model) the same way; `worker` is the process a runtime runs in (light: it
imports its runtime only); `verify` compares and writes the table (`hf_minitf.cards.runs_in`). Each public name is
imported on first use, so the worker does not load what the comparison needs.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_MODULE_OF = {
    "RUNNERS": "runners",
    "Runner": "runners",
    "find_export": "runners",
    "Check": "verify",
    "Verification": "verify",
    "verify_export": "verify",
}

if TYPE_CHECKING:
    from hf_minitf.verification.runners import RUNNERS, Runner, find_export
    from hf_minitf.verification.verify import Check, Verification, verify_export


def __getattr__(name: str) -> Any:
    if name not in _MODULE_OF:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_MODULE_OF[name]}"), name)


__all__ = ["RUNNERS", "Check", "Runner", "Verification", "find_export", "verify_export"]
