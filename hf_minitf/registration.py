"""Register MiniTF with transformers: each family's config, model classes and tokenizer with the Auto classes,
and the `minitf-translation` pipeline task, from the family registry (`hf_minitf.catalog.families`).

Each part runs when the transformers module it extends has loaded (the configs once `configuration_auto` has, the
models once `modeling_auto` has, ...), never in the middle of transformers' own imports: `_hf_minitf_autoregister`
(stdlib only, outside this package) says when, in every process where hf_minitf is installed (its `.pth` runs at
interpreter start) and in any process that imports `hf_minitf`. `register()` registers everything now.

The model classes import `transformers.modeling_utils`, which every model load imports anyway; a process that
loads `modeling_auto` and never a model (transformers' docstrings load it for `AutoTokenizer`) pays that import.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from _hf_minitf_autoregister import PARTS, RegisteringFinder
from _hf_minitf_autoregister import install as install_finder
from hf_minitf.catalog.families import FAMILIES


def register_configs(configuration_auto: ModuleType) -> None:
    for family in FAMILIES.values():
        config_class = family.load(family.config_class)
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

    from hf_minitf.modeling.pipeline_minitf_translation import TASK, MiniTFTranslationPipeline

    # transformers 5 refuses the task names "translation*" and "text2text-generation": this one is ours.
    pipelines.PIPELINE_REGISTRY.register_pipeline(
        TASK, pipeline_class=MiniTFTranslationPipeline, pt_model=AutoModelForSeq2SeqLM, type="text"
    )


def register() -> None:
    """Register every MiniTF family with transformers' Auto classes and pipelines now (once): import the transformers
    module of each part, which runs it; a part that failed runs again, raising its error."""
    finder = install()
    for name in PARTS:
        importlib.import_module(name)
    finder.register_loaded()
    for name in list(finder.failed):
        globals()[PARTS[name]](importlib.import_module(name))
        del finder.failed[name]


def install() -> RegisteringFinder:
    """Register each part now where its transformers module is loaded, and when it loads otherwise (once). The
    start-up hook (`hf_minitf.pth`) has done this in every process of an installed hf_minitf already."""
    finder = install_finder()
    assert finder is not None  # only the start-up install, skipped by HF_MINITF_NO_AUTOREGISTER, returns None
    finder.register_loaded()
    return finder


__all__ = ["PARTS", "install", "register"]
