"""A translator's BLEU and chrF (sacrebleu's corpus scores, its default 13a tokenization and chrF with character
6-grams) and exact match on (source, reference) pairs, from its greedy translations. Where the translations hold
no 4-grams (every segment shorter than 4 tokens), plain BLEU is 0 whatever they are, so BLEU is then sacrebleu's
effective order (the n-gram orders the translations hold), with a note saying so (`bleu_score`).

The translations come from a `translate` function (texts -> translations), so a MiniTF folder and a CTranslate2
export are measured by the same code. sacrebleu is the `eval` extra.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from tqdm.auto import tqdm

Translate = Callable[[list[str]], list[str]]
BATCH = 32


def greedy_translations(translate: Translate, sources: Sequence[str], progress: bool = False) -> list[str]:
    """`translate` over `sources` in batches of BATCH, under a progress bar."""
    translations: list[str] = []
    for start in tqdm(range(0, len(sources), BATCH), desc="translating", disable=not progress, leave=False):
        translations += translate(list(sources[start : start + BATCH]))
    return translations


def exact_match(hypotheses: Sequence[str], references: Sequence[str]) -> float:
    """The fraction of hypotheses equal to their reference, as strings."""
    return sum(hypothesis == reference for hypothesis, reference in zip(hypotheses, references)) / len(references)


def require_sacrebleu() -> None:
    """Import sacrebleu (the `eval` extra), so that its absence is told before a model loads."""
    import sacrebleu  # noqa: F401


def bleu_score(hypotheses: Sequence[str], references: Sequence[str]) -> tuple[float, str | None]:
    """sacrebleu's corpus BLEU of `hypotheses` against `references`, and None; where the hypotheses hold no n-grams
    of its highest order (4: every segment shorter than 4 tokens), which plain BLEU scores 0 even for exact
    matches, BLEU with sacrebleu's effective order (the geometric mean over the orders they hold) and the sentence
    that says so, for the card beside the figure."""
    from sacrebleu.metrics import BLEU

    bleu = BLEU(effective_order=True)
    score = bleu.corpus_score(list(hypotheses), [list(references)])
    orders = sum(total > 0 for total in score.totals)
    if orders == bleu.max_ngram_order:  # the same score as plain BLEU: effective order changes nothing here
        return float(score.score), None
    note = (
        f"BLEU over 1- to {orders}-grams (sacrebleu's effective order): no translation has {bleu.max_ngram_order} "
        f"tokens, and plain BLEU scores 0 without {bleu.max_ngram_order}-grams"
    )
    return float(score.score), note


def translation_figures(
    pairs: Sequence[tuple[str, str]], translate: Translate, progress: bool = False
) -> tuple[dict[str, float], list[str], dict[str, str]]:
    """BLEU, chrF and exact match of `translate`'s translations of the pairs' sources against their references,
    the translations, and a note per figure measured in a way that needs saying (BLEU's effective order on short
    segments: `bleu_score`), by figure name."""
    import sacrebleu

    references = [reference for _, reference in pairs]
    hypotheses = greedy_translations(translate, [source for source, _ in pairs], progress)
    bleu, bleu_note = bleu_score(hypotheses, references)
    figures = {
        "bleu": bleu,
        "chrf": float(sacrebleu.corpus_chrf(hypotheses, [references]).score),
        "exact_match": exact_match(hypotheses, references),
    }
    return figures, hypotheses, {"bleu": bleu_note} if bleu_note else {}


def seq2seq_translate(model, tokenizer, max_new_tokens: int | None = None) -> Translate:
    """Greedy translation with a transformers seq2seq model, as `minitf-translation` decodes: one beam, until [EOS],
    `max_new_tokens`, the generation config's length or, without one, the decoder's `max_position_embeddings`."""
    import torch

    limits: dict[str, int] = {}
    if max_new_tokens is not None:
        limits["max_new_tokens"] = max_new_tokens
    elif model.generation_config.max_length is None and model.generation_config.max_new_tokens is None:
        positions = getattr(model.config, "max_position_embeddings", None)
        limits = {"max_length": positions} if positions else {}

    def translate(texts: list[str]) -> list[str]:
        batch = tokenizer(texts, return_tensors="pt", padding=True).to(model.device)
        with torch.no_grad():
            generated = model.generate(**batch, num_beams=1, do_sample=False, **limits)
        return tokenizer.batch_decode(generated, skip_special_tokens=True)

    return translate


__all__ = [
    "Translate",
    "bleu_score",
    "exact_match",
    "greedy_translations",
    "require_sacrebleu",
    "seq2seq_translate",
    "translation_figures",
]
