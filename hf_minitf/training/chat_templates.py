"""`set_chat_template`: give a GPT (a trained or converted folder, or a tokenizer and its model in memory) a chat
template its vocabulary can spell, so that TRL's SFTTrainer, `apply_chat_template` and `minitf serve`'s
/v1/chat/completions can use it (`minitf chat-template`, `minitf train gpt --chat-template`).

Tokens the template adds get embedding rows (`resize_token_embeddings`, when the model has too few) and the token
ending an assistant turn joins the generation config's `eos_token_id`, so generation stops at the end of an answer.
A folder is rewritten whole or not at all (`hf_minitf.safety.output_folders`).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import cast

import torch
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer, GenerationConfig, PreTrainedModel
from transformers import PreTrainedTokenizerBase as Tokenizer

from hf_minitf.catalog.families import family_of_config
from hf_minitf.catalog.wording import with_article
from hf_minitf.safety.json_files import read_json
from hf_minitf.safety.locks import folder_lock
from hf_minitf.safety.output_folders import OutputFolder
from hf_minitf.tokenization.chat_templates import ChatTemplateChange, apply_chat_template_to_tokenizer


def stop_at_end_of_turn(generation_config: GenerationConfig, change: ChatTemplateChange) -> bool:
    """Add the template's end-of-turn id to `generation_config.eos_token_id` (a list then); False if it was there."""
    ids = generation_config.eos_token_id
    ids = [] if ids is None else [ids] if isinstance(ids, int) else list(ids)
    if change.end_of_turn_id in ids:
        return False
    generation_config.eos_token_id = [*ids, change.end_of_turn_id]
    return True


def fit_model(model: PreTrainedModel, tokenizer: Tokenizer, change: ChatTemplateChange) -> bool:
    """Give `model` an embedding row for every token of `tokenizer` and stop its generation at the end of a turn;
    True when its embeddings grew."""
    stop_at_end_of_turn(model.generation_config, change)
    if len(tokenizer) <= cast(torch.nn.Embedding, model.get_input_embeddings()).num_embeddings:
        return False
    model.resize_token_embeddings(len(tokenizer))
    return True


def _gpt_folder(folder: Path) -> dict:
    """The config of a GPT folder; a ValueError naming what the folder is otherwise."""
    path = folder / "config.json"
    if not path.is_file():
        raise ValueError(
            f"{folder} has no config.json; give a GPT folder written by minitf train, quickstart or convert"
        )
    config = read_json(path, dict, "an object of config fields", "it is not a saved model's config")
    family = family_of_config(config, folder)
    if family != "gpt":
        raise ValueError(
            f"{folder} holds {with_article(family or 'unknown')} model; chat "
            "templates are for GPT folders (causal language models)"
        )
    return config


def set_chat_template(
    folder_or_tokenizer: str | Path | Tokenizer,
    name_or_path: str | Path,
    *,
    model: PreTrainedModel | None = None,
    replace: bool = False,
) -> ChatTemplateChange:
    """Give a GPT the chat template `name_or_path`: a name of `hf_minitf.catalog.chat_templates.CHAT_TEMPLATES`
    (`chatml`, `simple`) or a Jinja file.

    `folder_or_tokenizer` is a GPT folder, rewritten in place (tokenizer files, and the weights, config and
    generation config the template needs), or a tokenizer changed in memory, with its `model` fitted when given
    (else the caller resizes its embeddings to `len(tokenizer)`). A template the vocabulary cannot spell, or whose
    assistant turns end with no token to stop at, is refused with a ValueError and nothing changes; so is a second
    template unless `replace`. Returns what was added and the end-of-turn token.
    """
    if isinstance(folder_or_tokenizer, Tokenizer):
        change = apply_chat_template_to_tokenizer(folder_or_tokenizer, name_or_path, replace)
        if model is not None:
            fit_model(model, folder_or_tokenizer, change)
        return change
    folder = Path(folder_or_tokenizer)
    if not folder.is_dir():
        raise ValueError(f"{folder} is not a folder; give a GPT folder written by minitf train, quickstart or convert")
    with folder_lock(folder):  # a concurrent run waits, then finds this template (and refuses without --replace)
        return _rewrite_with_template(folder, name_or_path, replace)


def _rewrite_with_template(folder: Path, name_or_path: str | Path, replace: bool) -> ChatTemplateChange:
    """The folder rewritten whole with the template (tokenizer files, and the weights, config and generation config
    it needs)."""
    config = _gpt_folder(folder)
    target = OutputFolder(folder, overwrite=True)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    change = apply_chat_template_to_tokenizer(tokenizer, name_or_path, replace)
    grows = len(tokenizer) > int(config.get("vocab_size", 0))
    loaded = AutoModelForCausalLM.from_pretrained(folder) if grows else None
    with target.write() as work:
        shutil.copytree(folder, work, dirs_exist_ok=True, symlinks=True)
        tokenizer.save_pretrained(work)
        if loaded is not None:
            fit_model(loaded, tokenizer, change)
            loaded.save_pretrained(work)
        else:
            generation = (
                GenerationConfig.from_pretrained(folder)
                if (folder / "generation_config.json").is_file()
                else GenerationConfig.from_model_config(AutoConfig.from_pretrained(folder))
            )
            if stop_at_end_of_turn(generation, change):
                generation.save_pretrained(work)
    return change


__all__ = ["fit_model", "set_chat_template", "stop_at_end_of_turn"]
