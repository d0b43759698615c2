"""Model cards of MiniTF folders and their exports: huggingface_hub's `ModelCard` rendered from the templates of
`model_cards/`, its sections marked so that a card is updated in place (a user's text kept).

What the rest of the package asks of a card, by what it is for:

- a saved folder: `write_model_card` (on `save_pretrained`), `update_model_card` (after training, with the
  `TrainingData` its card names),
  `relicense_card`, `prepare_upload` (the snippets name the repo it goes to), `stored_parameters` (`minitf info`);
- a converted model: `render_model_card`, before its folder exists;
- an export: `export_card` (its template rendered), `export_card_data` (what it carries over from its source's),
  `source_naming` and `source_words` (how it names its source: the Hub repo it is published as, or none),
  `model_examples` (the source's example texts, which its snippets run on), `insert_section_after` (an export's
  usage added under its copied card's);
- measurements: `record_evaluation` (`minitf eval`: model-index, `.eval_results/`, `EVAL_RESULTS_FOLDER`,
  `is_eval_results_path`), `write_runs_in` and `RunRow` (`minitf verify`'s "Runs in" table);
- `read_card` (a folder's card, its metadata checked before it is parsed), `card_template` (a template's text) and
  `PLACEHOLDER_MODEL_ID` and `local_model_id` (what a snippet names before the model has a repo).

Inside: `facts` reads what a folder is, `prompts` picks the example texts its tokenizer spells, `render` renders and
splices sections, `update` changes a folder's card,
`exports`, `evaluation` and `runs_in` the cards of exports and measurements.
"""

from hf_minitf.cards.evaluation import EVAL_RESULTS_FOLDER, is_eval_results_path, record_evaluation
from hf_minitf.cards.exports import export_card, export_card_data, source_naming, source_words
from hf_minitf.cards.facts import TrainingData, read_card, stored_parameters
from hf_minitf.cards.render import (
    PLACEHOLDER_MODEL_ID,
    card_template,
    inline_text,
    insert_section_after,
    local_model_id,
    model_examples,
    render_model_card,
)
from hf_minitf.cards.runs_in import RunRow, write_runs_in
from hf_minitf.cards.update import (
    drop_local_source,
    drop_tokenizer_loading_state,
    prepare_upload,
    relicense_card,
    update_model_card,
    write_model_card,
)

__all__ = [
    "EVAL_RESULTS_FOLDER",
    "PLACEHOLDER_MODEL_ID",
    "RunRow",
    "TrainingData",
    "card_template",
    "drop_local_source",
    "drop_tokenizer_loading_state",
    "export_card",
    "export_card_data",
    "inline_text",
    "insert_section_after",
    "is_eval_results_path",
    "local_model_id",
    "model_examples",
    "prepare_upload",
    "read_card",
    "record_evaluation",
    "relicense_card",
    "render_model_card",
    "source_naming",
    "source_words",
    "stored_parameters",
    "update_model_card",
    "write_model_card",
    "write_runs_in",
]
