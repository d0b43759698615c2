"""Register MiniTF with transformers: each family's config and tokenizer with the Auto classes, the model classes of
each family in use, and the `minitf-translation` pipeline task, from the family registry
(`hf_minitf.catalog.families`).

Each part runs when the transformers module it extends has loaded (the configs once `configuration_auto` has, ...),
never in the middle of transformers' own imports: `_hf_minitf_autoregister` (stdlib only, outside this package)
says when, in every process where hf_minitf is installed (its start-up hook runs at interpreter start) and in any
process that imports `hf_minitf`. `register()` registers everything now.

The configs and the tokenizer need no torch. The model classes do (with `transformers.modeling_utils`), so they are
registered only for a family whose config this process builds (`config_built`, called by every MiniTF config once
built): an Auto class builds the config before it looks the model class up, and a process that never meets a MiniTF
folder never imports the model code.
"""

from __future__ import annotations

import importlib
import sys
from types import ModuleType

from _hf_minitf_autoregister import PARTS, RegisteringFinder
from _hf_minitf_autoregister import install as install_finder
from hf_minitf.catalog.families import FAMILIES, Family, family_of_model_type

MODELING_AUTO = "transformers.models.auto.modeling_auto"

# Families whose config this process has built, and those whose model classes are registered.
_families_in_use: set[str] = set()
_families_registered: set[str] = set()


def register_configs(configuration_auto: ModuleType) -> None:
    for family in FAMILIES.values():
        config_class = family.load(family.config_class)
        configuration_auto.AutoConfig.register(config_class.model_type, config_class, exist_ok=True)


def register_family_models(modeling_auto: ModuleType, family: Family) -> None:
    """The model classes of `family` with each of its Auto classes (once)."""
    if family.name in _families_registered:
        return
    config_class = family.load(family.config_class)
    for auto_name, dotted in family.auto_classes.items():
        getattr(modeling_auto, auto_name).register(config_class, family.load(dotted), exist_ok=True)
    _families_registered.add(family.name)


def register_models(modeling_auto: ModuleType) -> None:
    """The model classes of each family whose config was built before `modeling_auto` loaded."""
    for name in sorted(_families_in_use):
        register_family_models(modeling_auto, FAMILIES[name])


def config_built(config: object) -> None:
    """A MiniTF config was built: its family's model classes are registered now where `modeling_auto` has loaded
    (and its part has run), else when it loads. Before any Auto class looks the model class up."""
    family = family_of_model_type(getattr(config, "model_type", None))
    if family is None or family.name in _families_registered:
        return
    _families_in_use.add(family.name)
    finder = install_finder()
    if finder is not None and MODELING_AUTO in finder.done:
        register_family_models(sys.modules[MODELING_AUTO], family)


def register_tokenizers(tokenization_auto: ModuleType) -> None:
    for family in FAMILIES.values():
        if family.tokenizer_class:
            tokenizer_class = family.load(family.tokenizer_class)
            tokenization_auto.AutoTokenizer.register(
                family.load(family.config_class), fast_tokenizer_class=tokenizer_class, exist_ok=True
            )


def register_pipelines(pipelines: ModuleType) -> None:
    from transformers import AutoModelForSeq2SeqLM

    from hf_minitf.modeling.pipeline_minitf_translation import TASK, MiniTFTranslationPipeline

    # transformers 5 refuses the task names "translation*" and "text2text-generation": this one is ours.
    pipelines.PIPELINE_REGISTRY.register_pipeline(
        TASK, pipeline_class=MiniTFTranslationPipeline, pt_model=AutoModelForSeq2SeqLM, type="text"
    )


def register() -> None:
    """Register every MiniTF family with transformers' Auto classes and pipelines now (once), the model classes of
    every family included: import the transformers module of each part, which runs it; a part that failed runs
    again, raising its error."""
    finder = install()
    _families_in_use.update(FAMILIES)
    for name in PARTS:
        importlib.import_module(name)
    finder.register_loaded()
    for name in list(finder.failed):
        globals()[PARTS[name]](importlib.import_module(name))
        del finder.failed[name]
    register_models(importlib.import_module(MODELING_AUTO))


def install() -> RegisteringFinder:
    """Register each part now where its transformers module is loaded, and when it loads otherwise (once). The
    start-up hook has done this in every process of an installed hf_minitf already."""
    finder = install_finder()
    assert finder is not None  # only the start-up install, skipped by HF_MINITF_NO_AUTOREGISTER, returns None
    finder.register_loaded()
    return finder


__all__ = ["PARTS", "config_built", "install", "register"]
