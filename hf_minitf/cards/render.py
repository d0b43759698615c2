"""Model cards rendered from the Markdown/Jinja templates of `model_cards/` (package data `hf_minitf.model_cards`)
with huggingface_hub's `ModelCard.from_template`: one per family, plus the origin section of converted models, the
results section of trained ones and the export cards. The sections a template renders sit between
`<!-- minitf:NAME -->` markers, so a card built on an existing one replaces those and keeps the rest (text a user
added, sentence-transformers' own sections).
"""

from __future__ import annotations

import html
import importlib.resources
import json
import os
import re
from pathlib import Path
from typing import Any, cast

from huggingface_hub import ModelCard, ModelCardData

from hf_minitf.cards.facts import MINITF_TAG, FolderFacts, TrainingData, file_sha256, read_card
from hf_minitf.cards.prompts import PLACEHOLDER_TEXTS, data_examples, example_texts, folder_speller
from hf_minitf.catalog.converters import CONVERTERS
from hf_minitf.catalog.families import FAMILIES, MODEL_TYPES, family_of_model_type
from hf_minitf.catalog.publishing import (
    DEFAULT_LICENSE,
    PACKAGE_LICENSE,
    UNSTATED_LICENSE,
    check_license,
    license_fields,
)

TEMPLATE_PACKAGE = "hf_minitf.model_cards"
# The same folder in a source checkout that is not installed (the package data is installed from it).
CHECKOUT_TEMPLATES = Path(__file__).resolve().parents[2] / "model_cards"
# The card template of each family (by model_type) is the family's `card_template`; these are the sections of
# converted and trained models, and of a converted model whose original project states no license.
ORIGIN_TEMPLATE = "converted.md"
RESULTS_TEMPLATE = "results.md"
LICENSE_TEMPLATE = "license.md"
USE_TEMPLATE = "use.md"
"""The intended use and limitations of every model, after the family's usage section."""
SENTENCE_EXAMPLES = 3
"""Sentences a sentence-transformers card's snippet embeds and compares."""
LICENSE_SECTION = "license"
PLACEHOLDER_MODEL_ID = "path/to/this/folder"


def local_model_id(folder: str | os.PathLike) -> str:
    """What the snippets of a folder's card load before it has a repo: the folder's name, found from the folder
    above it (never an absolute path: a card is published as it is written)."""
    return Path(folder).name


README = "README.md"
"""A folder's model card."""
SENTENCE_TRANSFORMERS_PLACEHOLDER = "sentence_transformers_model_id"
_SECTION = "<!-- minitf:{name} -->\n{text}\n<!-- /minitf:{name} -->"
_MARKER = re.compile(r"<!-- (/?)minitf:(\w+) -->")
_FENCES = ("```", "~~~")
_SENTENCE_TRANSFORMER_CALL = re.compile(r'SentenceTransformer\("([^"]*)"(?:, trust_remote_code=True)?\)')


def is_blank_card(text: str) -> bool:
    """Whether a card is empty or transformers' placeholder (what `push_to_hub` writes when a repo has none)."""
    return "[More Information Needed]" in text or not text.strip()


def inline_text(text: Any) -> str:
    """Text from data or a user (a title, a file name) as text in one line of a card: no line break (no heading or
    marker line of its own), HTML escaped (no tag, no comment: a section marker cannot be planted)."""
    return html.escape(" ".join(str(text).split()), quote=False)


def table_cell(text: Any) -> str:
    """Text from data (a file name, a dataset id, a metric's name) as one cell of a card's Markdown table:
    `inline_text`, with `|` escaped (no extra column)."""
    return inline_text(text).replace("|", "\\|")


def card_template(name: str) -> str:
    """The text of a card template of `model_cards/`: the installed package data, else the checkout's folder."""
    try:
        return importlib.resources.files(TEMPLATE_PACKAGE).joinpath(name).read_text(encoding="utf-8")
    except ModuleNotFoundError:
        return (CHECKOUT_TEMPLATES / name).read_text(encoding="utf-8")


def render_card(
    facts: FolderFacts,
    data: ModelCardData,
    *,
    model_id: str,
    prompt: str | list[str],
    title: str | None = None,
    summary: str | None = None,
    origin: str | None = None,
    notes: str | None = None,
    results: dict[str, Any] | None = None,
    unstated_license: str | None = None,
    license_unknown: bool = False,
    training: TrainingData | None = None,
    vocabulary: str | None = None,
) -> ModelCard:
    """The family's card for `facts`, rendered from its template with `data` as metadata: the snippets run on
    `prompt` (a sentence-transformers card's on each text of a list, `prompts.example_texts`), the intended use and
    limitations say what the config, `vocabulary` (what one token is: word, character or subword) and the metadata's
    `language` tell; with `origin` the converted model's origin section, with `results` (`results.md`'s inputs) the
    results section and, with `training`, the training data's; with `unstated_license` (the original project's
    name) the section saying that project states no license, with `license_unknown` the one saying nobody gave one."""
    family = family_of_model_type(facts.model_type)
    if family is None:
        raise ValueError(
            f"{facts.model_type!r} is not a MiniTF model type; cards are written for {sorted(MODEL_TYPES)}."
        )
    template = card_template(family.card_template) + card_template(USE_TEMPLATE)
    if origin is not None:
        template += card_template(ORIGIN_TEMPLATE)
    if results is not None or training is not None:
        template += card_template(RESULTS_TEMPLATE)
    if unstated_license is not None or license_unknown:
        template += card_template(LICENSE_TEMPLATE)
    examples = [prompt] if isinstance(prompt, str) else list(prompt)
    languages = data.language if isinstance(data.language, list) else [data.language] if data.language else []
    return ModelCard.from_template(
        data,
        template_str=template,
        config=facts.config,
        architecture=facts.architecture,
        head=facts.head,
        sentence_transformers=facts.sentence_transformers,
        num_parameters=facts.num_parameters,
        model_id=model_id,
        prompt=examples[0],
        examples=examples,
        placeholders=[text for text in examples if text in PLACEHOLDER_TEXTS],
        pipeline_tag=facts.pipeline_tag,
        languages=[inline_text(language) for language in languages],
        vocabulary=vocabulary,
        training=training
        and {
            "name": inline_text(training.name) if training.name else None,
            "hub_id": inline_text(training.hub_id) if training.hub_id else None,
            "size": inline_text(training.size) if training.size else None,
            "languages": [inline_text(language) for language in training.languages],
        },
        title=inline_text(title) if title else None,
        summary=summary,
        origin=origin,
        notes=notes,
        unstated_license=unstated_license,
        unstated_license_id=UNSTATED_LICENSE,
        package_license=PACKAGE_LICENSE,
        **(results or {}),
    )


def section_spans(text: str) -> dict[str, tuple[int, int, str]]:
    """The marked sections of a card body, found by structure rather than by marker text anywhere: name -> (where
    its start marker's line begins, where its end marker's line ends, its content). A marker counts only as a whole
    line of its own, outside fenced code blocks; a section is a start marker followed by its end marker with no
    other marker line between (a start marker that another marker follows is text, not a section), and the first
    section of a name is the one read and replaced. So a marker text planted in a line of the body (a title, a
    table cell, a dataset name), inside code or out of order cannot make a write replace more than its section."""
    spans: dict[str, tuple[int, int, str]] = {}
    fence: str | None = None
    opened: tuple[str, int, int] | None = None
    offset = 0
    for line in text.splitlines(keepends=True):
        bare = line.rstrip("\r\n")
        start, offset = offset, offset + len(line)
        if fence is not None:  # inside fenced code: nothing is a marker until the fence closes
            fence = None if bare.startswith(fence) else fence
            continue
        if bare.startswith(_FENCES):
            fence = bare[:3]
            continue
        marker = _MARKER.fullmatch(bare)
        if marker is None:
            continue
        closing, name = marker.groups()
        if not closing:
            opened = (name, start, offset)
        elif opened is not None and opened[0] == name and name not in spans:
            spans[name] = (opened[1], offset, text[opened[2] : start].removesuffix("\n").removesuffix("\r"))
            opened = None
        else:
            opened = None
    return spans


def sections(text: str) -> dict[str, str]:
    """The marked sections of a card body, by name (`section_spans`)."""
    return {name: content for name, (_, _, content) in section_spans(text).items()}


def set_section(text: str, name: str, content: str) -> str:
    """Replace the marked section `name` of a card body (`section_spans`), or append it."""
    section = _SECTION.format(name=name, text=content.strip()) + "\n"
    span = section_spans(text).get(name)
    if span is not None:
        return text[: span[0]] + section + text[span[1] :]
    return text.rstrip() + "\n\n" + section


def insert_section_after(text: str, after: str, name: str, content: str) -> str:
    """The card body with the marked section `name` (replaced where it is) right after the marked section `after`
    (else at the end): its `###` headings are then subsections of the heading `after`'s section is under."""
    text = drop_section(text, name)
    span = section_spans(text).get(after)
    if span is None:
        return set_section(text, name, content)
    section = _SECTION.format(name=name, text=content.strip()) + "\n"
    return text[: span[1]] + "\n" + section + text[span[1] :]


def drop_section(text: str, name: str) -> str:
    """A card body without its marked section `name` (as it was when it has none)."""
    span = section_spans(text).get(name)
    if span is None:
        return text
    return text[: span[0]].rstrip("\n") + "\n\n" + text[span[1] :].lstrip("\n")


def assemble_card(data: ModelCardData, text: str) -> ModelCard:
    """A card from validated metadata and a markdown body."""
    return ModelCard(f"---\n{data.to_yaml()}\n---\n\n{text.lstrip()}")


def card_data(card: ModelCard) -> ModelCardData:
    """The card's metadata (huggingface_hub types `RepoCard.data` as the base CardData; a ModelCard's is this)."""
    return cast(ModelCardData, card.data)


def _model_id_in(card: ModelCard) -> str | None:
    """The model id the card's usage section names, if it has one."""
    usage = sections(card.text).get("usage", "")
    match = re.search(r'(?:from_pretrained|SentenceTransformer|model=)\(?("(?:[^"\\]|\\.)*")', usage)
    return json.loads(match.group(1)) if match else None


def widget_texts(data: ModelCardData) -> list[str]:
    """The example texts of a card's `widget` metadata (what an earlier render chose), in order."""
    texts: list[str] = []
    widget = data.get("widget")
    for entry in widget if isinstance(widget, list) else []:
        if isinstance(entry, dict):
            sentences = entry.get("sentences")
            values = [
                entry.get("text"),
                entry.get("source_sentence"),
                *(sentences if isinstance(sentences, list) else []),
            ]
            texts += [value for value in values if isinstance(value, str) and value.strip()]
    return texts


def example_tokens(facts: FolderFacts) -> int | None:
    """The most tokens (special ones included) an example text of the model's card may have: its positions, less
    the room a generation prompt leaves the snippet's new tokens (model_cards/gpt.md: up to half the positions)."""
    positions = facts.config.get("max_position_embeddings")
    return positions // 2 if facts.pipeline_tag == "text-generation" and positions else positions


def example_count(facts: FolderFacts) -> int:
    """How many example texts the model's card shows: several sentences to compare for a sentence-transformers
    encoder, one text otherwise."""
    return SENTENCE_EXAMPLES if facts.sentence_transformers else 1


def model_examples(folder: str | os.PathLike) -> list[str]:
    """The example texts of the cards of what is made from the saved model `folder` (its exports): its card's own
    (`widget`) where its tokenizer spells them, else what `prompts.example_texts` chooses with that tokenizer, as
    many as its card shows (`example_count`): the texts the model's own card runs its snippets on."""
    facts = FolderFacts.from_folder(folder)
    card = read_card(Path(folder) / README)
    candidates = widget_texts(card_data(card)) if card is not None else []
    speller = folder_speller(folder, example_tokens(facts))
    return example_texts(speller, candidates, count=example_count(facts))


def is_minitf_card(card: ModelCard) -> bool:
    return MINITF_TAG in (card_data(card).tags or [])


def build_model_card(
    folder: str | os.PathLike | None = None,
    *,
    facts: FolderFacts | None = None,
    base: ModelCard | None = None,
    model_id: str | None = None,
    title: str | None = None,
    summary: str | None = None,
    prompt: str | None = None,
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
    training: TrainingData | None = None,
    tokenizer_folder: str | os.PathLike | None = None,
) -> ModelCard:
    """The card of the saved MiniTF folder `folder` (or of the model `facts` describe), starting from `base` (an
    existing card) when given.

    Metadata comes from `ModelCardData` (library, pipeline tag, tags, license, base model, the source checkpoint's
    file name and sha256 for conversions, the Hub dataset and languages of `training`, the example texts as
    `widget`); the sections the family's template renders (architecture, usage, intended use and limitations, and
    the origin, results or training data when given) replace those of `base`, whose other text is kept. `model_id`
    is what the snippets load (default: the id `base` names, else the folder); they run on the first texts the
    folder's tokenizer (else `tokenizer_folder`'s: the folder the model was loaded from) spells of `prompt`,
    `training.examples` and `base`'s widget (`prompts.example_texts`; without a tokenizer, placeholders the card says
    to replace, and no `widget`). The
    license is `license` when given (which drops a note asking for one), else `base`'s, else `DEFAULT_LICENSE`
    with a section saying none was given: every card names one.
    """
    if facts is None:
        if folder is None:
            raise ValueError("build_model_card needs the saved model's folder or its facts; pass folder=.")
        facts = FolderFacts.from_folder(folder, num_parameters)
    if base is not None and not is_minitf_card(base) and is_blank_card(base.text):
        extra_tags = [*(card_data(base).tags or []), *(extra_tags or [])]
        base = None
    data = ModelCardData() if base is None else card_data(ModelCard(str(base)))
    data.library_name = facts.library_name
    data.pipeline_tag = facts.pipeline_tag
    tags = list(data.tags or [])
    for tag in [*facts.tags, *([original_project.lower()] if original_project else []), *(extra_tags or [])]:
        if tag not in tags:
            tags.append(tag)
    data.tags = tags
    license_unknown = license is None and data.license is None and unstated_license is None
    chosen = check_license(license) if license is not None else data.license or DEFAULT_LICENSE
    for key, value in license_fields(chosen, getattr(data, "license_name", None)).items():
        setattr(data, key, value)
    if base_model is not None:
        data.base_model = base_model
    if training is not None and training.hub_id:
        data.datasets = [training.hub_id]
    if training is not None and training.languages:
        data.language = list(training.languages)
    generation = facts.pipeline_tag == "text-generation"
    max_tokens = example_tokens(facts)
    speller = folder_speller(folder, max_tokens) or folder_speller(tokenizer_folder, max_tokens)
    # unchecked, only what someone vouched for: a given prompt, an earlier card's (checked or given)
    known = data_examples(training.examples if training else (), generation) if speller else []
    examples = example_texts(
        speller,
        [*([prompt] if prompt else []), *known, *widget_texts(data)],
        count=example_count(facts),
    )
    if set(examples) & set(PLACEHOLDER_TEXTS):  # nothing for the Hub's widget
        data.pop("widget", None)
    else:
        data["widget"] = (
            [{"source_sentence": examples[0], "sentences": examples[1:]}]
            if facts.sentence_transformers
            else [{"text": examples[0]}]
        )
    if source_checkpoint is not None:
        source = Path(source_checkpoint)
        data["source_checkpoint"] = {"file": source.name, "sha256": file_sha256(source)}
    # sentence-transformers' own push_to_hub swaps its placeholder for the repo id in a card it reuses.
    default_id = (
        SENTENCE_TRANSFORMERS_PLACEHOLDER
        if facts.sentence_transformers
        else (local_model_id(folder) if folder is not None else PLACEHOLDER_MODEL_ID)
    )
    model_id = model_id or (_model_id_in(base) if base is not None else None) or default_id
    rendered = render_card(
        facts,
        data,
        model_id=model_id,
        prompt=examples if facts.sentence_transformers else examples[0],
        title=title,
        summary=summary,
        origin=origin,
        notes=notes,
        results=results,
        unstated_license=unstated_license,
        license_unknown=license_unknown,
        training=training,
        vocabulary=speller.kind if speller is not None else None,
    )
    if base is None:
        return rendered
    text = drop_section(base.text, LICENSE_SECTION) if license is not None else base.text
    if facts.sentence_transformers:  # sentence-transformers' own snippet: this repo, and the model code's flag
        text = _SENTENCE_TRANSFORMER_CALL.sub(
            lambda match: f'SentenceTransformer("{model_id}", trust_remote_code=True)', text
        )
    for name, content in sections(rendered.text).items():
        text = set_section(text, name, content)
    license_section = sections(text).get(LICENSE_SECTION)
    if license_section is not None:  # last, after the sections a later render added (training data, results)
        text = set_section(drop_section(text, LICENSE_SECTION), LICENSE_SECTION, license_section)
    return assemble_card(data, text)


def render_model_card(
    family: str,
    config: Any,
    *,
    title: str,
    summary: str,
    origin: str,
    num_parameters: int,
    repo_id: str = PLACEHOLDER_MODEL_ID,
    prompt: str | None = None,
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
