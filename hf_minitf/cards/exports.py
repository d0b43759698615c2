"""The cards of exports (native, GGUF, Ollama, CTranslate2, ONNX, web): what each carries over from the card of the
MiniTF folder it was made from, and the card rendered from the export's template of `model_cards/`."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from huggingface_hub import ModelCard, ModelCardData

from hf_minitf.cards.facts import MINITF_TAG, read_card
from hf_minitf.cards.render import README, card_data, card_template, inline_text
from hf_minitf.catalog.publishing import DEFAULT_LICENSE, check_license

EXPORT_TAG = "minitf-export"


def export_card_data(source_folder: str | os.PathLike, license: str | None = None) -> dict[str, Any]:
    """What the card of an export carries over from the card of the MiniTF folder it was made from, as
    `ModelCardData` keyword arguments: the license (`license` when given, else the source card's, else
    `DEFAULT_LICENSE`) and the source's model-index (`model_name` and `eval_results`: a trained model's held-out
    figures, when its card has them). A source card whose metadata does not parse is a CardMetadataError."""
    card = read_card(Path(source_folder) / README)
    data = card_data(card) if card is not None else ModelCardData()
    carried: dict[str, Any] = {"license": check_license(license) if license else data.license or DEFAULT_LICENSE}
    if data.eval_results:
        carried |= {"model_name": data.model_name, "eval_results": data.eval_results}
    return carried


def export_card(
    template_file: str,
    /,
    *,
    library_name: str,
    tags: Sequence[str],
    carried: dict[str, Any],
    pipeline_tag: str | None = None,
    **variables: Any,
) -> ModelCard:
    """The card of an export: metadata (`library_name`, `pipeline_tag`, the MiniTF export tags then `tags`, and what
    `carried` brings: `export_card_data`'s fields, the base model) and the body rendered from `model_cards/<template_file>`
    with `variables`."""
    data = ModelCardData(
        library_name=library_name, pipeline_tag=pipeline_tag, tags=[MINITF_TAG, EXPORT_TAG, *tags], **carried
    )
    titles = {name: inline_text(variables[name]) for name in ("title", "model_title") if name in variables}
    return ModelCard.from_template(data, template_str=card_template(template_file), **(variables | titles))
