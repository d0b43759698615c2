"""What the card of an export (native, GGUF, CTranslate2, ONNX, web) carries over from the card of the MiniTF
folder it was made from."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from huggingface_hub import ModelCardData

from hf_minitf.cards.facts import read_card
from hf_minitf.cards.render import card_data
from hf_minitf.catalog.publishing import DEFAULT_LICENSE, check_license
from hf_minitf.modeling.modeling_minitf import README


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
