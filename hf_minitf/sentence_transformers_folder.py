"""Write a MiniTF encoder as a sentence-transformers folder: Transformer -> Pooling(mean) -> Normalize.

The folder is written by sentence-transformers itself (its modules, its `save`), so its files and its model card
are the ones sentence-transformers makes: `modules.json`, `sentence_bert_config.json`, `1_Pooling/`,
`2_Normalize/`, `config_sentence_transformers.json`, with the Hugging Face model and tokenizer at the root. The card
(README.md) is MiniTF's, not sentence-transformers' template: one usage section (with hf_minitf, and with
`trust_remote_code=True` where it is not installed) on sentences the tokenizer spells, and no figure that was not
measured on this model. `AutoModel.from_pretrained(folder)` and `pipeline("feature-extraction",
folder)` load the same folder.
"""

from __future__ import annotations

import copy
import os
import tempfile

from transformers import PreTrainedTokenizerBase

from hf_minitf.cards import drop_tokenizer_loading_state, write_model_card
from hf_minitf.cards.render import README
from hf_minitf.modeling.modeling_minitf_encoder import MiniTFEncoderModel
from hf_minitf.safety.output_folders import OutputFolder, output_folder


def save_sentence_transformer(
    model: MiniTFEncoderModel,
    tokenizer: PreTrainedTokenizerBase,
    folder: str | os.PathLike | OutputFolder,
    max_seq_length: int | None = None,
) -> str:
    """Save `model` and `tokenizer` to `folder` as a SentenceTransformer whose `encode` is the model's
    `pooler_output` (masked mean of `last_hidden_state`, then L2 normalization); returns the folder.

    `max_seq_length` (default: the smaller of the tokenizer's `model_max_length` and the model's
    `max_position_embeddings`) is where sentence-transformers truncates. The tokenizer is saved without the
    padding or truncation state a previous call may have left in it, padding on the right (the model numbers
    positions from the first slot, so left padding would shift the real tokens).

    The folder is written whole or not at all: beside `folder` first, then put in its place (an existing folder
    is replaced as a whole, so no file of an earlier model stays mixed in; only a model folder is replaced, see
    `output_folder.replace_refusal`); a failed write (disk full) leaves the previous folder as it was and nothing
    behind. `folder` may be an OutputFolder its caller checked already.
    """
    if not isinstance(model, MiniTFEncoderModel):
        raise ValueError(
            f"save_sentence_transformer needs a MiniTFEncoderModel, got {type(model).__name__}; for a "
            "classification model pass its encoder (`model.model`)."
        )
    limit = model.config.max_position_embeddings
    if max_seq_length is None:
        max_seq_length = min(tokenizer.model_max_length, limit)
    if not 0 < max_seq_length <= limit:
        raise ValueError(f"max_seq_length must lie in [1, max_position_embeddings={limit}], got {max_seq_length}.")
    target = output_folder(folder, overwrite=True)  # before the heavy import: a folder it must not replace fails fast
    from sentence_transformers import SentenceTransformer  # imported here: heavy, and only this function needs it
    from sentence_transformers.sentence_transformer.modules import Normalize, Pooling, Transformer

    tokenizer = copy.deepcopy(tokenizer)
    tokenizer.padding_side = "right"
    if tokenizer.is_fast:
        tokenizer.backend_tokenizer.no_padding()
        tokenizer.backend_tokenizer.no_truncation()
    with tempfile.TemporaryDirectory() as staging, target.write() as work:
        model.save_pretrained(staging)
        tokenizer.save_pretrained(staging)
        transformer = Transformer(staging, max_seq_length=max_seq_length)
        sentence_model = SentenceTransformer(
            modules=[transformer, Pooling(model.config.hidden_size, "mean"), Normalize()],
            similarity_fn_name="cosine",
            device=str(model.device),
        )
        sentence_model.save(str(work), create_model_card=False)  # the card is MiniTF's alone (write_model_card)
        drop_tokenizer_loading_state(work)  # sentence-transformers loaded the tokenizer from `staging`
        (work / README).unlink(missing_ok=True)  # the encoder's own card, naming `work`: a new one replaces it
        write_model_card(work)
    return os.fspath(target)


__all__ = ["save_sentence_transformer"]
