"""`minitf eval DIR --data FILE`: measure a model folder on your data and record the figures in its card.

A GPT's perplexity and bits per token and character (transformers' sliding-window recipe), an encoder's retrieval
figures (sentence-transformers' InformationRetrievalEvaluator), a translator's BLEU, chrF and exact match
(sacrebleu), through `hf_minitf.evaluation`; for a MiniTF folder, a native export and the engine exports. The engine
runners are handed to the evaluation here, above both: a CTranslate2 generator scores windows with
`Generator.score_batch`, an ONNX generator gives the logits of its graph, an ONNX embedder its embeddings, a
CTranslate2 translator its greedy translations.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from hf_minitf.catalog.limits import MAX_EVAL_DATA_BYTES, MAX_UNKNOWN_TOKEN_SHARE, dataset_id_problem
from hf_minitf.commands.common import add_model_folder, count, model_folder, quiet_transformers, reports_errors, say

HELP = "measure a model folder on your data (perplexity, retrieval, BLEU/chrF) and record it in its card"
DESCRIPTION = f"""\
Measure DIR (a MiniTF folder, its native export, or a CTranslate2 / ONNX export) on --data and record the figures
in DIR's model card (its model-index and an Evaluation section) and in DIR/.eval_results/, the Hub's evaluation
results files, replacing earlier figures of the same task, data and metric and keeping the others.

- gpt: perplexity, bits per token, bits per character; windows of the model's context every --stride tokens, as
  transformers' perplexity guide computes them (each token scored once). --data: a .txt file (one text) or
  .jsonl/.json rows with a text column (each row a document).
- encoder: accuracy@1, MRR@10, recall@1/5/10, NDCG@10 of finding each query's positive among all positives, by
  sentence-transformers' InformationRetrievalEvaluator. --data: (query, positive) pairs.
- seq2seq: BLEU and chrF (sacrebleu, the eval extra) and exact match of the greedy translations. --data:
  (source, reference) pairs.

Pairs: a .tsv file (two tab-separated columns) or .jsonl/.json rows (--columns). A folder saved by datasets'
save_to_disk is read too (--split). The data is named on the card by its file name and sha256. Files over
{MAX_EVAL_DATA_BYTES // 2**20} MiB are refused: give a sample. A GPT's data whose tokens are more than
{MAX_UNKNOWN_TOKEN_SHARE:.0%} the tokenizer's unknown token is measured but not recorded (--force records it); any
unknown tokens are counted on stderr and on the card. The card and the results file are written as one change (a
card whose YAML does not parse is refused before the model runs)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_model_folder(parser, "a model folder, its native export or an engine export")
    parser.add_argument("--data", required=True, type=Path, metavar="FILE", help="the data to measure on (see above)")
    parser.add_argument("--split", default=None, help="the split of a datasets folder (save_to_disk) to read")
    parser.add_argument(
        "--columns",
        default=None,
        help="in .jsonl/.json rows: the text column (gpt) or the two columns of a pair, comma-separated "
        "(default: text; anchor,positive; source,target)",
    )
    parser.add_argument("--stride", type=count, help="gpt: tokens between windows (default: half the model's context)")
    parser.add_argument(
        "--dataset-id",
        default=None,
        type=_dataset_id,
        metavar="ID",
        help="the Hub dataset the data is (named in .eval_results/; default: the file name)",
    )
    parser.add_argument("--no-card", action="store_true", help="print the figures only; leave DIR as it is")
    parser.add_argument(
        "--force",
        action="store_true",
        help=f"record the figures although more than {MAX_UNKNOWN_TOKEN_SHARE:.0%}% of the data's tokens are the "
        "unknown token (they then measure <unk>, not the text)",
    )
    parser.add_argument("--json", action="store_true", help="print the evaluation as one JSON object")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")


def _dataset_id(value: str) -> str:
    problem = dataset_id_problem(value)
    if problem is not None:
        raise argparse.ArgumentTypeError(problem)
    return value


ENGINE_NAMES = {"onnxruntime": "ONNX Runtime", "ctranslate2": "CTranslate2"}
"""How the card names the runtime of an engine export (minitf_export.json's `engine`)."""


def _onnx_scorer(engine):
    """The log-probabilities of a window from an ONNX generator's graph: its logits at every position, from an
    empty cache."""
    import numpy as np

    def score(ids: list[int]):
        feeds = {
            "input_ids": np.array([ids], dtype=np.int64),
            "attention_mask": np.ones((1, len(ids)), dtype=np.int64),
            "position_ids": np.arange(len(ids), dtype=np.int64)[None],
            **engine.empty_cache(),
        }
        (logits,) = engine.session.run(["logits"], feeds)
        logits = logits[0, :-1].astype(np.float64)
        shifted = logits - logits.max(axis=-1, keepdims=True)
        log_probs = shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
        return log_probs[np.arange(len(ids) - 1), ids[1:]]

    return score


def _ctranslate2_scorer(engine):
    """The log-probabilities of a window from `ctranslate2.Generator.score_batch`, which scores each token after
    the first given the ones before it."""
    import numpy as np

    def score(ids: list[int]):
        (result,) = engine.generator.score_batch([[engine.vocabulary[index] for index in ids]], max_input_length=0)
        return np.asarray(result.log_probs, dtype=np.float64)

    return score


def _evaluate_export(folder: Path, info: dict, args: argparse.Namespace, columns, progress: bool):
    """An engine export's evaluation: its runner handed to the family's evaluation."""
    from hf_minitf.catalog.families import family_of_model_type
    from hf_minitf.engines import CTranslate2Generator, load_engine
    from hf_minitf.evaluation.runs import evaluate_encoder, evaluate_gpt, evaluate_translator, load_data

    family = family_of_model_type(info.get("family"))
    if family is None:
        raise ValueError(f"{folder}: its export metadata names no MiniTF family; export the model again")
    data = load_data(family.name, args.data, columns, args.split)
    engine = load_engine(folder, info["kind"])
    if info["kind"] == "generator":
        if isinstance(engine, CTranslate2Generator):
            scorer, measured_by = _ctranslate2_scorer(engine), "CTranslate2 Generator.score_batch"
        else:
            scorer, measured_by = _onnx_scorer(engine), f"ONNX Runtime logits ({info.get('default_file', 'onnx')})"
        return evaluate_gpt(scorer, engine.tokenizer, data, engine.max_positions, args.stride, progress, measured_by)
    runtime = ENGINE_NAMES.get(info["engine"], info["engine"])
    if info["kind"] == "embedder":
        return evaluate_encoder(data, encode=engine.encode, progress=progress, measured_by=f"{runtime} embeddings")
    return evaluate_translator(
        data,
        lambda texts: engine.translate(texts, num_beams=1),
        progress,
        measured_by=f"{runtime} translations (greedy)",
    )


def _summary(evaluation) -> str:
    """The printed report: what was measured, then one figure a line."""
    details = ", ".join(f"{key} {value:,}" for key, value in evaluation.details.items() if isinstance(value, int))
    lines = [
        f"{evaluation.task_type} on {evaluation.data.name} (sha256 {evaluation.data.sha256[:12]}), measured by "
        f"{evaluation.measured_by}" + (f"; {details}" if details else ""),
        *(
            f"  {name}: {value:.6g}" + (f" ({evaluation.notes[name]})" if name in evaluation.notes else "")
            for name, value in evaluation.figures.items()
        ),
    ]
    return "\n".join(lines)


@reports_errors("eval")
def run(args: argparse.Namespace) -> int:
    from hf_minitf.engines import export_info
    from hf_minitf.evaluation.runs import evaluate_folder

    quiet_transformers()
    folder = model_folder(args.model)
    columns = [column.strip() for column in args.columns.split(",")] if args.columns else None
    progress = not args.no_progress
    if not args.no_card:  # a card the figures cannot be recorded in is refused before the model runs
        from hf_minitf.cards import read_card

        read_card(folder / "README.md")
    info = export_info(folder)
    if info is None:
        evaluation = evaluate_folder(
            folder, args.data, columns=columns, split=args.split, stride=args.stride, progress=progress
        )
    else:
        evaluation = _evaluate_export(folder, info, args, columns, progress)
    unknown, total = evaluation.unknown
    if unknown:
        line = (
            f"{unknown:,} of the data's {total:,} tokens ({evaluation.unknown_share:.1%}) are the tokenizer's "
            "unknown token: the figures measure how the model predicts it there, not that text"
        )
        if evaluation.unknown_share > MAX_UNKNOWN_TOKEN_SHARE and not args.no_card and not args.force:
            raise ValueError(
                f"{line}; more than {MAX_UNKNOWN_TOKEN_SHARE:.0%}, so nothing is recorded: give data in the "
                "model's vocabulary, or pass --force to record them anyway (--no-card to print them only)"
            )
        say("eval", "note", line)
    recorded = None
    if not args.no_card:
        from hf_minitf.cards import record_evaluation

        settings = {"measured_by": evaluation.measured_by, **evaluation.details}
        _, recorded = record_evaluation(
            folder,
            evaluation.figures,
            task_type=evaluation.task_type,
            dataset_name=evaluation.data.name,
            dataset_revision=evaluation.data.sha256,
            dataset_split=evaluation.data.split,
            dataset_id=args.dataset_id,
            settings=settings,
            notes=f"minitf eval, measured by {evaluation.measured_by}",
            figure_notes=evaluation.notes,
        )
    if args.json:
        print(json.dumps({**evaluation.as_dict(), "recorded": str(recorded) if recorded else None}))
    else:
        print(_summary(evaluation))
        if recorded is not None:
            print(f"Recorded in {folder / 'README.md'} and {recorded}")
    return 0
