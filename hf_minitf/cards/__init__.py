"""Model cards of MiniTF folders and their exports, built with huggingface_hub's `ModelCard` / `ModelCardData`
from the templates of `model_cards/`: `facts` reads what a folder is, `render` renders a card, `update` updates
a folder's card in place, `exports` is what an export's card carries over."""

from hf_minitf.cards.exports import export_card, export_card_data
from hf_minitf.cards.facts import FolderFacts, file_sha256, stored_parameters
from hf_minitf.cards.render import build_model_card, card_template, render_card, render_model_card
from hf_minitf.cards.update import (
    add_translation_pipeline,
    prepare_upload,
    relicense_card,
    save_card,
    update_model_card,
    write_model_card,
)

__all__ = [
    "FolderFacts",
    "add_translation_pipeline",
    "build_model_card",
    "card_template",
    "export_card",
    "export_card_data",
    "file_sha256",
    "prepare_upload",
    "relicense_card",
    "render_card",
    "render_model_card",
    "save_card",
    "stored_parameters",
    "update_model_card",
    "write_model_card",
]
