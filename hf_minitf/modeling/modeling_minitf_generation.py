"""`generate(stop_strings=..., tokenizer=...)` for every tokenizer a MiniTF model is saved with.

transformers' `StopStringCriteria` reads each token's text by decoding it behind the prefix "abcdef" and looking
for that prefix in the result; a vocabulary that cannot spell it (a character vocabulary of other letters, a word
vocabulary) decodes it as unknown tokens and fails with `ValueError: substring not found`. The criterion here
decodes the newest generated tokens of each sequence instead: generation stops at the token that completes a stop
string in the generated text (the stop string is part of the output, as with transformers' criterion), whatever
the vocabulary.
This file is copied beside saved models with the modeling code: it imports only torch and transformers.
"""

from __future__ import annotations

from typing import Any

import torch
from transformers import GenerationMixin, StoppingCriteria, StoppingCriteriaList

REPLACEMENT_CHARACTER = "\ufffd"  # what a token holding part of a character's bytes decodes to on its own


def stop_string_list(stop_strings: str | list[str] | tuple[str, ...]) -> list[str]:
    """The stop strings as a list, refusing what cannot stop anything (an empty string, a non-string)."""
    stops = [stop_strings] if isinstance(stop_strings, str) else list(stop_strings)
    if not stops or not all(isinstance(stop, str) and stop for stop in stops):
        raise ValueError(f"stop_strings must be a non-empty string or a list of them, got {stop_strings!r}.")
    return stops


class DecodedStopStringCriteria(StoppingCriteria):
    """Stop each sequence at the token that completes one of `stop_strings` in its decoded text.

    Every token spells at least one byte, so the longest stop string (in UTF-8 bytes) plus one token covers any
    match that ends in the newest token; only those tokens are decoded at each step. A match lies in the generated
    text (as OpenAI's `stop` does) and ends in the newest token's: a stop string in the prompt stops nothing.
    """

    def __init__(self, stop_strings: str | list[str] | tuple[str, ...], tokenizer: Any) -> None:
        self.stop_strings = stop_string_list(stop_strings)
        self.tokenizer = tokenizer
        self.window = max(len(stop.encode("utf-8")) for stop in self.stop_strings) + 1
        self.prompt_length: int | None = None  # known at the first call, made once the first token is generated

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor, **kwargs) -> torch.BoolTensor:
        length = input_ids.shape[1]
        if self.prompt_length is None:
            self.prompt_length = length - 1
        rows = input_ids[:, max(self.prompt_length, length - self.window) :].tolist()
        options = dict(skip_special_tokens=False, clean_up_tokenization_spaces=False)
        texts = self.tokenizer.batch_decode(rows, **options)
        earlier = self.tokenizer.batch_decode([row[:-1] for row in rows], **options)
        done = [self._ends_in_stop(text, before) for text, before in zip(texts, earlier, strict=True)]
        return torch.tensor(done, dtype=torch.bool, device=input_ids.device)  # type: ignore[return-value]

    def _ends_in_stop(self, text: str, before: str) -> bool:
        """Whether a stop string in `text` ends after `before`, the text without the newest token (whose last
        characters may be incomplete bytes that the newest token completes)."""
        settled = len(before.rstrip(REPLACEMENT_CHARACTER))
        return any(text.find(stop, max(0, settled - len(stop) + 1)) != -1 for stop in self.stop_strings)


class StopStringsGenerationMixin(GenerationMixin):
    """transformers' `GenerationMixin` with `stop_strings` matched by `DecodedStopStringCriteria`."""

    def _get_stopping_criteria(
        self,
        generation_config: Any,
        stopping_criteria: StoppingCriteriaList | None,
        tokenizer: Any = None,
        *args: Any,
        **kwargs: Any,
    ) -> StoppingCriteriaList:
        criteria_of_transformers = super()._get_stopping_criteria  # type: ignore[misc]  # self typed as a protocol
        stop_strings = generation_config.stop_strings
        if stop_strings is None:
            return criteria_of_transformers(generation_config, stopping_criteria, tokenizer, *args, **kwargs)
        if tokenizer is None:
            raise ValueError(
                f"stop_strings={stop_strings!r} needs the model's tokenizer to read the generated text: pass "
                "tokenizer= to generate()."
            )
        criterion = DecodedStopStringCriteria(stop_strings, tokenizer)
        generation_config.stop_strings = None  # transformers' own criterion is the one this replaces
        try:
            criteria = criteria_of_transformers(generation_config, stopping_criteria, tokenizer, *args, **kwargs)
        finally:
            generation_config.stop_strings = stop_strings
        criteria.append(criterion)
        return criteria


__all__ = ["DecodedStopStringCriteria", "StopStringsGenerationMixin", "stop_string_list"]
