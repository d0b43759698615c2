"""One object per format of `minitf export FORMAT`: what it takes, its help, its own options, its writer, how
`minitf verify` reads and runs what it wrote, and its card template. Each format declares its `ExportFormat` in
`hf_minitf.export.formats.NAME` (light: no torch; it names its writer, imported when it writes, and the writer
module reads its facts from it); the command, the verification and the writers read it there.
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

from hf_minitf.catalog.exports import EVERY_KIND
from hf_minitf.catalog.verification import EXACT_LOGIT_DIFFERENCE

FOLDER_OUT = (
    "folder to write (must be empty unless --overwrite)",
    "replace a non-empty OUT model folder (nothing else)",
)
"""The help of OUT and --overwrite of a format that writes a folder."""

EXPORT_OPTIONS = ("overwrite", "revision", "license")
"""The options every export writer takes, by the names of its parameters."""

LAYOUTS = ("gguf_file", "web_page", "engine_folder", "native_folder")
"""The readers of an export in `hf_minitf.verification.runners`, in the order they are tried: a GGUF file, a web page,
a folder with minitf_export.json (ONNX, CTranslate2), a native folder or a folder of GGUF files with a card."""


class FormatRunner(NamedTuple):
    """One kind of file a format writes, as `minitf verify` runs it."""

    runtime: str
    """Its runtime (a key of `catalog.verification.RUNTIMES`), also the engine minitf_export.json names."""
    kind: str
    """generator, embedder or translator: what is compared with the MiniTF model."""
    loader: str
    """The function of `hf_minitf.verification.runs` that returns the file's run."""
    exact: bool = True
    """Whether the runtime can give the MiniTF outputs at all: False where its graph computes something else (so
    none of its files claims exactness, whatever its precision)."""


def every_kind(runtime: str, loader_prefix: str) -> tuple[FormatRunner, ...]:
    """The runners of a runtime that runs generators, translators and embedders alike, by the loaders
    `{loader_prefix}_{kind}` of `hf_minitf.verification.runs`."""
    return tuple(FormatRunner(runtime, kind, f"{loader_prefix}_{kind}") for kind in EVERY_KIND)


def _no_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of a format that has none of its own."""


def export_options(*names: str) -> Callable[[argparse.Namespace], dict[str, Any]]:
    """`arguments` passing the parsed options `names` and those every export takes, by their names."""

    def arguments(args: argparse.Namespace) -> dict[str, Any]:
        return {name: getattr(args, name) for name in (*names, *EXPORT_OPTIONS)}

    return arguments


@dataclass(frozen=True)
class ExportFormat:
    """One format of `minitf export FORMAT`."""

    name: str
    """Its name: `minitf export NAME`, `export_NAME` of hf_minitf.export."""
    families: tuple[str, ...]
    """The model families it takes."""
    summary: str
    """Its line in `minitf export --help`."""
    description: str
    """What `minitf export NAME --help` says."""
    writer: str
    """`module:function` of the function of hf_minitf.export that writes it, called with SRC, OUT and `arguments`."""
    report: Callable[[argparse.Namespace, Any], str]
    """The lines `minitf export` prints, from the parsed arguments and what the writer returned."""
    layout: str
    """The reader of `LAYOUTS` that finds what it wrote."""
    add_arguments: Callable[[argparse.ArgumentParser], None] = _no_arguments
    """Adds its own options (beside SRC, OUT, --revision, --license, --overwrite and --no-verify)."""
    arguments: Callable[[argparse.Namespace], dict[str, Any]] = export_options()
    """The writer's keyword arguments, from the parsed arguments."""
    runners: tuple[FormatRunner, ...] = ()
    """The kinds of file it writes, each with the runtime `minitf verify` runs it in."""
    exact_precisions: tuple[str, ...] = ()
    """The precisions (the export's weight type: --dtype, --quantization, an ONNX file's dtype) at which the format
    claims the MiniTF model's outputs: greedy tokens with logits within `logit_bound`, translations, embeddings within
    `catalog.verification.EXACT_EMBEDDING_DIFFERENCE`; `minitf verify` exits 1 when such an export is not."""
    logit_bound: float = EXACT_LOGIT_DIFFERENCE
    """How far an exact file's logits may lie from MiniTF's, relative to their magnitude."""
    card_template: str = ""
    """Its card's template in model_cards/ (empty: it writes no card of its own)."""
    out: tuple[str, str] = FOLDER_OUT
    """The help of OUT and of --overwrite."""

    def __post_init__(self) -> None:
        if self.layout not in LAYOUTS:
            raise ValueError(f"export format {self.name}: layout {self.layout!r} is none of {', '.join(LAYOUTS)}")
        if not self.writer.startswith(f"{__package__}.") or ":" not in self.writer:
            raise ValueError(
                f"export format {self.name}: writer {self.writer!r} is no module:function of {__package__}"
            )

    def write(self, args: argparse.Namespace) -> str:
        """Write the export `args` ask for (importing the writer's module, with torch, only now); the lines to print."""
        module, _, function = self.writer.partition(":")
        written = getattr(importlib.import_module(module), function)(args.source, args.out, **self.arguments(args))
        return self.report(args, written)


__all__ = ["EXPORT_OPTIONS", "FOLDER_OUT", "LAYOUTS", "ExportFormat", "FormatRunner", "every_kind", "export_options"]
