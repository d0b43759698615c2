"""The held-out figures of a training run (`minitf train`, the quickstart), computed by the code `minitf eval` uses,
named as the Trainer names its own (`eval_...`): a GPT's perplexity and bits per token over the held-out blocks, an
encoder's retrieval figures over the held-out pairs, a translator's greedy exact match (BLEU and chrF need the
`eval` extra, which training does not: `minitf eval` measures them).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from hf_minitf.evaluation.language_modeling import causal_lm_scorer, perplexity
from hf_minitf.evaluation.retrieval import retrieval_figures
from hf_minitf.evaluation.translation import exact_match, greedy_translations, seq2seq_translate

PREFIX = "eval_"


def _named(figures: dict[str, float]) -> dict[str, float]:
    return {PREFIX + name: value for name, value in figures.items()}


def gpt_held_out(model, blocks: Iterable[dict[str, list[int]]]) -> dict[str, float]:
    """Perplexity and bits per token of a GPT on held-out blocks of ids (each at most the model's context: one
    window, every token after the first scored)."""
    documents = [list(block["input_ids"]) for block in blocks]
    window = max(map(len, documents), default=2)
    result = perplexity(causal_lm_scorer(model.eval()), documents, None, max(window, 2), max(window, 2))
    return _named(result.figures())


def encoder_held_out(embedder, pairs: Sequence[tuple[str, str]]) -> dict[str, float]:
    """Retrieval figures of a SentenceTransformer on held-out (anchor, positive) pairs."""
    return _named(retrieval_figures(pairs, model=embedder)) if len(pairs) >= 2 else {}


def seq2seq_held_out(model, tokenizer, pairs: Sequence[tuple[str, str]]) -> dict[str, float]:
    """Exact match of a translator's greedy translations of held-out (source, target) pairs."""
    if not pairs:
        return {}
    translations = greedy_translations(seq2seq_translate(model.eval(), tokenizer), [source for source, _ in pairs])
    return _named({"exact_match": exact_match(translations, [target for _, target in pairs])})


__all__ = ["encoder_held_out", "gpt_held_out", "seq2seq_held_out"]
