"""A GPT's perplexity, bits per token and bits per character on a corpus, with the sliding window of transformers'
perplexity guide (https://huggingface.co/docs/transformers/perplexity): windows of the model's context
(`window`) that start every `stride` tokens, each scoring only the tokens the previous windows did not, so every
token after a document's first is predicted once, from up to `window - 1` tokens before it.

The model is a `Scorer`: the log-probability of each token of a window given the ones before it. A transformers
model (a MiniTF folder or its native export) gives one through `causal_lm_scorer`; an engine export gives one
through its runner (the command builds it), so the same windows and the same sums measure every folder.

The perplexity is exp(total negative log-likelihood / scored tokens): each scored token counts once. With
`stride == window` (no overlap) this is the guide's number exactly; with overlap the guide weighs each window's
mean loss by one token fewer than the window scores (`num_valid_tokens - batch_size`, the first window's
unpredicted token), so its figure differs from this one in the last digits.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

MAX_NATS = 700.0
"""Past this mean loss exp() overflows a float: the perplexity is infinite."""

Scorer = Callable[[list[int]], np.ndarray]
"""ids -> the log-probabilities of ids[1:], each given the ids before it (a float array of len(ids) - 1)."""


@dataclass(frozen=True)
class LanguageModelingResult:
    """What `perplexity` measured."""

    perplexity: float
    bits_per_token: float
    bits_per_character: float | None
    """None where the text is not known (ids only)."""
    tokens: int
    """Tokens scored (each document's first token, and each window's first with `stride == window`, are not)."""
    characters: int | None
    """Characters of the documents (None: ids only)."""
    documents: int
    window: int
    stride: int

    def figures(self) -> dict[str, float]:
        """The figures a card records."""
        figures = {"perplexity": self.perplexity, "bits_per_token": self.bits_per_token}
        if self.bits_per_character is not None:
            figures["bits_per_character"] = self.bits_per_character
        return figures

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def windows(length: int, window: int, stride: int) -> Iterator[tuple[int, int, int]]:
    """The guide's windows over `length` tokens: (begin, end, first scored position), every position in
    [1, length) scored by exactly one window."""
    previous_end = 0
    for begin in range(0, length, stride):
        end = min(begin + window, length)
        yield begin, end, max(previous_end, begin + 1)
        previous_end = end
        if end == length:
            break


def window_count(length: int, window: int, stride: int) -> int:
    """How many windows `windows` gives (for a progress bar)."""
    return 0 if length < 2 else 1 + max(0, math.ceil((length - window) / stride))


def check_window(window: int, stride: int | None) -> int:
    """The stride to use (default: half the window, as the guide's 512 of 1024), once 1 <= stride <= window."""
    stride = stride if stride is not None else max(1, window // 2)
    if window < 2:
        raise ValueError(f"the model's context is {window} tokens; perplexity needs at least 2")
    if not 1 <= stride <= window:
        raise ValueError(f"--stride must lie in [1, {window}] (the model's context), got {stride}")
    return stride


def perplexity(
    score: Scorer,
    documents: Sequence[list[int]],
    characters: int | None,
    window: int,
    stride: int | None = None,
    progress: bool = False,
) -> LanguageModelingResult:
    """Perplexity and bits of the `score`d model over `documents` (token ids; windows do not cross documents).
    `characters` is the documents' length: bits per character are bits per token times the documents' tokens per
    character (so they are equal for a character tokenizer); None leaves them out."""
    from tqdm.auto import tqdm

    stride = check_window(window, stride)
    total = sum(window_count(len(ids), window, stride) for ids in documents)
    negative_log_likelihood, tokens = 0.0, 0
    with tqdm(total=total, desc="perplexity", unit="window", disable=not progress, leave=False) as bar:
        for ids in documents:
            for begin, end, first in windows(len(ids), window, stride):
                log_probs = np.asarray(score(ids[begin:end]), dtype=np.float64)
                scored = log_probs[first - begin - 1 :]
                if not np.isfinite(scored).all():
                    raise ValueError(
                        f"the model gives a non-finite log-probability in the window of tokens {begin}-{end}; "
                        "its weights or the export are broken"
                    )
                negative_log_likelihood -= float(scored.sum())
                tokens += len(scored)
                bar.update()
    if not tokens:
        raise ValueError("the data holds no document of 2 tokens or more, so no token can be predicted; give more text")
    nats_per_token = negative_log_likelihood / tokens
    return LanguageModelingResult(
        perplexity=math.exp(nats_per_token) if nats_per_token < MAX_NATS else math.inf,
        bits_per_token=nats_per_token / math.log(2),
        bits_per_character=None
        if characters is None
        else nats_per_token / math.log(2) * sum(map(len, documents)) / max(characters, 1),
        tokens=tokens,
        characters=characters,
        documents=len(documents),
        window=window,
        stride=stride,
    )


def tokenize_documents(tokenizer, texts: Sequence[str]) -> tuple[list[list[int]], int]:
    """Each text's ids (no special tokens added, as the guide tokenizes) and their characters, for the texts of 2
    tokens or more (a single token has nothing before it to be predicted from)."""
    documents, characters = [], 0
    for text in texts:
        ids = tokenizer(text, add_special_tokens=False, verbose=False).input_ids
        if len(ids) >= 2:
            documents.append(ids)
            characters += len(text)
    return documents, characters


def unknown_tokens(tokenizer, documents: Sequence[list[int]]) -> tuple[int, int]:
    """(how many of the documents' tokens are the tokenizer's unknown token, how many tokens they hold): text the
    vocabulary does not cover, which the figures then measure as `<unk>` (0 unknown for a tokenizer without one)."""
    unknown_id = getattr(tokenizer, "unk_token_id", None)
    total = sum(map(len, documents))
    if unknown_id is None:
        return 0, total
    return sum(ids.count(unknown_id) for ids in documents), total


def causal_lm_scorer(model) -> Scorer:
    """The `Scorer` of a transformers causal LM (a MiniTF GPT or its native export), in float64 log-softmax."""
    import torch

    def score(ids: list[int]) -> np.ndarray:
        input_ids = torch.tensor([ids], device=model.device)
        with torch.no_grad():
            logits = model(input_ids).logits[0, :-1].double()
        return torch.log_softmax(logits, dim=-1).gather(1, input_ids[0, 1:, None])[:, 0].cpu().numpy()

    return score


def model_context(config) -> int:
    """The tokens a GPT config's model reads at once (its position table, or the length rotary ones were trained
    on): MiniTF's `max_position_embeddings`, GPT-2's `n_positions`, GPT-NeoX's `max_position_embeddings`."""
    for name in ("max_position_embeddings", "n_positions"):
        value = getattr(config, name, None)
        if isinstance(value, int) and value > 0:
            return value
    raise ValueError(f"the model's config ({type(config).__name__}) names no context length (max_position_embeddings)")


__all__ = [
    "LanguageModelingResult",
    "Scorer",
    "causal_lm_scorer",
    "check_window",
    "model_context",
    "perplexity",
    "tokenize_documents",
    "unknown_tokens",
    "window_count",
    "windows",
]
