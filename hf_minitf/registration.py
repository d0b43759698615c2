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

The model code (hf_minitf/modeling, what `save_pretrained` copies beside a model) is the model alone. What the
package adds to it is put in place here, as each of its modules loads, on its classes only where hf_minitf is
installed: the checks of a config's fields (`add_config_checks`, hf_minitf.safety.model_configs), the checks of
the weights `from_pretrained` reads (`add_model_checks`, hf_minitf.safety.weights), the model card and file modes
of `save_pretrained` and the card `push_to_hub` uploads (hf_minitf.cards). A folder's copied code, loaded with
`trust_remote_code=True`, has transformers' usual behaviour.
"""

from __future__ import annotations

import functools
import importlib
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

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
    wrapped = _with_installed_translation_pipeline(pipelines.pipeline, TASK, MiniTFTranslationPipeline)
    pipelines.pipeline = wrapped  # type: ignore[attr-defined]


def _with_installed_translation_pipeline(pipeline: Any, task_name: str, pipeline_class: type) -> Any:
    """`pipeline` running the installed `minitf-translation` class for a pushed MiniTF translator.

    A pushed translator names its pipeline in `custom_pipelines` (so it loads where hf_minitf is not installed,
    with `trust_remote_code=True`), and transformers then asks for that flag even though the task is registered
    here. Without the flag, the installed class runs: for the task by name, and for no task when the model's
    config names this one alone."""

    @functools.wraps(pipeline)
    def installed_pipeline(task: str | None = None, model: Any = None, *args: Any, **kwargs: Any) -> Any:
        if kwargs.get("pipeline_class") is None and not kwargs.get("trust_remote_code"):
            if task == task_name or (task is None and _names_only_task(model, kwargs, task_name)):
                task, kwargs = task_name, {**kwargs, "pipeline_class": pipeline_class}
        return pipeline(task, model, *args, **kwargs)

    return installed_pipeline


def _names_only_task(model: Any, kwargs: dict[str, Any], task_name: str) -> bool:
    """Whether the config of `model` (a repo id or folder) names `task_name` as its only custom pipeline."""
    config = kwargs.get("config")
    if config is None and isinstance(model, str):
        from transformers import AutoConfig

        try:
            config = AutoConfig.from_pretrained(model, revision=kwargs.get("revision"), token=kwargs.get("token"))
        except Exception:  # noqa: BLE001  # not a loadable config without remote code: transformers decides
            return False
    elif config is None:
        config = getattr(model, "config", None)
    return list(getattr(config, "custom_pipelines", None) or {}) == [task_name]


def add_config_checks(module: ModuleType) -> None:
    """On the config class of a MiniTF config module: each field checked when set, the whole config once built,
    and then its family's model classes registered (`config_built`)."""
    from hf_minitf.safety.model_configs import FIELD_CHECKS, check_config, check_field

    for family in FAMILIES.values():
        module_name, _, class_name = family.config_class.rpartition(".")
        if module.__name__.endswith(f".{module_name}"):
            config_class = getattr(module, class_name)
            checks = FIELD_CHECKS[config_class.model_type]
            set_field, post_init = config_class.__setattr__, config_class.__post_init__

            def checked_setattr(self: Any, name: str, value: Any, checks=checks, set_field=set_field) -> None:
                check_field(type(self).__name__, checks, self.attribute_map.get(name, name), value)
                set_field(self, name, value)

            def checked_post_init(self: Any, post_init=post_init, **kwargs: Any) -> None:
                post_init(self, **kwargs)
                check_config(self)
                config_built(self)

            config_class.__setattr__ = checked_setattr
            config_class.__post_init__ = checked_post_init


def add_model_checks(layers: ModuleType) -> None:
    """On the base of every MiniTF model class: `from_pretrained` with the checks of the weights it reads,
    `save_pretrained` with the model card and the weights' file mode, `push_to_hub` with the card naming the repo."""
    base = layers.MiniTFPreTrainedModel
    from_pretrained, save_pretrained, upload = (
        base.from_pretrained.__func__,
        base.save_pretrained,
        base._upload_modified_files,
    )

    def checked_from_pretrained(cls: Any, pretrained_model_name_or_path: Any, *args: Any, **kwargs: Any) -> Any:
        from hf_minitf.safety.weights import checked_from_pretrained as load

        return load(cls, functools.partial(from_pretrained, cls), pretrained_model_name_or_path, *args, **kwargs)

    def save_with_card(self: Any, save_directory: str | os.PathLike, *args: Any, **kwargs: Any) -> None:
        save_pretrained(self, save_directory, *args, **kwargs)
        if not kwargs.get("is_main_process", True) or not Path(save_directory, "config.json").is_file():
            return
        from hf_minitf.cards import write_model_card
        from hf_minitf.safety.output_folders import give_open_modes

        give_open_modes(Path(save_directory))  # safetensors writes weights 0600 beside a 0644 config.json
        # the weights are saved: a bad card must not stop it
        write_model_card(save_directory, source_folder=self.name_or_path or None, keep_unreadable=True)

    def upload_with_card(self: Any, working_dir: str | os.PathLike, repo_id: str, *args: Any, **kwargs: Any) -> Any:
        prepare_upload_card(working_dir, repo_id, self.name_or_path, kwargs.get("token"), kwargs.get("revision"))
        return upload(self, working_dir, repo_id, *args, **kwargs)

    base.from_pretrained = classmethod(checked_from_pretrained)
    base.save_pretrained = functools.wraps(save_pretrained)(save_with_card)
    base._upload_modified_files = upload_with_card


def prepare_upload_card(
    folder: str | os.PathLike,
    repo_id: str,
    source: str | os.PathLike | None,
    token: bool | str | None = None,
    revision: str | None = None,
) -> None:
    """Before `push_to_hub` uploads `folder`: the MiniTF card naming `repo_id`, over transformers' blank one. Its
    example text is checked with the tokenizer beside the model: in `folder`, else in `source` (the folder the model
    was loaded from), else the one `repo_id` already holds (a tokenizer pushed first)."""
    import tempfile

    from hf_minitf.cards import prepare_upload
    from hf_minitf.cards.prompts import has_tokenizer

    with tempfile.TemporaryDirectory() as scratch:
        tokenizer_folder = None
        if not has_tokenizer(folder) and not has_tokenizer(source or None):
            tokenizer_folder = _repo_tokenizer(repo_id, scratch, token, revision)
        prepare_upload(folder, repo_id, source_folder=source or None, tokenizer_folder=tokenizer_folder)


def _repo_tokenizer(repo_id: str, scratch: str, token: bool | str | None, revision: str | None) -> str | None:
    """The tokenizer files `repo_id` holds, downloaded into `scratch`; None where it holds none (a new repo) or
    cannot be read (the card then names no example it could not check)."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import HfHubHTTPError

    from hf_minitf.cards.prompts import spelling_files

    try:
        snapshot_download(
            repo_id, allow_patterns=list(spelling_files()), local_dir=scratch, token=token, revision=revision
        )
    except (HfHubHTTPError, OSError, ValueError):
        return None
    return scratch


def add_pipeline_cards(module: ModuleType) -> None:
    """On the translation pipeline: `push_to_hub` uploads its model's card."""
    pipeline_class = module.MiniTFTranslationPipeline
    upload = pipeline_class._upload_modified_files

    def upload_with_card(self: Any, working_dir: str | os.PathLike, repo_id: str, *args: Any, **kwargs: Any) -> Any:
        prepare_upload_card(working_dir, repo_id, self.model.name_or_path, kwargs.get("token"), kwargs.get("revision"))
        return upload(self, working_dir, repo_id, *args, **kwargs)

    pipeline_class._upload_modified_files = upload_with_card


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


__all__ = [
    "PARTS",
    "add_config_checks",
    "add_model_checks",
    "add_pipeline_cards",
    "config_built",
    "install",
    "register",
]
