"""Chat templates for GPT tokenizers: a named one (`hf_minitf.catalog.chat_templates`) or a Jinja file, checked
against the vocabulary before it is set.

A template is refused when the vocabulary cannot spell the text it writes around the messages (a character
vocabulary holds only the characters of its training text), or when an assistant turn does not end with one token
(the EOS token or a special token), since generation could then not stop at the end of the answer. The special
tokens a named template needs (ChatML's `<|im_start|>`, `<|im_end|>`) are added as special tokens: one id each,
dropped by `skip_special_tokens`.

`set_chat_template` gives a GPT (a saved folder, or a tokenizer and its model in memory) a template, so that TRL's
SFTTrainer, `apply_chat_template` and `minitf serve`'s /v1/chat/completions can use it (`minitf chat-template`,
`minitf train gpt --chat-template`): tokens the template adds get embedding rows (`resize_token_embeddings`, when
the model has too few) and the token ending an assistant turn joins the generation config's `eos_token_id`, so
generation stops at the end of an answer. A folder is rewritten whole or not at all
(`hf_minitf.safety.output_folders`).
"""

from __future__ import annotations

import shutil
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import cast

import torch
from jinja2.exceptions import TemplateError
from tokenizers import AddedToken
from transformers import (
    AutoConfig,
    AutoModelForCausalLM,
    AutoTokenizer,
    GenerationConfig,
    PreTrainedModel,
    PreTrainedTokenizerBase,
)
from transformers.utils.chat_template_utils import render_jinja_template

from hf_minitf.catalog.chat_templates import CHAT_TEMPLATES, ChatTemplateSpec
from hf_minitf.catalog.families import family_of_config
from hf_minitf.catalog.wording import with_article
from hf_minitf.safety.json_files import read_json
from hf_minitf.safety.locks import folder_lock
from hf_minitf.safety.output_folders import OutputFolder

# Stand-ins for the messages' contents while the template's own text is read: private-use characters, which no
# template writes itself.
_CONTENTS = {"system": "\ue000", "user": "\ue001", "assistant": "\ue002"}


@dataclass(frozen=True)
class ChatTemplateChange:
    """What giving a tokenizer a chat template did: the template's name (or file), the special tokens added to the
    vocabulary, and the token ending an assistant turn, where generation stops."""

    name: str
    added_tokens: tuple[str, ...]
    end_of_turn: str
    end_of_turn_id: int


def chat_template_spec(name_or_path: str | Path | ChatTemplateSpec) -> ChatTemplateSpec:
    """The named template, or the template of a Jinja file; a ValueError saying which names there are otherwise."""
    if isinstance(name_or_path, ChatTemplateSpec):
        return name_or_path
    if str(name_or_path) in CHAT_TEMPLATES:
        return CHAT_TEMPLATES[str(name_or_path)]
    path = Path(name_or_path)
    if not path.is_file():
        raise ValueError(
            f"chat template {str(name_or_path)!r} is neither a template name ({', '.join(CHAT_TEMPLATES)}) nor a "
            "Jinja file; give one of the names or the path of a file"
        )
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        raise ValueError(f"chat template file {path} is not UTF-8 text ({error}); save it as UTF-8") from None
    if not text.strip():
        raise ValueError(f"chat template file {path} is empty; write the Jinja template in it")
    return ChatTemplateSpec(str(path), f"the template of {path}", text)


def _render(spec: ChatTemplateSpec, messages: list[dict[str, str]], generation_prompt: bool, specials: dict) -> str:
    try:
        rendered = render_jinja_template(
            [messages], chat_template=spec.template, add_generation_prompt=generation_prompt, **specials
        )[0]
    except TemplateError as error:
        raise ValueError(f"chat template {spec.name} does not render: {error}") from None
    return rendered[0]


def _conversation(roles: Iterable[str]) -> list[dict[str, str]]:
    return [{"role": role, "content": _CONTENTS[role]} for role in roles]


def template_texts(spec: ChatTemplateSpec, special_tokens: dict[str, str]) -> tuple[str, str]:
    """What the template writes itself around a system, user and assistant message and a generation prompt (a
    template refusing system messages is read without one), and what it writes right after an assistant message.
    `special_tokens` are the tokenizer's (`bos_token`, `eos_token`, ...), which the template may write."""
    try:
        turns = _render(spec, _conversation(("system", "user", "assistant")), False, special_tokens)
    except ValueError:
        turns = _render(spec, _conversation(("user", "assistant")), False, special_tokens)
    prompt = _render(spec, _conversation(("user",)), True, special_tokens)
    if _CONTENTS["assistant"] not in turns or _CONTENTS["user"] not in prompt:
        raise ValueError(
            f"chat template {spec.name} leaves out the messages' content; write each message's "
            "{{ message['content'] }}"
        )
    after_answer = turns.split(_CONTENTS["assistant"], 1)[1]
    own_text = "".join(character for character in turns + prompt if character not in _CONTENTS.values())
    return own_text, after_answer


def template_characters(spec: ChatTemplateSpec, special_tokens: dict[str, str]) -> set[str]:
    """The characters the template writes itself, outside special tokens: what a character vocabulary must hold."""
    text, _ = template_texts(spec, special_tokens)
    for token in sorted({*spec.special_tokens, *special_tokens.values()}, key=len, reverse=True):
        text = text.replace(token, "")
    return set(text)


def _special_tokens(tokenizer: PreTrainedTokenizerBase) -> dict[str, str]:
    return {name: str(token) for name, token in tokenizer.special_tokens_map.items() if isinstance(token, str)}


def _unspellable(tokenizer: PreTrainedTokenizerBase, characters: Iterable[str]) -> list[str]:
    """The characters the tokenizer drops or reads as its unknown token."""
    missing = []
    for character in sorted(characters):
        ids = tokenizer(character, add_special_tokens=False).input_ids
        if not ids or (tokenizer.unk_token_id is not None and tokenizer.unk_token_id in ids):
            missing.append(character)
    return missing


def _end_of_turn(spec: ChatTemplateSpec, tokenizer: PreTrainedTokenizerBase, after_answer: str) -> str:
    """The token that ends an assistant turn: the named template's, else the longest special or added token the
    text after an answer starts with; a ValueError when there is none."""
    if spec.end_of_turn is not None:
        return spec.end_of_turn
    if spec.name in CHAT_TEMPLATES:
        if tokenizer.eos_token is None:
            raise ValueError(
                f"chat template {spec.name} ends an assistant message with the EOS token, and the tokenizer has "
                "none; give a tokenizer with an eos_token or a template ending answers with a special token"
            )
        return str(tokenizer.eos_token)
    added = [str(token) for token in tokenizer.added_tokens_decoder.values()]
    candidates = sorted({*tokenizer.all_special_tokens, *added}, key=len, reverse=True)
    token = next((token for token in candidates if token and after_answer.startswith(token)), None)
    if token is None:
        raise ValueError(
            f"chat template {spec.name} ends an assistant message with {after_answer[:20]!r}, not with one token, "
            "so generation could not stop at the end of an answer; end each assistant message with "
            "{{ eos_token }} (or a special token of the vocabulary)"
        )
    return token


def apply_chat_template_to_tokenizer(
    tokenizer: PreTrainedTokenizerBase, name_or_path: str | Path | ChatTemplateSpec, replace: bool = False
) -> ChatTemplateChange:
    """Give `tokenizer` the chat template `name_or_path` (a name of `CHAT_TEMPLATES` or a Jinja file), adding the
    special tokens it needs. Everything is checked first: on a ValueError the tokenizer is as it was."""
    spec = chat_template_spec(name_or_path)
    if tokenizer.chat_template is not None and not replace:
        raise ValueError(
            f"the tokenizer already has a chat template; pass replace=True (--replace) to replace it with {spec.name}"
        )
    specials = _special_tokens(tokenizer)
    missing = _unspellable(tokenizer, template_characters(spec, specials))
    if missing:
        raise ValueError(
            f"chat template {spec.name} writes the characters {missing}, which the vocabulary cannot spell (a "
            "character vocabulary holds only the characters of its training text); give a template written in "
            "characters it has (a Jinja file), or train the tokenizer on text holding them"
        )
    _, after_answer = template_texts(spec, specials)
    end_of_turn = _end_of_turn(spec, tokenizer, after_answer)
    if not after_answer.startswith(end_of_turn):
        raise ValueError(f"chat template {spec.name} does not end an assistant message with {end_of_turn}")
    vocab = tokenizer.get_vocab()
    added = tuple(token for token in spec.special_tokens if token not in vocab)
    tokenizer.add_tokens([AddedToken(token, special=True, normalized=False) for token in added], special_tokens=True)
    tokenizer.chat_template = spec.template
    return ChatTemplateChange(spec.name, added, end_of_turn, cast(int, tokenizer.convert_tokens_to_ids(end_of_turn)))


def stop_at_end_of_turn(generation_config: GenerationConfig, change: ChatTemplateChange) -> bool:
    """Add the template's end-of-turn id to `generation_config.eos_token_id` (a list then); False if it was there."""
    ids = generation_config.eos_token_id
    ids = [] if ids is None else [ids] if isinstance(ids, int) else list(ids)
    if change.end_of_turn_id in ids:
        return False
    generation_config.eos_token_id = [*ids, change.end_of_turn_id]
    return True


def fit_model(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, change: ChatTemplateChange) -> bool:
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
    folder_or_tokenizer: str | Path | PreTrainedTokenizerBase,
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
    if isinstance(folder_or_tokenizer, PreTrainedTokenizerBase):
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


__all__ = [
    "ChatTemplateChange",
    "apply_chat_template_to_tokenizer",
    "chat_template_spec",
    "fit_model",
    "set_chat_template",
    "stop_at_end_of_turn",
    "template_characters",
    "template_texts",
]
