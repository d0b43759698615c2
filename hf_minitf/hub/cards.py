"""Model cards of MiniTF folders, built with huggingface_hub's `ModelCard` / `ModelCardData`.

Every way a model leaves the machine writes one: `save_pretrained` and `push_to_hub` of every MiniTF model (the
models find this module when hf_minitf is installed, see `modeling_minitf.find_card_writer`),
`save_sentence_transformer`, `minitf convert`, `minitf push` and the training commands (`update_model_card`).
The wording lives in the Markdown/Jinja templates of `model_cards/` (package data `hf_minitf.model_cards`): one per
family, plus the origin section of converted models and the results section of trained ones, rendered by
`ModelCard.from_template`. A card is read from the folder itself (config.json, the safetensors headers,
modules.json), so the same code serves a fresh save, a converted folder and a folder about to be pushed. The
sections between `<!-- minitf:NAME -->` markers are rewritten in place; everything else in an existing card (text a
user added, sentence-transformers' own sections) is kept.
"""

from __future__ import annotations

import hashlib
import importlib.resources
import json
import logging
import math
import os
import re
import shutil
from collections.abc import Iterable
from pathlib import Path
from typing import Any, cast

from huggingface_hub import EvalResult, ModelCard, ModelCardData

from hf_minitf.catalog.converters import CONVERTERS
from hf_minitf.catalog.families import FAMILIES, MODEL_TYPES, family_of_model_type
from hf_minitf.catalog.publishing import DEFAULT_LICENSE, UNSTATED_LICENSE, check_license
from hf_minitf.modeling.modeling_minitf import README, is_blank_card
from hf_minitf.safety.files import CardMetadataError, load_model_card, read_json

logger = logging.getLogger(__name__)

MINITF_TAG = "minitf"
PLACEHOLDER_MODEL_ID = "path/to/this/folder"
SENTENCE_TRANSFORMERS_PLACEHOLDER = "sentence_transformers_model_id"
# The card template of each family (by model_type) is the family's `card_template`; these are the sections of
# converted and trained models, and of a converted model whose original project states no license.
ORIGIN_TEMPLATE = "converted.md"
RESULTS_TEMPLATE = "results.md"
LICENSE_TEMPLATE = "license.md"
LICENSE_SECTION = "license"
TEMPLATE_PACKAGE = "hf_minitf.model_cards"
# The pipeline tag of each model head, by the end of its class name.
PIPELINE_TAGS = {
    "ForCausalLM": "text-generation",
    "ForSequenceClassification": "text-classification",
    "ForConditionalGeneration": "translation",
    "Model": "feature-extraction",
}
TRANSLATION_PIPELINE_FILE = "pipeline_minitf_translation.py"
_SECTION = "<!-- minitf:{name} -->\n{text}\n<!-- /minitf:{name} -->"
_SECTIONS = re.compile(r"<!-- minitf:(\w+) -->\n(.*?)\n<!-- /minitf:\1 -->", re.DOTALL)
_SENTENCE_TRANSFORMER_CALL = re.compile(r'SentenceTransformer\("([^"]*)"(?:, trust_remote_code=True)?\)')


def file_sha256(path: str | os.PathLike) -> str:
    """The sha256 of a file, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _read_json(path: Path) -> dict:
    """A saved folder's JSON object (config.json, a weights index) through the package's one reader."""
    return read_json(path, dict, "an object", "save the model again")


def stored_parameters(paths: Iterable[Path]) -> int:
    """Number of weights stored in safetensors files (tied weights are stored once), read from their headers (no
    tensor is loaded, nothing is memory-mapped: a sparse file may claim 256 GiB); a ValueError names a file whose
    header is malformed, in safetensors' words."""
    from safetensors import SafetensorError, safe_open

    from hf_minitf.modeling.modeling_minitf_loading import DTYPE_BITS, read_safetensors_header

    total = 0
    for path in paths:
        try:
            tensors = read_safetensors_header(path)
        except ValueError:
            tensors = None
        if tensors is not None and all(tensor.dtype in DTYPE_BITS for tensor in tensors.values()):
            total += sum(math.prod(tensor.shape) for tensor in tensors.values())
            continue
        try:  # a header refused above, or a dtype safetensors may know: its own check and message
            with safe_open(path, "pt") as weights:
                total += sum(math.prod(weights.get_slice(name).get_shape()) for name in weights.keys())
        except SafetensorError as error:
            raise ValueError(
                f"{path} is not a readable safetensors file ({error}); save or convert the model again"
            ) from None
    return total


def _count_safetensors_parameters(folder: Path) -> int | None:
    """Number of the model's stored weights (model.safetensors or the shards of its index), None without them."""
    index = folder / "model.safetensors.index.json"
    files = sorted(set(_read_json(index)["weight_map"].values())) if index.is_file() else ["model.safetensors"]
    paths = [folder / name for name in files]
    return stored_parameters(paths) if all(path.is_file() for path in paths) else None


def card_template(name: str) -> str:
    """The text of a card template of `model_cards/` (package data; the source tree's folder in a checkout whose
    editable install predates the package data)."""
    try:
        return importlib.resources.files(TEMPLATE_PACKAGE).joinpath(name).read_text(encoding="utf-8")
    except ModuleNotFoundError:
        return (Path(__file__).resolve().parent.parent / "model_cards" / name).read_text(encoding="utf-8")


class FolderFacts:
    """What a card says about a saved MiniTF model, read from its config (and its folder's files)."""

    def __init__(
        self, config: dict[str, Any], *, sentence_transformers: bool = False, num_parameters: int | None = None
    ) -> None:
        self.config = config
        self.model_type: str = config.get("model_type", "")
        architectures = config.get("architectures") or []
        self.architecture: str = architectures[0] if architectures else ""
        self.sentence_transformers = sentence_transformers
        self.num_parameters = num_parameters

    @classmethod
    def from_folder(cls, folder: str | os.PathLike, num_parameters: int | None = None) -> FolderFacts:
        folder = Path(folder)
        config_path = folder / "config.json"
        if not config_path.is_file():
            raise ValueError(f"{folder} has no config.json; save the model with save_pretrained first.")
        return cls(
            _read_json(config_path),
            sentence_transformers=(folder / "modules.json").is_file(),
            num_parameters=num_parameters or _count_safetensors_parameters(folder),
        )

    @property
    def head(self) -> str:
        """The end of the class name: ForCausalLM, ForSequenceClassification, ForConditionalGeneration or Model."""
        return next((head for head in PIPELINE_TAGS if self.architecture.endswith(head)), "Model")

    @property
    def pipeline_tag(self) -> str:
        return "sentence-similarity" if self.sentence_transformers else PIPELINE_TAGS[self.head]

    @property
    def library_name(self) -> str:
        return "sentence-transformers" if self.sentence_transformers else "transformers"

    @property
    def tags(self) -> list[str]:
        tags = [MINITF_TAG, self.model_type]
        if self.sentence_transformers:
            tags += ["sentence-transformers", "feature-extraction"]
        return tags


def render_card(
    facts: FolderFacts,
    data: ModelCardData,
    *,
    model_id: str,
    prompt: str = "Hello",
    title: str | None = None,
    summary: str | None = None,
    origin: str | None = None,
    notes: str | None = None,
    results: dict[str, Any] | None = None,
    unstated_license: str | None = None,
) -> ModelCard:
    """The family's card for `facts`, rendered from its template with `data` as metadata; with `origin` the
    converted model's origin section, with `results` (`results.md`'s inputs) the results section, with
    `unstated_license` (the original project's name) the section saying that project states no license."""
    family = family_of_model_type(facts.model_type)
    if family is None:
        raise ValueError(
            f"{facts.model_type!r} is not a MiniTF model type; cards are written for {sorted(MODEL_TYPES)}."
        )
    template = card_template(family.card_template)
    if origin is not None:
        template += card_template(ORIGIN_TEMPLATE)
    if results is not None:
        template += card_template(RESULTS_TEMPLATE)
    if unstated_license is not None:
        template += card_template(LICENSE_TEMPLATE)
    return ModelCard.from_template(
        data,
        template_str=template,
        config=facts.config,
        architecture=facts.architecture,
        head=facts.head,
        sentence_transformers=facts.sentence_transformers,
        num_parameters=facts.num_parameters,
        model_id=model_id,
        prompt=prompt,
        title=title,
        summary=summary,
        origin=origin,
        notes=notes,
        unstated_license=unstated_license,
        unstated_license_id=UNSTATED_LICENSE,
        **(results or {}),
    )


def sections(text: str) -> dict[str, str]:
    """The marked sections of a card body, by name."""
    return {match.group(1): match.group(2) for match in _SECTIONS.finditer(text)}


def _set_section(text: str, name: str, content: str) -> str:
    """Replace the marked section `name` of a card body, or append it."""
    pattern = re.compile(rf"<!-- minitf:{name} -->.*?<!-- /minitf:{name} -->\n?", re.DOTALL)
    section = _SECTION.format(name=name, text=content.strip()) + "\n"
    if pattern.search(text):
        return pattern.sub(lambda _: section, text, count=1)
    return text.rstrip() + "\n\n" + section


def _drop_section(text: str, name: str) -> str:
    """A card body without its marked section `name` (as it was when it has none)."""
    pattern = re.compile(rf"\n*<!-- minitf:{name} -->.*?<!-- /minitf:{name} -->\n*", re.DOTALL)
    return pattern.sub("\n\n", text, count=1)


def _card(data: ModelCardData, text: str) -> ModelCard:
    """A card from validated metadata and a markdown body."""
    return ModelCard(f"---\n{data.to_yaml()}\n---\n\n{text.lstrip()}")


def _data(card: ModelCard) -> ModelCardData:
    """The card's metadata (huggingface_hub types `RepoCard.data` as the base CardData; a ModelCard's is this)."""
    return cast(ModelCardData, card.data)


def _model_id_in(card: ModelCard) -> str | None:
    """The model id the card's usage section names, if it has one."""
    usage = sections(card.text).get("usage", "")
    match = re.search(r'(?:from_pretrained|SentenceTransformer|model=)\(?("(?:[^"\\]|\\.)*")', usage)
    return json.loads(match.group(1)) if match else None


def is_minitf_card(card: ModelCard) -> bool:
    return MINITF_TAG in (_data(card).tags or [])


def _load_card(path: Path) -> ModelCard | None:
    return load_model_card(path, ignore_metadata_errors=True) if path.is_file() else None


def _source_card(source_folder: str | os.PathLike | None) -> ModelCard | None:
    """The card of the folder a model was loaded from, to carry over; one whose metadata does not parse is not
    carried (a warning names it): it is that folder's to fix, and saving elsewhere must not fail for it."""
    if not source_folder or not Path(source_folder).is_dir():
        return None
    try:
        return _load_card(Path(source_folder) / README)
    except CardMetadataError as error:
        logger.warning("%s; this card is not carried over to the saved folder.", error)
        return None


def build_model_card(
    folder: str | os.PathLike | None = None,
    *,
    facts: FolderFacts | None = None,
    base: ModelCard | None = None,
    model_id: str | None = None,
    title: str | None = None,
    summary: str | None = None,
    prompt: str = "Hello",
    license: str | None = None,
    base_model: str | list[str] | None = None,
    original_project: str | None = None,
    source_checkpoint: str | os.PathLike | None = None,
    extra_tags: list[str] | None = None,
    num_parameters: int | None = None,
    origin: str | None = None,
    notes: str | None = None,
    results: dict[str, Any] | None = None,
    unstated_license: str | None = None,
) -> ModelCard:
    """The card of the saved MiniTF folder `folder` (or of the model `facts` describe), starting from `base` (an
    existing card) when given.

    Metadata comes from `ModelCardData` (library, pipeline tag, tags, license, base model, the source checkpoint's
    file name and sha256 for conversions); the sections the family's template renders (architecture, usage, and
    the origin or results when given) replace those of `base`, whose other text is kept. `model_id` is what the
    snippets load (default: the id `base` names, else the folder). The license is `license` when given (which
    drops a note asking for one), else `base`'s, else `DEFAULT_LICENSE`: every card names one.
    """
    if facts is None:
        if folder is None:
            raise ValueError("build_model_card needs the saved model's folder or its facts; pass folder=.")
        facts = FolderFacts.from_folder(folder, num_parameters)
    if base is not None and not is_minitf_card(base) and is_blank_card(base.text):
        extra_tags = [*(_data(base).tags or []), *(extra_tags or [])]
        base = None
    data = ModelCardData() if base is None else _data(ModelCard(str(base)))
    data.library_name = facts.library_name
    data.pipeline_tag = facts.pipeline_tag
    tags = list(data.tags or [])
    for tag in [*facts.tags, *([original_project.lower()] if original_project else []), *(extra_tags or [])]:
        if tag not in tags:
            tags.append(tag)
    data.tags = tags
    if license is not None:
        data.license = check_license(license)
    elif data.license is None:
        data.license = DEFAULT_LICENSE
    if base_model is not None:
        data.base_model = base_model
    if source_checkpoint is not None:
        source = Path(source_checkpoint)
        data["source_checkpoint"] = {"file": source.name, "sha256": file_sha256(source)}
    # sentence-transformers' own push_to_hub swaps its placeholder for the repo id in a card it reuses.
    default_id = SENTENCE_TRANSFORMERS_PLACEHOLDER if facts.sentence_transformers else str(folder)
    model_id = model_id or (_model_id_in(base) if base is not None else None) or default_id
    rendered = render_card(
        facts,
        data,
        model_id=model_id,
        prompt=prompt,
        title=title,
        summary=summary,
        origin=origin,
        notes=notes,
        results=results,
        unstated_license=unstated_license,
    )
    if base is None:
        return rendered
    text = _drop_section(base.text, LICENSE_SECTION) if license is not None else base.text
    if facts.sentence_transformers:  # sentence-transformers' own snippet: this repo, and the model code's flag
        text = _SENTENCE_TRANSFORMER_CALL.sub(
            lambda match: f'SentenceTransformer("{model_id}", trust_remote_code=True)', text
        )
    for name, content in sections(rendered.text).items():
        text = _set_section(text, name, content)
    return _card(data, text)


def save_card(card: ModelCard, path: str | os.PathLike) -> None:
    """Save `card` to `path` whole or not at all: written beside it under a temporary name, then renamed over it,
    so a failed write (disk full) leaves the previous card as it was and no temporary file behind."""
    path = Path(path)
    temporary = path.with_name(f".{path.name}.writing-{os.getpid()}")
    try:
        card.save(temporary)
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def write_model_card(
    folder: str | os.PathLike,
    *,
    source_folder: str | os.PathLike | None = None,
    keep_unreadable: bool = False,
    **card_options: Any,
) -> ModelCard | None:
    """Write (or update in place) `folder/README.md` for a saved MiniTF folder and return the card.

    A MiniTF card already in `folder` is updated, never replaced; else a MiniTF card in `source_folder` (the
    folder the model was loaded from) is carried over; else the card found in `folder` (sentence-transformers'
    card) gets the MiniTF sections; else a new card is made (keeping the tags of transformers' blank card).
    A card in `folder` whose metadata does not parse is a CardMetadataError, or with `keep_unreadable` (what
    `save_pretrained` asks: the rest of the folder is saved already) left as it was with a warning, and None returned.
    """
    try:
        card = _folder_card(folder, source_folder, **card_options)
    except CardMetadataError as error:
        if not keep_unreadable:
            raise
        logger.warning("%s; the card was left as it was, without MiniTF's sections.", error)
        return None
    save_card(card, Path(folder) / README)
    return card


def _folder_card(folder: str | os.PathLike, source_folder: str | os.PathLike | None, **card_options: Any) -> ModelCard:
    """The card `write_model_card` writes, not yet saved."""
    folder = Path(folder)
    existing = _load_card(folder / README)
    source = _source_card(source_folder)
    base: ModelCard | None
    if existing is not None and is_minitf_card(existing):
        base = existing
    elif source is not None and is_minitf_card(source):
        base = source
        card_options["extra_tags"] = (
            [*(_data(existing).tags or []), *card_options.get("extra_tags", [])]
            if existing is not None
            else card_options.get("extra_tags")
        )
    else:
        base = existing
    return build_model_card(folder, base=base, **card_options)


def update_model_card(
    folder: str | os.PathLike,
    *,
    eval_results: dict[str, float] | None = None,
    dataset_name: str | None = None,
    image: str | None = None,
    extra_markdown: str | None = None,
    license: str | None = None,
    model_id: str | None = None,
) -> None:
    """Write or update `folder/README.md` of a saved MiniTF folder, keeping what an existing card says.

    `eval_results` (metric name -> value, measured on `dataset_name`) go into the `model-index` metadata and a
    results table; `image` (a file in the folder, e.g. a loss curve PNG) and `extra_markdown` are shown under it.
    The card is saved once, whole (`save_card`): a failed write leaves the previous README.md as it was.
    """
    if image is not None and not (Path(folder) / image).is_file():
        raise ValueError(f"image {image!r} is not a file in {folder}; save it there first, then name it relative.")
    results = None
    if eval_results is not None or image is not None or extra_markdown is not None:
        results = dict(
            eval_results=eval_results,
            dataset_name=dataset_name,
            extra_markdown=extra_markdown,
            image=Path(image).as_posix() if image else None,
            image_name=Path(image).stem if image else None,
        )
    card = _folder_card(folder, None, license=license, model_id=model_id, results=results)
    if eval_results:
        data = _data(card)
        dataset = dataset_name or "held-out split"
        data.model_name = data.model_name or Path(model_id or Path(folder).resolve()).name
        task = data.pipeline_tag or "text-generation"
        data.eval_results = [
            EvalResult(
                task_type=task,
                dataset_type=re.sub(r"[^a-z0-9_.-]+", "-", dataset.lower()),
                dataset_name=dataset,
                metric_type=name,
                metric_name=name,
                metric_value=float(value),
            )
            for name, value in eval_results.items()
        ]
        card = _card(data, card.text)
    save_card(card, Path(folder) / README)


def add_translation_pipeline(folder: str | os.PathLike) -> None:
    """Make `minitf-translation` travel with a saved seq2seq folder: the pipeline file beside the model code
    and `custom_pipelines` in config.json, so `pipeline("minitf-translation", model=..., trust_remote_code=True)`
    works where hf_minitf is not installed."""
    from hf_minitf.modeling import pipeline_minitf_translation as module

    folder = Path(folder)
    shutil.copyfile(module.__file__, folder / TRANSLATION_PIPELINE_FILE)
    config = _read_json(folder / "config.json")
    config["custom_pipelines"] = {
        module.TASK: {
            "impl": f"{Path(TRANSLATION_PIPELINE_FILE).stem}.{module.MiniTFTranslationPipeline.__name__}",
            "pt": ["AutoModelForSeq2SeqLM"],
            "tf": [],
            "type": "text",
        }
    }
    with open(folder / "config.json", "w", encoding="utf-8") as handle:
        json.dump(config, handle, indent=2, sort_keys=True)
        handle.write("\n")


def prepare_upload(
    folder: str | os.PathLike,
    repo_id: str,
    *,
    source_folder: str | os.PathLike | None = None,
    license: str | None = None,
) -> None:
    """Make a folder about to be uploaded to `repo_id` complete: its card names the repo, a seq2seq model
    carries its translation pipeline. Folders of other models are left as they are."""
    if family_of_model_type(_read_json(Path(folder) / "config.json").get("model_type")) is None:
        return
    card = write_model_card(folder, source_folder=source_folder, model_id=repo_id, license=license)
    if card is not None and _data(card).pipeline_tag == PIPELINE_TAGS["ForConditionalGeneration"]:
        add_translation_pipeline(folder)


def render_model_card(
    family: str,
    config: Any,
    *,
    title: str,
    summary: str,
    origin: str,
    num_parameters: int,
    repo_id: str = PLACEHOLDER_MODEL_ID,
    prompt: str = "Hello",
    notes: str = "",
    license: str | None = None,
    base_model: str | None = None,
    original_project: str | None = None,
    source_checkpoint: str | os.PathLike | None = None,
    converter: str | None = None,
) -> str:
    """The card text of a converted model (`family`: gpt, encoder or seq2seq), before its folder exists.

    Used by `minitf convert`: the card gets the model's sizes from `config`, the texts given (`origin` and `notes`
    fill `model_cards/converted.md`), and the source checkpoint's sha256 when `source_checkpoint` is given. An
    encoder is described as the SentenceTransformer folder the conversion writes. The license is `license`, else
    the one the original project of `converter` (a source of `catalog.converters`) states, else `other` with a
    section saying that project states none and how to set one.
    """
    if family not in FAMILIES:
        raise ValueError(f"Unknown model family {family!r}; choose one of {sorted(FAMILIES)}.")
    if converter is not None and converter not in CONVERTERS:
        raise ValueError(f"Unknown conversion source {converter!r}; choose one of {sorted(CONVERTERS)}.")
    stated = CONVERTERS[converter].license if converter is not None else None
    unstated_license = CONVERTERS[converter].project if converter is not None and not (license or stated) else None
    config_dict = config.to_dict() if hasattr(config, "to_dict") else dict(config)
    config_dict["architectures"] = config_dict.get("architectures") or [FAMILIES[family].model_class]
    facts = FolderFacts(config_dict, sentence_transformers=family == "encoder", num_parameters=num_parameters)
    card = build_model_card(
        facts=facts,
        model_id=repo_id,
        title=title,
        summary=summary,
        prompt=prompt,
        license=license or stated or (UNSTATED_LICENSE if unstated_license else None),
        base_model=base_model,
        original_project=original_project,
        source_checkpoint=source_checkpoint,
        origin=origin,
        notes=notes or None,
        unstated_license=unstated_license,
    )
    return str(card)


def relicense_card(text: str, license: str) -> str:
    """The card `text` with `license` in its metadata, and without the section asking for one: a converted model's
    card when `minitf convert --license` names the license."""
    card = ModelCard(text)
    data = _data(card)
    data.license = check_license(license)
    return str(_card(data, _drop_section(card.text, LICENSE_SECTION)))


def export_card_data(source_folder: str | os.PathLike, license: str | None = None) -> dict[str, Any]:
    """What the card of an export carries over from the card of the MiniTF folder it was made from, as
    `ModelCardData` keyword arguments: the license (`license` when given, else the source card's, else
    `DEFAULT_LICENSE`) and the source's model-index (`model_name` and `eval_results`: a trained model's held-out
    figures, when its card has them). A source card whose metadata does not parse is a CardMetadataError."""
    card = _load_card(Path(source_folder) / README)
    data = _data(card) if card is not None else ModelCardData()
    carried: dict[str, Any] = {"license": check_license(license) if license else data.license or DEFAULT_LICENSE}
    if data.eval_results:
        carried |= {"model_name": data.model_name, "eval_results": data.eval_results}
    return carried


__all__ = [
    "FolderFacts",
    "add_translation_pipeline",
    "build_model_card",
    "card_template",
    "export_card_data",
    "file_sha256",
    "prepare_upload",
    "relicense_card",
    "render_card",
    "render_model_card",
    "save_card",
    "update_model_card",
    "write_model_card",
]
