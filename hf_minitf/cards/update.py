"""Cards of saved MiniTF folders updated in place: what `save_pretrained` and `push_to_hub` of every MiniTF model
(through `modeling_minitf.find_card_writer`), `save_sentence_transformer`, `minitf convert`, `minitf push` and the
training commands (`update_model_card`) write. A MiniTF card already in a folder is updated, never replaced: its
marked sections are rendered again (`render.build_model_card`), eval results and the license set, and the card
saved whole or not at all.
"""

from __future__ import annotations

import json
import logging
import os
import re
from pathlib import Path
from typing import Any

from huggingface_hub import EvalResult, ModelCard

from hf_minitf.cards.facts import PIPELINE_TAGS, TrainingData, read_card, read_folder_json
from hf_minitf.cards.render import (
    LICENSE_SECTION,
    README,
    assemble_card,
    build_model_card,
    card_data,
    drop_section,
    is_minitf_card,
)
from hf_minitf.catalog.exports import EXPORT_FILE
from hf_minitf.catalog.families import family_of_model_type
from hf_minitf.catalog.publishing import TOKENIZER_LOADING_STATE, check_license, license_fields
from hf_minitf.catalog.verification import SOURCE_CARD_FIELD, SOURCE_HASHES_FIELD
from hf_minitf.safety.card_metadata import CardMetadataError
from hf_minitf.safety.files import confined_path, write_files_together

logger = logging.getLogger(__name__)

TRANSLATION_PIPELINE_FILE = "pipeline_minitf_translation.py"


def _source_card(source_folder: str | os.PathLike | None) -> ModelCard | None:
    """The card of the folder a model was loaded from, to carry over; one whose metadata does not parse is not
    carried (a warning names it): it is that folder's to fix, and saving elsewhere must not fail for it."""
    if not source_folder or not Path(source_folder).is_dir():
        return None
    try:
        return read_card(Path(source_folder) / README)
    except CardMetadataError as error:
        logger.warning("%s; this card is not carried over to the saved folder.", error)
        return None


def save_card(card: ModelCard, path: str | os.PathLike) -> None:
    """Save `card` to `path` whole or not at all (`safety.files.write_files_together`): written beside it under a
    temporary name, then renamed over it, so a failed write (disk full) leaves the previous card as it was and no
    temporary file behind, and a README.md (or temporary name) that is a link is replaced, never followed."""
    path = Path(path)
    write_files_together(path.parent, {path.name: str(card)})


def write_model_card(
    folder: str | os.PathLike,
    *,
    source_folder: str | os.PathLike | None = None,
    tokenizer_folder: str | os.PathLike | None = None,
    keep_unreadable: bool = False,
    **card_options: Any,
) -> ModelCard | None:
    """Write (or update in place) `folder/README.md` for a saved MiniTF folder and return the card.

    A MiniTF card already in `folder` is updated, never replaced; else a MiniTF card in `source_folder` (the
    folder the model was loaded from) is carried over; else the card found in `folder` (sentence-transformers'
    card) gets the MiniTF sections; else a new card is made (keeping the tags of transformers' blank card).
    A card in `folder` whose metadata does not parse is a CardMetadataError, or with `keep_unreadable` (what
    `save_pretrained` asks: the rest of the folder is saved already) left as it was with a warning, and None returned.
    The card's example text is checked with the tokenizer in `folder`, else in `tokenizer_folder` (the one beside the
    model where it is published), else in `source_folder`.
    """
    try:
        card = _folder_card(folder, source_folder, tokenizer_folder, **card_options)
    except CardMetadataError as error:
        if not keep_unreadable:
            raise
        logger.warning("%s; the card was left as it was, without MiniTF's sections.", error)
        return None
    save_card(card, Path(folder) / README)
    return card


def _folder_card(
    folder: str | os.PathLike,
    source_folder: str | os.PathLike | None,
    tokenizer_folder: str | os.PathLike | None = None,
    **card_options: Any,
) -> ModelCard:
    """The card `write_model_card` writes, not yet saved; its example checked with the tokenizer of `folder`, else of
    `tokenizer_folder`, else of `source_folder`."""
    folder = Path(folder)
    existing = read_card(folder / README)
    source = _source_card(source_folder)
    base: ModelCard | None
    if existing is not None and is_minitf_card(existing):
        base = existing
    elif source is not None and is_minitf_card(source):
        base = source
        card_options["extra_tags"] = (
            [*(card_data(existing).tags or []), *card_options.get("extra_tags", [])]
            if existing is not None
            else card_options.get("extra_tags")
        )
    else:
        base = existing
    return build_model_card(folder, base=base, tokenizer_folder=tokenizer_folder or source_folder, **card_options)


def update_model_card(
    folder: str | os.PathLike,
    *,
    eval_results: dict[str, float] | None = None,
    dataset_name: str | None = None,
    image: str | None = None,
    extra_markdown: str | None = None,
    license: str | None = None,
    model_id: str | None = None,
    training: TrainingData | None = None,
) -> None:
    """Write or update `folder/README.md` of a saved MiniTF folder, keeping what an existing card says.

    `eval_results` (metric name -> value, measured on `dataset_name`, default: `training`'s name) go into the
    `model-index` metadata and a results table; `image` (a file in the folder, e.g. a loss curve PNG) and
    `extra_markdown` are shown under it. `training` (what the model was trained on) gives the training data
    section, the `datasets:` and `language:` metadata and the texts the example prompt is taken from.
    The card is saved once, whole (`save_card`): a failed write leaves the previous README.md as it was.
    """
    if image is not None and not (Path(folder) / image).is_file():
        raise ValueError(f"image {image!r} is not a file in {folder}; save it there first, then name it relative.")
    results = None
    dataset_name = dataset_name or (training.name if training else None)
    if eval_results is not None or image is not None or extra_markdown is not None:
        results = dict(
            eval_results=eval_results,
            dataset_name=dataset_name,
            extra_markdown=extra_markdown,
            image=Path(image).as_posix() if image else None,
            image_name=Path(image).stem if image else None,
        )
    card = _folder_card(folder, None, license=license, model_id=model_id, results=results, training=training)
    if eval_results:
        data = card_data(card)
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
        card = assemble_card(data, card.text)
    save_card(card, Path(folder) / README)


def add_translation_pipeline(folder: str | os.PathLike) -> None:
    """Make `minitf-translation` travel with a saved seq2seq folder: the pipeline file beside the model code
    and `custom_pipelines` in config.json, so `pipeline("minitf-translation", model=..., trust_remote_code=True)`
    works where hf_minitf is not installed."""
    from hf_minitf.modeling import pipeline_minitf_translation as module

    folder = Path(folder)
    config = read_folder_json(confined_path(folder, "config.json", "config.json"))  # a link out is not read
    config["custom_pipelines"] = {
        module.TASK: {
            "impl": f"{Path(TRANSLATION_PIPELINE_FILE).stem}.{module.MiniTFTranslationPipeline.__name__}",
            "pt": ["AutoModelForSeq2SeqLM"],
            "tf": [],
            "type": "text",
        }
    }
    write_files_together(
        folder,
        {
            TRANSLATION_PIPELINE_FILE: Path(module.__file__).read_text(encoding="utf-8"),
            "config.json": json.dumps(config, indent=2, sort_keys=True) + "\n",
        },
    )


def prepare_upload(
    folder: str | os.PathLike,
    repo_id: str,
    *,
    source_folder: str | os.PathLike | None = None,
    tokenizer_folder: str | os.PathLike | None = None,
    license: str | None = None,
) -> None:
    """Make a folder about to be uploaded to `repo_id` complete: its card names the repo (its example checked with
    the tokenizer in `folder`, else `tokenizer_folder`'s: the one the repo holds), a seq2seq model carries its
    translation pipeline. Folders of other models are left as they are."""
    if family_of_model_type(read_folder_json(Path(folder) / "config.json").get("model_type")) is None:
        return
    drop_tokenizer_loading_state(folder)
    card = write_model_card(
        folder, source_folder=source_folder, tokenizer_folder=tokenizer_folder, model_id=repo_id, license=license
    )
    if card is not None and card_data(card).pipeline_tag == PIPELINE_TAGS["ForConditionalGeneration"]:
        add_translation_pipeline(folder)


def drop_tokenizer_loading_state(folder: str | os.PathLike) -> None:
    """Take out of the folder's `tokenizer_config.json` what transformers records of the load it was saved after
    (`TOKENIZER_LOADING_STATE`), so the folder reads the same wherever it is loaded from."""
    path = Path(folder) / "tokenizer_config.json"
    if not path.is_file():
        return
    data = read_folder_json(path)
    if not any(key in data for key in TOKENIZER_LOADING_STATE):
        return
    for key in TOKENIZER_LOADING_STATE:
        data.pop(key, None)
    text = json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    write_files_together(path.parent, {path.name: text})


def drop_local_source(folder: str | os.PathLike) -> None:
    """Take out of an export about to be published the local folder it recorded as its source (with that folder's
    hashes), in its card and its `minitf_export.json`: a path on this machine names nothing where the export is
    downloaded, and tells what it should not. A repo id stays. (`minitf verify` measured the export before.)"""
    folder = Path(folder)
    card = read_card(folder / README)
    if card is not None and os.path.isabs(str(card.data.get(SOURCE_CARD_FIELD) or "")):
        data = card_data(card)
        for key in (SOURCE_CARD_FIELD, SOURCE_HASHES_FIELD):
            data.pop(key, None)
        save_card(assemble_card(data, card.text), folder / README)
    info_path = folder / EXPORT_FILE
    if info_path.is_file():
        info = read_folder_json(info_path)
        if os.path.isabs(str(info.get("source") or "")):
            for key in ("source", SOURCE_HASHES_FIELD):
                info.pop(key, None)
            write_files_together(folder, {EXPORT_FILE: json.dumps(info, indent=2) + "\n"})


def relicense_card(text: str, license: str) -> str:
    """The card `text` with `license` in its metadata, and without the section asking for one: a converted model's
    card when `minitf convert --license` names the license."""
    card = ModelCard(text)
    data = card_data(card)
    for key, value in license_fields(check_license(license)).items():
        setattr(data, key, value)
    return str(assemble_card(data, drop_section(card.text, LICENSE_SECTION)))
