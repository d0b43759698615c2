"""Register MiniTF with transformers: each family's config, model classes and tokenizer with the Auto classes,
and the `minitf-translation` pipeline task, from the family registry (`hf_minitf.catalog.families`).

Importing `hf_minitf` installs the registration without importing transformers: each part is registered when the
transformers module it extends has been imported (the configs once `configuration_auto` has loaded, the models
once `modeling_auto` has, ...), or at once where that module is already loaded. A part is never registered in
the middle of transformers' own imports, which would import half-loaded modules. `register()` registers
everything now.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import warnings
from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING

from hf_minitf.catalog.families import FAMILIES

if TYPE_CHECKING:  # transformers is not imported here: parts are registered as its modules load
    from transformers import PreTrainedConfig

AUTO = "transformers.models.auto"


def register_configs(configuration_auto: ModuleType) -> None:
    for family in FAMILIES.values():
        config_class: type[PreTrainedConfig] = family.load(family.config_class)
        configuration_auto.AutoConfig.register(config_class.model_type, config_class, exist_ok=True)


def register_models(modeling_auto: ModuleType) -> None:
    for family in FAMILIES.values():
        config_class = family.load(family.config_class)
        for auto_name, dotted in family.auto_classes.items():
            getattr(modeling_auto, auto_name).register(config_class, family.load(dotted), exist_ok=True)


def register_tokenizers(tokenization_auto: ModuleType) -> None:
    for family in FAMILIES.values():
        if family.tokenizer_class:
            tokenizer_class = family.load(family.tokenizer_class)
            tokenization_auto.AutoTokenizer.register(
                family.load(family.config_class), fast_tokenizer_class=tokenizer_class, exist_ok=True
            )


def register_pipelines(pipelines: ModuleType) -> None:
    from transformers import AutoModelForSeq2SeqLM

    from hf_minitf.pipelines.translation import TASK, MiniTFTranslationPipeline

    # transformers 5 refuses the task names "translation*" and "text2text-generation": this one is ours.
    pipelines.PIPELINE_REGISTRY.register_pipeline(
        TASK, pipeline_class=MiniTFTranslationPipeline, pt_model=AutoModelForSeq2SeqLM, type="text"
    )


# Each part of the registration, by the transformers module it extends, in the order they must run.
PARTS: dict[str, Callable[[ModuleType], None]] = {
    f"{AUTO}.configuration_auto": register_configs,
    f"{AUTO}.modeling_auto": register_models,
    f"{AUTO}.tokenization_auto": register_tokenizers,
    "transformers.pipelines": register_pipelines,
}
# The modules the registration itself imports: while one of them is half-imported, registering would import it
# again half-done, so the registration waits until it has loaded.
REGISTERED_FROM = ("hf_minitf.modeling.", "hf_minitf.pipelines.")
_done: set[str] = set()
_pending: dict[str, ModuleType] = {}


def _loading(module: ModuleType) -> bool:
    return bool(getattr(getattr(module, "__spec__", None), "_initializing", False))


def _register_pending(just_loaded: str | None = None) -> None:
    """Register the parts whose transformers modules have loaded, unless a module they import is half-imported
    (`just_loaded` has run whole, though the import system still marks it as loading)."""
    if any(
        name.startswith(REGISTERED_FROM) and name != just_loaded and _loading(module)
        for name, module in list(sys.modules.items())
    ):
        return
    for name in PARTS:
        module = _pending.pop(name, None)
        if module is not None and name not in _done:
            _done.add(name)
            PARTS[name](module)


def register() -> None:
    """Register every MiniTF family with transformers' Auto classes and pipelines now (once)."""
    for name in PARTS:
        if name not in _done:
            _pending[name] = importlib.import_module(name)
    _register_pending()


class _RegisterAfterImport(importlib.abc.MetaPathFinder):
    """Finds no module itself: it wraps the loader of each module of PARTS so that, once the module has run, its
    part of the registration runs (and of the modules the registration imports, so that a part that had to wait
    for one of them runs once it has loaded)."""

    def find_spec(self, name, path, target=None):
        if not (name in PARTS and name not in _done) and not (
            name.startswith(REGISTERED_FROM) and len(_done) < len(PARTS)
        ):
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path, target)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        run_module = spec.loader.exec_module

        def exec_module(module: ModuleType) -> None:
            run_module(module)
            if name in PARTS:
                _pending[name] = module
            try:
                _register_pending(just_loaded=name)
            except Exception as error:  # never break the import that got here
                warnings.warn(
                    f"hf_minitf could not register its models with transformers ({error}); "
                    "`import hf_minitf; hf_minitf.register()` shows why",
                    stacklevel=2,
                )

        spec.loader.exec_module = exec_module
        return spec


def install() -> None:
    """Register each part now where its transformers module is loaded, and when it loads otherwise (once)."""
    if not any(isinstance(finder, _RegisterAfterImport) for finder in sys.meta_path):
        sys.meta_path.insert(0, _RegisterAfterImport())
    for name in PARTS:
        module = sys.modules.get(name)
        if module is not None and not _loading(module) and name not in _done:
            _pending[name] = module
    _register_pending()


__all__ = ["PARTS", "install", "register"]
