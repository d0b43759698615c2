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

from collections.abc import Callable
from typing import Any, cast

import torch
from transformers import GenerationMixin, LogitsProcessor, LogitsProcessorList, StoppingCriteria, StoppingCriteriaList

REPLACEMENT_CHARACTER = "\ufffd"  # what a token holding part of a character's bytes decodes to on its own


def stop_string_list(stop_strings: str | list[str] | tuple[str, ...]) -> list[str]:
    """The stop strings as a list, refusing what cannot stop anything (an empty string, a non-string)."""
    stops = [stop_strings] if isinstance(stop_strings, str) else list(stop_strings)
    if not stops or not all(isinstance(stop, str) and stop for stop in stops):
        raise ValueError(f"stop_strings must be a non-empty string or a list of them, got {stop_strings!r}.")
    return stops


class DecodedStopStringCriteria(StoppingCriteria):
    """Stop each sequence at the token that completes one of `stop_strings` in its decoded text.

    Each call reads the newest token of each row, behind enough earlier tokens to hold the longest stop string (every
    token spells at least one byte). A match lies in the generated text (as OpenAI's `stop` does) and ends in that
    token: a stop string in the prompt stops nothing. The criterion keeps no state between calls but the prompt's
    length, so a call on drafted tokens (transformers 5.17 asks the criteria about a prompt-lookup step's drafts before
    checking them) changes nothing. Decoding paths that add several tokens a step (prompt lookup, assisted) have their
    drafts cut before the token that would complete a stop (`cut_drafts`), so each step's last token is the only one
    that can complete a stop, and generation ends at that token, as it does token by token.
    """

    def __init__(self, stop_strings: str | list[str] | tuple[str, ...], tokenizer: Any) -> None:
        self.stop_strings = stop_string_list(stop_strings)
        self.tokenizer = tokenizer
        self.window = max(len(stop.encode("utf-8")) for stop in self.stop_strings)
        self.prompt_length: int | None = None  # given by the decoding path, else known at the first call

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor, **kwargs) -> torch.BoolTensor:
        length = input_ids.shape[1]
        if self.prompt_length is None:  # one token generated since the prompt
            self.prompt_length = length - 1
        done = self.stop_ends_in(input_ids, length - 1) if length > self.prompt_length else [False] * len(input_ids)
        return torch.tensor(done, dtype=torch.bool, device=input_ids.device)  # type: ignore[return-value]

    def stop_ends_in(self, input_ids: torch.Tensor, first: int) -> list[bool]:
        """Whether, in each row, a stop string of the generated text ends in the tokens from position `first` on."""
        start = max(cast(int, self.prompt_length), first - self.window)
        rows = input_ids[:, start:].tolist()
        options = dict(skip_special_tokens=False, clean_up_tokenization_spaces=False)
        texts = self.tokenizer.batch_decode(rows, **options)
        earlier = self.tokenizer.batch_decode([row[: first - start] for row in rows], **options)
        return [self._ends_after(text, before) for text, before in zip(texts, earlier, strict=True)]

    def _ends_after(self, text: str, before: str) -> bool:
        """Whether a stop string in `text` ends after `before`, the text of the tokens read already (whose last
        characters may be incomplete bytes that the new tokens complete)."""
        settled = len(before.rstrip(REPLACEMENT_CHARACTER))
        return any(text.find(stop, max(0, settled - len(stop) + 1)) != -1 for stop in self.stop_strings)

    def cut_drafts(self, get_candidates: Callable[..., tuple[torch.Tensor, Any]]) -> Callable[..., tuple[Any, Any]]:
        """A candidate generator's `get_candidates` whose drafts end before a token that would complete a stop
        string: the model then checks the drafts up to there and its own next token is the one the criterion reads."""

        def get_candidates_up_to_a_stop(input_ids: torch.Tensor, **kwargs: Any) -> tuple[Any, Any]:
            candidates, logits = get_candidates(input_ids, **kwargs)
            length = input_ids.shape[1]
            for end in range(length + 1, candidates.shape[1] + 1):
                if any(self.stop_ends_in(candidates[:, :end], end - 1)):
                    kept = end - 1 - length
                    return candidates[:, : end - 1], None if logits is None else logits[:, :kept]
            return candidates, logits

        return get_candidates_up_to_a_stop


class DraftsEndBeforeStops(LogitsProcessor):
    """Carries a `DecodedStopStringCriteria` from assisted decoding to the candidate generator it builds, in the
    logits processors transformers hands it; changes no scores."""

    def __init__(self, stop: DecodedStopStringCriteria) -> None:
        self.stop = stop

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        return scores


class StopStringsGenerationMixin(GenerationMixin):
    """transformers' `GenerationMixin` with `stop_strings` matched by `DecodedStopStringCriteria` on every decoding
    path (an assistant model drafting for this one needs none: its drafts are cut where a stop would complete).

    Three private hooks of `GenerationMixin`, because no public argument does this: `_get_stopping_criteria` puts the
    criterion in place of transformers' (which fails on vocabularies that cannot spell its probe), and
    `_assisted_decoding` and `_get_candidate_generator` hand it to the candidate generator, whose drafts no public
    argument reaches.
    """

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
        drafting = getattr(generation_config, "is_assistant", False)
        if tokenizer is None and not drafting:
            raise ValueError(
                f"stop_strings={stop_strings!r} needs the model's tokenizer to read the generated text: pass "
                "tokenizer= to generate()."
            )
        generation_config.stop_strings = None  # transformers' own criterion is the one this replaces
        try:
            criteria = criteria_of_transformers(generation_config, stopping_criteria, tokenizer, *args, **kwargs)
        finally:
            generation_config.stop_strings = stop_strings
        if not drafting:
            criteria.append(DecodedStopStringCriteria(stop_strings, tokenizer))
        return criteria

    def _assisted_decoding(
        self,
        input_ids: torch.LongTensor,
        logits_processor: LogitsProcessorList,
        stopping_criteria: StoppingCriteriaList,
        *args: Any,
        **kwargs: Any,
    ) -> Any:
        """transformers' assisted decoding (prompt lookup, an assistant model), told the prompt's length and given
        the stop criterion for its candidate generator."""
        stop = next((item for item in stopping_criteria if isinstance(item, DecodedStopStringCriteria)), None)
        if stop is not None:
            stop.prompt_length = input_ids.shape[1]
            logits_processor = LogitsProcessorList([*logits_processor, DraftsEndBeforeStops(stop)])
        return super()._assisted_decoding(input_ids, logits_processor, stopping_criteria, *args, **kwargs)  # type: ignore[misc]  # self typed as a protocol

    def _get_candidate_generator(self, *args: Any, **kwargs: Any) -> Any:
        generator = super()._get_candidate_generator(*args, **kwargs)  # type: ignore[misc]  # self typed as a protocol
        processors = kwargs.get("logits_processor") or []
        carrier = next((item for item in processors if isinstance(item, DraftsEndBeforeStops)), None)
        if carrier is not None:
            # this generator's own method, wrapped: its class and state stay what transformers checks and updates
            generator.get_candidates = carrier.stop.cut_drafts(generator.get_candidates)  # type: ignore[method-assign]
        return generator


__all__ = ["DecodedStopStringCriteria", "StopStringsGenerationMixin", "stop_string_list"]
