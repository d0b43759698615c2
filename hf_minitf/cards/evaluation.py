"""Evaluation figures recorded in a folder's card and beside it, where the Hub reads them:

- the card's `model-index` (huggingface_hub's `EvalResult`s, written by `eval_results_to_model_index` through
  `ModelCardData`): one result per metric, naming the data by its name, sha256 (`dataset_revision`) and split, the
  settings in `metric_args`; a new figure replaces the one of the same task, data and metric, the others are kept
  (`merge_eval_results`);
- an "Evaluation" section of the card body listing them (`model_cards/evaluation.md`), a figure's note (how it was
  measured, where that needs saying: BLEU's effective order on short segments) in its row;
- the Hub's `.eval_results/*.yaml` files (https://huggingface.co/docs/hub/eval-results: a list of entries, each
  `dataset: {id, task_id, revision}`, `value`, `date`, `notes`), one file per data set, written with huggingface_hub's
  `EvalResultEntry` / `eval_result_entries_to_yaml`, merged the same way (same dataset id and task id replaced).

Every file is written whole or not at all (beside its target, then renamed over it).
"""

from __future__ import annotations

import datetime
import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from huggingface_hub import EvalResult, ModelCard

from hf_minitf.cards.facts import read_card
from hf_minitf.cards.render import README, assemble_card, card_data, card_template, set_section, table_cell
from hf_minitf.cards.update import save_card
from hf_minitf.catalog.limits import MAX_DATASET_ID_CHARS
from hf_minitf.safety.card_metadata import CardMetadataError, check_card_metadata
from hf_minitf.safety.files import write_files_together

EVAL_RESULTS_FOLDER = ".eval_results"
"""The Hub's folder of evaluation results in a model repo (huggingface_hub's `constants.EVAL_RESULTS_FOLDER`)."""
EVALUATION_TEMPLATE = "evaluation.md"
EVALUATION_SECTION = "evaluation"
SOURCE = "minitf eval"
NOTE = "note"
"""The key of a figure's note (a sentence) among its settings (`metric_args`)."""


def is_eval_results_path(relative: str) -> bool:
    """Whether a folder's path (relative, POSIX) is the Hub's evaluation results folder or one of its YAML files,
    which an upload carries although the folder's name starts with a dot."""
    folder, _, name = relative.partition("/")
    return folder == EVAL_RESULTS_FOLDER and (
        not name or ("/" not in name and name.endswith(".yaml") and name[0] != ".")
    )


def slug(name: str) -> str:
    """A name as an identifier: lower case, runs of other characters as one `-`, no leading dot (a file named after
    it is never hidden), at most MAX_DATASET_ID_CHARS characters."""
    return re.sub(r"[^a-z0-9_.]+", "-", name.lower()).strip("-").lstrip(".")[:MAX_DATASET_ID_CHARS] or "data"


def _key(result: EvalResult) -> tuple:
    """What makes two results the same measurement (their value and the data's revision aside)."""
    return (result.task_type, result.dataset_type, result.dataset_config, result.dataset_split, result.metric_type)


def merge_eval_results(existing: Iterable[EvalResult], new: Iterable[EvalResult]) -> list[EvalResult]:
    """`existing` with each result of `new` in place of the one of the same task, data and metric (appended when
    there is none): what a card's model-index holds after a new evaluation."""
    merged = list(existing)
    for result in new:
        index = next((index for index, old in enumerate(merged) if _key(old) == _key(result)), None)
        if index is None:
            merged.append(result)
        else:
            merged[index] = result
    return merged


def eval_results(
    figures: Mapping[str, float],
    *,
    task_type: str,
    dataset_name: str,
    dataset_revision: str | None = None,
    dataset_split: str | None = None,
    settings: Mapping[str, Any] | None = None,
    figure_notes: Mapping[str, str] | None = None,
) -> list[EvalResult]:
    """One model-index result per figure, naming the data and the `settings` it was measured with, and its note
    from `figure_notes` (by figure name) where it has one."""
    notes = figure_notes or {}
    return [
        EvalResult(
            task_type=task_type,
            dataset_type=slug(dataset_name),
            dataset_name=dataset_name,
            dataset_revision=dataset_revision,
            dataset_split=dataset_split,
            metric_type=name,
            metric_name=name,
            metric_value=float(value),
            metric_args={**(settings or {}), **({NOTE: notes[name]} if name in notes else {})} or None,
        )
        for name, value in figures.items()
    ]


def _evaluation_section(results: list[EvalResult]) -> str:
    import jinja2

    rows = [
        {
            "data": result.dataset_name or result.dataset_type,
            "revision": result.dataset_revision,
            "task": result.task_type,
            "metric": result.metric_name or result.metric_type,
            "value": result.metric_value,
            "measured_by": (result.metric_args or {}).get("measured_by"),
            "details": ", ".join(
                f"{key} {value:,}" if isinstance(value, int) else f"{key} {value}"
                for key, value in (result.metric_args or {}).items()
                if key not in ("measured_by", "source", NOTE)
            )
            + (f". {(result.metric_args or {})[NOTE]}." if NOTE in (result.metric_args or {}) else ""),
        }
        for result in results
        if isinstance(result.metric_value, (int, float))
    ]
    cells = [
        {key: value if key == "value" or value is None else table_cell(value) for key, value in row.items()}
        for row in rows
    ]
    return jinja2.Template(card_template(EVALUATION_TEMPLATE)).render(rows=cells)


def card_with_results(folder: Path, results: list[EvalResult], model_name: str | None = None) -> ModelCard:
    """`folder/README.md` (a new card when there is none) with `results` merged into its model-index and the
    model-index listed in its Evaluation section; nothing is written. A card whose metadata does not parse is a
    CardMetadataError naming it."""
    card = read_card(folder / README) or ModelCard("---\n---\n")
    data = card_data(card)
    data.eval_results = merge_eval_results(data.eval_results or [], results)
    data.model_name = data.model_name or model_name or folder.resolve().name
    return assemble_card(data, set_section(card.text, EVALUATION_SECTION, _evaluation_section(data.eval_results)))


def record_in_card(folder: str | os.PathLike, results: list[EvalResult], model_name: str | None = None) -> ModelCard:
    """`card_with_results` saved whole as `folder/README.md`."""
    updated = card_with_results(Path(folder), results, model_name)
    save_card(updated, Path(folder) / README)
    return updated


def _read_entries(path: Path) -> list:
    """The entries of an `.eval_results` YAML file (none when there is no file); a CardMetadataError naming the
    file when it is not a list of entries."""
    import yaml
    from huggingface_hub import parse_eval_result_entries

    if not path.is_file():
        return []
    text = path.read_text(encoding="utf-8")
    check_card_metadata(f"---\n{text}\n---\n", path)  # the same bounds as a card's YAML
    try:
        data = yaml.safe_load(text)
        entries = parse_eval_result_entries(data or [])
    except (yaml.YAMLError, KeyError, TypeError, AttributeError) as error:
        raise CardMetadataError(
            f"{path} is not a list of evaluation results ({type(error).__name__}: {error}); fix or remove it"
        ) from None
    return entries


def eval_results_file(
    folder: Path,
    figures: Mapping[str, float],
    *,
    dataset_id: str,
    dataset_revision: str | None = None,
    notes: str | None = None,
    date: str | None = None,
    figure_notes: Mapping[str, str] | None = None,
) -> tuple[str, str]:
    """`.eval_results/<dataset>.yaml` of `folder` (its path relative to the folder, and its text) with one entry per
    figure, its `task_id` the metric, its `notes` those given and the figure's own (`figure_notes`), replacing the
    entries of the same dataset id and task id of the file there; nothing is written. A file there that is a link
    is not read (it is replaced when written)."""
    import yaml
    from huggingface_hub import EvalResultEntry, eval_result_entries_to_yaml

    relative = f"{EVAL_RESULTS_FOLDER}/{slug(dataset_id)}.yaml"
    results = folder / EVAL_RESULTS_FOLDER
    path = folder / relative
    date = date or datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0).isoformat()
    new = [
        EvalResultEntry(
            dataset_id=dataset_id,
            task_id=name,
            value=float(value),
            dataset_revision=dataset_revision,
            date=date,
            notes="; ".join(note for note in (notes, (figure_notes or {}).get(name)) if note) or None,
        )
        for name, value in figures.items()
    ]
    replaced = {(entry.dataset_id, entry.task_id) for entry in new}
    linked = results.is_symlink() or path.is_symlink()  # a linked folder or file is replaced, its target never read
    kept = [] if linked else _read_entries(path)
    entries = [entry for entry in kept if (entry.dataset_id, entry.task_id) not in replaced] + new
    return relative, yaml.safe_dump(eval_result_entries_to_yaml(entries), sort_keys=False, allow_unicode=True)


def record_eval_results_file(folder: str | os.PathLike, figures: Mapping[str, float], **entry: Any) -> Path:
    """Write (or merge into) `folder/.eval_results/<dataset>.yaml` (`eval_results_file`). Returns the file."""
    relative, text = eval_results_file(Path(folder), figures, **entry)
    (path,) = write_files_together(folder, {relative: text})
    return path


def record_evaluation(
    folder: str | os.PathLike,
    figures: Mapping[str, float],
    *,
    task_type: str,
    dataset_name: str,
    dataset_revision: str | None = None,
    dataset_split: str | None = None,
    dataset_id: str | None = None,
    settings: Mapping[str, Any] | None = None,
    notes: str | None = None,
    figure_notes: Mapping[str, str] | None = None,
) -> tuple[ModelCard, Path]:
    """Record figures measured on a data set in `folder`: the card's model-index and Evaluation section, and the
    `.eval_results/` file of the data (`dataset_id`: the Hub dataset it is, default `dataset_name`), each figure with
    its note of `figure_notes` (by figure name: a sentence shown beside it) where it has one, as one change
    (`safety.files.write_files_together`): both files are built first, so a card or results file that does not parse
    refuses before anything is written, then put in place together; a failure leaves both as they were."""
    results = eval_results(
        figures,
        task_type=task_type,
        dataset_name=dataset_name,
        dataset_revision=dataset_revision,
        dataset_split=dataset_split,
        settings={"source": SOURCE, **(settings or {})},
        figure_notes=figure_notes,
    )
    folder = Path(folder)
    card = card_with_results(folder, results)  # a card that does not parse is refused before anything is written
    relative, text = eval_results_file(
        folder,
        figures,
        dataset_id=dataset_id or dataset_name,
        dataset_revision=dataset_revision,
        notes=notes,
        figure_notes=figure_notes,
    )
    _, path = write_files_together(folder, {README: str(card), relative: text})
    return card, path


__all__ = [
    "EVAL_RESULTS_FOLDER",
    "eval_results",
    "is_eval_results_path",
    "merge_eval_results",
    "record_eval_results_file",
    "record_evaluation",
    "record_in_card",
    "slug",
]
