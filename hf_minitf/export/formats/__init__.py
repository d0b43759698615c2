"""The `ExportFormat` of each format of `minitf export`, one module each (`hf_minitf.catalog.exports.EXPORTS` names
it), imported when asked for. Light: no module here imports torch, so `minitf export --help` needs none."""

from __future__ import annotations

import importlib

from hf_minitf.catalog.exports import EXPORTS
from hf_minitf.export.format import ExportFormat


def export_format(name: str) -> ExportFormat:
    """The format `minitf export NAME` writes; a ValueError naming the formats for another name."""
    if name not in EXPORTS:
        raise ValueError(f"no export format {name!r}; the formats are {', '.join(EXPORTS)}")
    return importlib.import_module(f"{__name__}.{EXPORTS[name]}").FORMAT


def export_formats() -> dict[str, ExportFormat]:
    """Every format, by its name, in the catalog's order."""
    return {name: export_format(name) for name in EXPORTS}


__all__ = ["export_format", "export_formats"]
