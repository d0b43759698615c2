"""Which runner runs a folder: `load_engine(folder, kind)` reads the folder's `minitf_export.json`
(`export_info`, checked by `check_export_info`) and returns the runner of its engine and kind, or None for a MiniTF
folder, so that `minitf generate`, `translate` and `embed` print the same text or vectors from either folder.

An export folder may come from elsewhere, so nothing in it is trusted: `minitf_export.json` is checked against the
fields `hf_minitf.catalog.exports.EXPORT_INFO_FIELDS` declares, every path it names must stay inside the folder, no
link may lead out of it, and the runner checks the files its engine reads.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Literal, overload

from hf_minitf.catalog.exports import EVERY_KIND, EXPORT_FILE, EXPORT_INFO_FIELDS
from hf_minitf.catalog.wording import with_article
from hf_minitf.engines.ctranslate2 import CTranslate2Embedder, CTranslate2Generator, CTranslate2Translator
from hf_minitf.engines.folders import AGAIN, ExportFolderError, folder_json
from hf_minitf.engines.onnx import OnnxEmbedder, OnnxGenerator
from hf_minitf.engines.onnx_translator import OnnxTranslator
from hf_minitf.safety.files import UnsafeFileError, confined_path, links_leaving

Engine = (
    CTranslate2Embedder | CTranslate2Generator | CTranslate2Translator | OnnxEmbedder | OnnxGenerator | OnnxTranslator
)

ENGINES: dict[tuple[str, str], type[Engine]] = {
    ("ctranslate2", "embedder"): CTranslate2Embedder,
    ("ctranslate2", "generator"): CTranslate2Generator,
    ("ctranslate2", "translator"): CTranslate2Translator,
    ("onnxruntime", "embedder"): OnnxEmbedder,
    ("onnxruntime", "generator"): OnnxGenerator,
    ("onnxruntime", "translator"): OnnxTranslator,
}


def export_info(folder: str | os.PathLike) -> dict | None:
    """What `minitf_export.json` says of an export folder (engine, kind, family, ...), or None for other folders;
    an ExportFolderError naming the file and the field when it is not a JSON object of the fields
    `EXPORT_INFO_FIELDS` declares (`check_export_info`)."""
    folder = Path(folder)
    if not (folder / EXPORT_FILE).exists() and not (folder / EXPORT_FILE).is_symlink():
        return None
    return check_export_info(folder_json(folder, EXPORT_FILE), folder)


def check_export_info(info: dict, folder: Path) -> dict:
    """`info` (the folder's minitf_export.json) when every field `EXPORT_INFO_FIELDS` declares is there where its
    kind needs it, of its type, among its values and, for a path, inside the folder; its engine and kind name a
    runner (`ENGINES`) and its family is a MiniTF model type whose exports are of that kind. Unknown fields are
    left alone (a later version may add some). An ExportFolderError naming the file and the field otherwise."""
    from hf_minitf.catalog import FAMILIES

    path = folder / EXPORT_FILE
    kind = info.get("kind")
    for key, field in EXPORT_INFO_FIELDS.items():
        value = info.get(key)
        if value is None:
            if field.required_for == EVERY_KIND or kind in field.required_for:
                needed = "every export" if field.required_for == EVERY_KIND else f"{with_article(str(kind))} export"
                raise ExportFolderError(f"{path} has no {key}, which {needed} has; {AGAIN}")
            continue
        entries = value if isinstance(value, list) else [value]
        if (
            not isinstance(value, field.json_type)
            or isinstance(value, bool)
            or (isinstance(value, int) and value < 1)
            or (field.path and not all(isinstance(entry, str) and entry for entry in entries))
        ):
            wanted = {int: "a positive integer", str: "a string", list: "a list of file names"}[field.json_type]
            raise ExportFolderError(f"{path}: {key} is {json.dumps(value)}, not {wanted}; {AGAIN}")
        if field.choices and value not in field.choices:
            raise ExportFolderError(f"{path}: {key} is {value!r}, not one of {', '.join(field.choices)}; {AGAIN}")
        if field.path:
            for entry in entries:
                confined_path(folder, entry, f"{EXPORT_FILE}'s {key}")
    if (info["engine"], kind) not in ENGINES:
        runners = ", ".join(f"{engine} {name}" for engine, name in ENGINES)
        raise ExportFolderError(
            f"{path}: engine {info['engine']!r} with kind {kind!r} is no export minitf runs ({runners}); {AGAIN}"
        )
    family = next((family for family in FAMILIES.values() if family.model_type == info["family"]), None)
    if family is None or family.engine_kind != kind:
        fitting = ", ".join(f"{family.model_type} ({family.engine_kind})" for family in FAMILIES.values())
        raise ExportFolderError(
            f"{path}: family {info['family']!r} does not make {with_article(str(kind))} export (the families and the "
            f"kind of their exports: {fitting}); {AGAIN}"
        )
    return info


@overload
def load_engine(
    folder: str | os.PathLike, kind: Literal["generator"]
) -> CTranslate2Generator | OnnxGenerator | None: ...
@overload
def load_engine(
    folder: str | os.PathLike, kind: Literal["translator"]
) -> CTranslate2Translator | OnnxTranslator | None: ...
@overload
def load_engine(folder: str | os.PathLike, kind: Literal["embedder"]) -> CTranslate2Embedder | OnnxEmbedder | None: ...
def load_engine(folder: str | os.PathLike, kind: str) -> Engine | None:
    """The runner of the export folder `folder` when it is one, None for a MiniTF folder; a ValueError when it is
    an export of another kind (`kind`: generator, translator or embedder)."""
    info = export_info(folder)
    if info is None:
        return None
    if info["kind"] != kind:
        raise ValueError(
            f"{folder} is an export for the {info['engine']} {info['kind']}; this command needs a "
            f"MiniTF model folder or an export for the {kind}."
        )
    leaving = "; ".join(f"{name} -> {target}" for name, target in links_leaving(folder).items())
    if leaving:
        raise UnsafeFileError(
            f"{folder} holds links to files outside it ({leaving}); an export runs only its own files: "
            "replace each link with a copy of the file it should hold"
        )
    return ENGINES[(info["engine"], kind)](Path(folder), info)
