"""The text of a generation as OpenAI's API answers it: decoded as the tokens come, and ending before the first
`stop` string, streamed or not, with `finish_reason` "stop".

Generation itself stops at the token that completes a stop string (`DecodedStopStringCriteria`, which reads any
vocabulary, in the request's stopping criteria); `TextAssembler` then cuts the text before it. While streaming, it
holds back the last characters that could begin a stop string, and the end of a character whose bytes are split
across tokens, until the next tokens settle them.
"""

from __future__ import annotations

from typing import Any

from hf_minitf.modeling.layers import stop_string_list

REPLACEMENT_CHARACTER = "\ufffd"  # what the bytes of a character cut between tokens decode to


def stop_list(stop: str | list[str] | None) -> list[str]:
    """A request's `stop` (checked by `serving.checks.check_stop`) as a list; none is an empty one."""
    return [] if stop is None else stop_string_list(stop)


def first_stop(text: str, stops: list[str]) -> int | None:
    """Where the earliest stop string begins in `text`, or None."""
    found = [index for index in (text.find(stop) for stop in stops) if index != -1]
    return min(found) if found else None


class TextAssembler:
    """The text of the tokens a generation yields, given out as it settles (`add`, then `finish`), cut before the
    first stop string; `tokens` counts the generated tokens, `stopped` says whether a stop string ended it."""

    def __init__(self, tokenizer: Any, stops: list[str]) -> None:
        self.tokenizer, self.stops = tokenizer, stops
        self.hold = max(map(len, stops), default=1) - 1
        self.ids: list[int] = []
        self.sent = 0  # characters given out
        self.stopped = False

    @property
    def tokens(self) -> int:
        return len(self.ids)

    def _text(self) -> str:
        return self.tokenizer.decode(self.ids, skip_special_tokens=True)

    def add(self, ids: list[int]) -> str:
        """The text that `ids`, the next generated tokens, settle (empty after a stop)."""
        if self.stopped:
            return ""
        self.ids.extend(ids)
        text = self._text()
        cut = first_stop(text, self.stops)
        if cut is not None:
            self.stopped = True
            return self._give(text[:cut])
        settled = len(text.rstrip(REPLACEMENT_CHARACTER)) - self.hold
        return self._give(text[:settled])

    def finish(self) -> str:
        """The rest of the text, once generation has ended."""
        if self.stopped:
            return ""
        text = self._text()
        cut = first_stop(text, self.stops)
        self.stopped = cut is not None
        return self._give(text if cut is None else text[:cut])

    def _give(self, text: str) -> str:
        if len(text) <= self.sent:
            return ""
        new, self.sent = text[self.sent :], len(text)
        return new


__all__ = ["TextAssembler", "first_stop", "stop_list"]
