"""An encoder's retrieval figures on (query, positive) pairs, computed by sentence-transformers'
`InformationRetrievalEvaluator`: every query searches the distinct positives of all pairs (cosine similarity), and
its own positive is the one relevant text. accuracy@1 is how often it comes first, MRR@10 the mean of 1/rank
(0 past rank 10), recall@k how often it is among the first k, NDCG@10 the ranking's discounted gain.

The embeddings come from an `encode` function (texts -> one row each), so a SentenceTransformer folder, its native
export and an ONNX export are measured by the same evaluator.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

ACCURACY_AT = (1,)
RECALL_AT = (1, 5, 10)
MRR_AT = 10
NDCG_AT = 10

Encode = Callable[[list[str]], Any]
"""texts -> their embeddings (a tensor or array, one row per text)."""


def _evaluator(pairs: Sequence[tuple[str, str]], progress: bool, encode: Encode | None):
    """sentence-transformers' evaluator over the pairs; with `encode`, one that embeds with it instead of a
    SentenceTransformer's `encode_query` / `encode_document`."""
    from sentence_transformers.util import cos_sim

    try:  # sentence-transformers 6 moved it (the old path warns); 5.x has only the old one
        from sentence_transformers.sentence_transformer.evaluation import InformationRetrievalEvaluator
    except ImportError:
        from sentence_transformers.evaluation import InformationRetrievalEvaluator  # type: ignore[no-redef]

    corpus_ids: dict[str, str] = {}
    for _, positive in pairs:
        corpus_ids.setdefault(positive, f"d{len(corpus_ids)}")
    queries: dict[str, Any] = {f"q{index}": query for index, (query, _) in enumerate(pairs)}
    relevant = {f"q{index}": {corpus_ids[positive]} for index, (_, positive) in enumerate(pairs)}

    class Evaluator(InformationRetrievalEvaluator):
        def embed_inputs(self, model, sentences, encode_fn_name=None, prompt_name=None, prompt=None, **kwargs):
            if encode is None:
                return super().embed_inputs(model, sentences, encode_fn_name, prompt_name, prompt, **kwargs)
            import torch

            return torch.as_tensor(encode(list(sentences)))

    corpus: dict[str, Any] = {identifier: text for text, identifier in corpus_ids.items()}
    return Evaluator(
        queries,
        corpus,
        relevant,
        accuracy_at_k=list(ACCURACY_AT),
        precision_recall_at_k=list(RECALL_AT),
        mrr_at_k=[MRR_AT],
        ndcg_at_k=[NDCG_AT],
        map_at_k=[100],
        show_progress_bar=progress,
        write_csv=False,
        score_functions={"cosine": cos_sim},
        main_score_function="cosine",
    )


def retrieval_figures(
    pairs: Sequence[tuple[str, str]], model=None, encode: Encode | None = None, progress: bool = False
) -> dict[str, float]:
    """accuracy@1, MRR@10, recall@1/5/10 and NDCG@10 of retrieving each pair's positive for its query, by
    sentence-transformers' `InformationRetrievalEvaluator`, with a SentenceTransformer `model` or an `encode`
    function."""
    if (model is None) == (encode is None):
        raise ValueError("retrieval_figures needs a SentenceTransformer model or an encode function (one of them)")
    if len(pairs) < 2:
        raise ValueError(f"retrieval needs at least 2 pairs (a query must have other texts to rank), got {len(pairs)}")
    evaluator = _evaluator(pairs, progress, encode)
    scores = evaluator.compute_all_metrics(model)["cosine"]
    return {
        **{f"accuracy@{k}": float(scores["accuracy@k"][k]) for k in ACCURACY_AT},
        f"mrr@{MRR_AT}": float(scores["mrr@k"][MRR_AT]),
        **{f"recall@{k}": float(scores["recall@k"][k]) for k in RECALL_AT},
        f"ndcg@{NDCG_AT}": float(scores["ndcg@k"][NDCG_AT]),
    }


__all__ = ["Encode", "retrieval_figures"]
