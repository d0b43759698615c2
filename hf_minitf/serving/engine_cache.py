"""The engine a MiniTF folder runs on in `minitf serve` and `minitf generate / translate / embed --engine`
(`choose_engine`): torch, or an engine export of the folder (`hf_minitf.catalog.engines.CACHED_ENGINES`) made on
first use into FOLDER/.minitf-engines/ENGINE, measured against the folder with `minitf verify`'s comparison
(`hf_minitf.verification.verify_export`) before it answers, and reused while the folder's config.json and weights
hash as they did then (and the package is the same version). An export that does not give the folder's outputs, or
cannot be made or written, leaves the folder on torch, with the reason in `EngineChoice.reason`.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hf_minitf.catalog.engines import (
    AUTO,
    AUTO_ORDER,
    CACHED_ENGINES,
    ENGINE_CACHE_FILE,
    ENGINE_CACHE_FOLDER,
    TORCH,
    CachedEngine,
)
from hf_minitf.catalog.families import FAMILIES, family_of_config
from hf_minitf.catalog.packaging import EXTRAS, PACKAGE, extra_providing, installed_version

REASON_CHARACTERS = 300
"""The most of an error's first line a reason quotes (a failed copy lists every file it could not copy)."""


class EngineUnavailable(ValueError):
    """An engine asked for by name that cannot run here (its extra is missing, or the folder is no MiniTF folder)."""


@dataclass
class EngineChoice:
    """What runs a folder: `engine` (torch, onnx, ctranslate2), its runner (None for torch) and why, in one line."""

    engine: str
    runner: Any
    reason: str

    @property
    def on_torch(self) -> bool:
        return self.runner is None


def missing_modules(engine: CachedEngine) -> list[str]:
    """The modules `engine` needs that do not import here."""
    return [module for module in engine.modules if importlib.util.find_spec(module) is None]


def _install_line(engine: CachedEngine, missing: list[str]) -> str:
    extra = extra_providing(missing[0]) or EXTRAS["engines"]
    return f"--engine {engine.name} needs {', '.join(missing)}, which the {extra.name} extra brings: {extra.install}"


def minitf_family(folder: str | os.PathLike) -> str | None:
    """The MiniTF family of a local folder (gpt, encoder, seq2seq), None for anything else (a native GPT-2 folder,
    an export folder, a Hub repo id)."""
    config_path = Path(folder) / "config.json"
    if not config_path.is_file():
        return None
    try:
        config = json.loads(config_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return family_of_config(config) if isinstance(config, dict) else None


def cache_folder(folder: str | os.PathLike, engine: str) -> Path:
    """Where `engine`'s export of `folder` is kept."""
    return Path(folder) / ENGINE_CACHE_FOLDER / engine


def _stamp(folder: Path) -> dict[str, Any]:
    """What a cached export must match to be reused: the folder's config and weights hashes, the package version."""
    from hf_minitf.export.source import source_hashes

    return {"source_sha256": source_hashes(folder), "minitf": installed_version(PACKAGE)}


def choose_engine(folder: str | os.PathLike, asked: str, device: str = "cpu", dtype: str = "auto") -> EngineChoice:
    """The engine that runs the local folder `folder` for `asked` (torch, auto, or an engine of `CACHED_ENGINES`).
    `auto`: the first of `AUTO_ORDER` whose modules import, on the CPU in float32, for a MiniTF folder; else torch.
    An engine asked for by name that cannot run here is an EngineUnavailable naming what to install or do; one
    whose export cannot be made or does not give the folder's outputs falls back to torch, saying why."""
    if asked == TORCH:
        return EngineChoice(TORCH, None, "torch (asked for)")
    family = minitf_family(folder)
    if asked != AUTO:
        engine = CACHED_ENGINES[asked]
        missing = missing_modules(engine)
        if missing:
            raise EngineUnavailable(_install_line(engine, missing))
        if family is None:
            raise EngineUnavailable(
                f"--engine {asked} runs a local MiniTF model folder through an export of it; {folder} is not one: "
                "leave --engine out, or give a MiniTF folder"
            )
        return prepare(Path(folder), engine, family)
    if family is None:
        return EngineChoice(TORCH, None, "torch (not a local MiniTF folder, which the engine exports need)")
    if device not in ("auto", "cpu") and not device.startswith("cpu"):
        return EngineChoice(TORCH, None, f"torch (on {device}; the engine exports run on the CPU)")
    if dtype not in ("auto", "float32"):
        return EngineChoice(TORCH, None, f"torch (in {dtype}; the engine exports are float32)")
    if device == "auto":
        import torch

        if torch.cuda.is_available():
            return EngineChoice(TORCH, None, "torch (a GPU is here; the engine exports run on the CPU)")
    for name in AUTO_ORDER:
        engine = CACHED_ENGINES[name]
        if not missing_modules(engine):
            return prepare(Path(folder), engine, family)
    names = ", ".join(AUTO_ORDER)
    return EngineChoice(TORCH, None, f"torch ({names} not installed: {EXTRAS['engines'].install} to run faster)")


# The generation config fields the engine runners decode greedily as `generate()` does (the ends, the length, the
# beams) or that do not change greedy tokens; a folder whose generation config sets another (a repetition penalty, a
# minimum length) stays on torch.
ENGINE_DECODES = {
    "bos_token_id",
    "eos_token_id",
    "pad_token_id",
    "decoder_start_token_id",
    "max_length",
    "max_new_tokens",
    "do_sample",
    "use_cache",
    "num_beams",
    "length_penalty",
    "early_stopping",
    "transformers_version",
    "_from_model_config",
    # what only sampling reads (a sampling request runs on torch) and what only changes the outputs' shape
    "temperature",
    "top_k",
    "top_p",
    "output_attentions",
    "output_hidden_states",
    "output_scores",
    "output_logits",
    "return_dict_in_generate",
}


def settings_beyond_engine(folder: Path) -> list[str]:
    """The fields of the folder's generation_config.json that `generate()` applies and the engines do not."""
    from transformers import GenerationConfig

    if not (folder / "generation_config.json").is_file():
        return []
    return sorted(set(GenerationConfig.from_pretrained(folder).to_diff_dict()) - ENGINE_DECODES)


def prepare(folder: Path, engine: CachedEngine, family: str) -> EngineChoice:
    """`engine` on the folder's cached export, reused when its stamp matches the folder, else made and verified
    first; torch (with the reason) when that fails."""
    from hf_minitf.engines import load_engine

    beyond = settings_beyond_engine(folder) if family != "encoder" else []
    if beyond:
        return EngineChoice(
            TORCH,
            None,
            f"torch (its generation_config.json sets {', '.join(beyond)}, which {engine.runtime} does not apply)",
        )
    kind = FAMILIES[family].engine_kind
    cached = cache_folder(folder, engine.name)
    try:
        stamp = _stamp(folder)
        recorded = _recorded(cached)
        if recorded is not None and {key: recorded.get(key) for key in stamp} == stamp:
            runner = load_engine(cached, kind)  # type: ignore[call-overload]
            why = f"reused {cached}, verified when made: {recorded.get('verification')}"
            return EngineChoice(engine.name, runner, f"{engine.runtime} ({why})")
        verification = _build(folder, cached, engine, stamp)
        if verification is None or verification.failures:
            summary = "nothing was measured" if verification is None else verification.summary()
            return EngineChoice(
                TORCH, None, f"torch ({engine.runtime}'s export does not give the model's outputs: {summary})"
            )
        runner = load_engine(cached, kind)  # type: ignore[call-overload]
    except (OSError, ValueError, ImportError, RuntimeError) as error:
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        first = first if len(first) <= REASON_CHARACTERS else first[: REASON_CHARACTERS - 3] + "..."
        return EngineChoice(TORCH, None, f"torch (the {engine.runtime} export of {folder} failed: {first})")
    agreement = "; ".join(check.row.agreement for check in verification.checks)
    why = "made" if recorded is None else "weights changed: made again"
    return EngineChoice(engine.name, runner, f"{engine.runtime} ({why} in {cached}, verified: {agreement})")


def _recorded(cached: Path) -> dict | None:
    """The stamp a cached export recorded, None where there is none (or it does not read)."""
    try:
        recorded = json.loads((cached / ENGINE_CACHE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return recorded if isinstance(recorded, dict) else None


def _build(folder: Path, cached: Path, engine: CachedEngine, stamp: dict):
    """Export the folder beside the cache, verify it against the folder, and put it in the cache's place when every
    file agrees: the `Verification` (None when nothing could be measured). A failed export or check leaves no
    folder behind and the previous cache as it was."""
    from hf_minitf.verification import verify_export

    exporter = getattr(importlib.import_module("hf_minitf.export"), f"export_{engine.export_format}")
    staging = cached.parent / f".{engine.name}-building-{uuid.uuid4().hex[:8]}"
    cached.parent.mkdir(parents=True, exist_ok=True)
    try:
        exporter(folder, staging)
        verification = verify_export(staging, folder, write_cards=False)
        measured = [check for check in verification.checks if check.agrees is not None]
        if not measured or verification.failures:
            return verification if measured else None
        record = stamp | {"engine": engine.name, "verification": verification.summary().partition(": ")[2]}
        (staging / ENGINE_CACHE_FILE).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
        old = cached.parent / f".{engine.name}-old-{uuid.uuid4().hex[:8]}"
        if cached.exists():
            os.replace(cached, old)
        os.replace(staging, cached)
        shutil.rmtree(old, ignore_errors=True)
        return verification
    finally:
        shutil.rmtree(staging, ignore_errors=True)


__all__ = ["EngineChoice", "EngineUnavailable", "cache_folder", "choose_engine", "minitf_family", "missing_modules"]
