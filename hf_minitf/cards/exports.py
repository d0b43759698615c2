"""The cards of exports (native, GGUF, Ollama, CTranslate2, ONNX, web): what each carries over from the card of the
MiniTF folder it was made from, how it names that model, and the card rendered from the export's template of
`model_cards/`.

An export's card names its source by the Hub repo it is published as (`base_model` and a link in the text), or as
"a MiniTF model" where it has none: never by the path the user gave (`lic_gpt`, a temporary folder), which names
nothing where the card is read. The only local path an export records is its `minitf verify` record
(`minitf_source` and `minitf_export.json`'s `source`), which `update.drop_local_source` takes out before an upload."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from huggingface_hub import ModelCard, ModelCardData

from hf_minitf.cards.facts import MINITF_TAG, read_card
from hf_minitf.cards.render import README, card_data, card_template, inline_text
from hf_minitf.catalog.publishing import DEFAULT_LICENSE, check_license, license_fields

EXPORT_TAG = "minitf-export"
HUB_URL = "https://huggingface.co"


def export_card_data(
    source_folder: str | os.PathLike,
    license: str | None = None,
    *,
    figures: bool = True,
    model_name: str | None = None,
) -> dict[str, Any]:
    """What the card of an export carries over from the card of the MiniTF folder it was made from, as
    `ModelCardData` keyword arguments: the license (`license` when given, else the source card's, else
    `DEFAULT_LICENSE`) and, with `figures` (an export that computes the source's function: not a quantized file),
    the source's held-out figures (`eval_results`, when its card has them) in a model-index named `model_name` (the
    export's name; default: the source's, which may be the name of a local folder). A source card whose metadata
    does not parse is a CardMetadataError."""
    card = read_card(Path(source_folder) / README)
    data = card_data(card) if card is not None else ModelCardData()
    chosen = check_license(license) if license else data.license or DEFAULT_LICENSE
    fields = license_fields(chosen, getattr(data, "license_name", None))
    carried: dict[str, Any] = {key: value for key, value in fields.items() if value is not None}
    if figures and data.eval_results:
        carried |= {"model_name": model_name or data.model_name, "eval_results": data.eval_results}
    return carried


def source_words(family: str | None, source_repo: str | None, source_revision: str | None = None) -> str:
    """How an export's card names the MiniTF model it was made from (Markdown): the Hub repo it is published as,
    linked, else "a MiniTF FAMILY model"."""
    model = f"MiniTF {family} model" if family else "MiniTF model"
    if source_repo is None:
        return f"a {model}"
    at = f", revision `{inline_text(source_revision)}`" if source_revision else ""
    return f"the {model} published as [{source_repo}]({HUB_URL}/{source_repo}){at}"


def source_naming(
    family: str, repo_id: str | None, revision: str | None, published_as: str | None = None
) -> dict[str, Any]:
    """`export_card`'s `family`, `source_repo` and `source_revision` for a source of `family` read from the Hub repo
    `repo_id` at `revision` (None: a local folder): the repo it is published as (`published_as`, which publishing
    knows), else its own."""
    if published_as is not None and published_as != repo_id:
        return {"family": family, "source_repo": published_as, "source_revision": None}
    return {"family": family, "source_repo": repo_id, "source_revision": revision if repo_id else None}


def shell_word(text: str) -> str:
    """`text` as one word of a shell command: in double quotes where nothing in it is special there, else quoted
    by `shlex.quote`."""
    import shlex

    return f'"{text}"' if not set(text) & set('"$`\\!') else shlex.quote(text)


def export_card(
    template_file: str,
    /,
    *,
    library_name: str,
    tags: Sequence[str],
    carried: dict[str, Any],
    family: str | None = None,
    source_repo: str | None = None,
    source_revision: str | None = None,
    pipeline_tag: str | None = None,
    **variables: Any,
) -> ModelCard:
    """The card of an export: metadata (`library_name`, `pipeline_tag`, the MiniTF export tags then `tags`, what
    `carried` brings: `export_card_data`'s fields, and `base_model`: `source_repo`, the Hub repo id the source is
    published as, or none) and the body rendered from `model_cards/<template_file>` with `variables`, `source` (the
    source named by `source_words`), `source_repo` and, with `examples` (`render.model_examples`), `examples_shell`
    (`shell_word` of each)."""
    data = ModelCardData(
        library_name=library_name,
        pipeline_tag=pipeline_tag,
        tags=[MINITF_TAG, EXPORT_TAG, *tags],
        base_model=source_repo,
        **carried,
    )
    titles = {name: inline_text(variables[name]) for name in ("title", "model_title") if name in variables}
    # the example texts as shell words, for the card's commands
    shell: dict[str, Any] = (
        {"examples_shell": [shell_word(text) for text in variables["examples"]]} if "examples" in variables else {}
    )
    return ModelCard.from_template(
        data,
        template_str=card_template(template_file),
        source=source_words(family, source_repo, source_revision),
        source_repo=source_repo,
        **(variables | titles | shell),
    )
