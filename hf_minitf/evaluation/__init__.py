"""Measuring a model on data, one path for `minitf eval`, `minitf train` and the quickstart: a GPT's perplexity
and bits per token and character (transformers' sliding-window recipe), an encoder's retrieval figures
(sentence-transformers' `InformationRetrievalEvaluator`), a translator's BLEU, chrF (sacrebleu) and exact match.

`data` reads and checks the data, `language_modeling`, `retrieval` and `translation` compute the figures from a
scorer, an encode or a translate function, `runs` evaluates a folder. The figures go into the card through
`hf_minitf.cards.evaluation`. This package sits below the tools (training imports it) and above the model folders;
the engine exports' runners are handed in by `minitf eval`.
"""

from hf_minitf.evaluation.data import EvalData, EvalDataError, load_pairs, load_texts
from hf_minitf.evaluation.language_modeling import LanguageModelingResult, causal_lm_scorer, perplexity
from hf_minitf.evaluation.retrieval import retrieval_figures
from hf_minitf.evaluation.runs import (
    TASK_TYPES,
    Evaluation,
    evaluate_encoder,
    evaluate_folder,
    evaluate_gpt,
    evaluate_translator,
)
from hf_minitf.evaluation.translation import exact_match, translation_figures

__all__ = [
    "TASK_TYPES",
    "EvalData",
    "EvalDataError",
    "Evaluation",
    "LanguageModelingResult",
    "causal_lm_scorer",
    "evaluate_encoder",
    "evaluate_folder",
    "evaluate_gpt",
    "evaluate_translator",
    "exact_match",
    "load_pairs",
    "load_texts",
    "perplexity",
    "retrieval_figures",
    "translation_figures",
]
