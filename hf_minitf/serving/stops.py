"""`stop` as OpenAI's API answers it: the text ends before the first stop string, streamed or not, and
`finish_reason` is "stop".

The generation managers handed to transformers' server run `generate()` with the MiniTF stop criterion
(`modeling_minitf_generation.DecodedStopStringCriteria`, which reads any vocabulary, for every served GPT, native
exports included) instead of transformers' `StopStringCriteria`, so the model stops at the token that completes a
stop string; then they cut the text before it: a stream holds back the last characters that could begin a stop
string until the next ones show they do not. Continuous batching has no stop strings (transformers' paged
generation takes only `max_new_tokens` and `eos_token_id` per request), so a request with `stop` is generated on
its own instead (`GenerationState.use_continuous_batching`), which is exact and frees the batch of its tokens.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from collections import deque
from typing import Any

from transformers import StoppingCriteriaList

from hf_minitf.modeling.modeling_minitf_generation import DecodedStopStringCriteria, stop_string_list
from hf_minitf.serving.api import utils as _utils
from hf_minitf.serving.penalties import REQUEST_LOGITS
from hf_minitf.serving.sampling import REQUEST_SAMPLING, asks_to_sample, request_processors

logger = logging.getLogger(__name__)

# Whether the request being handled (on this task) has `stop` strings; set by the request checks.
REQUEST_HAS_STOP: contextvars.ContextVar[bool] = contextvars.ContextVar("REQUEST_HAS_STOP", default=False)


def stop_list(stop: str | list[str] | None) -> list[str]:
    """A request's `stop` (checked by `serving.checks.check_stop`) as a list; none is an empty one."""
    return [] if stop is None else stop_string_list(stop)


def first_stop(text: str, stops: list[str]) -> int | None:
    """Where the earliest stop string begins in `text`, or None."""
    found = [index for index in (text.find(stop) for stop in stops) if index != -1]
    return min(found) if found else None


def _answered_as_stopped(config: Any) -> None:
    """The handlers answer "length" when the token budget is used up: a stop string completed by the last token
    of the budget still stopped the text. The request's own config is read only for that, after generation."""
    config.max_new_tokens = None


class StopCuttingQueue:
    """The queue of streamed text items, cut before the first stop string.

    transformers' handlers read it with `await get()` and then `get_nowait()` until `asyncio.QueueEmpty`; items are
    text chunks, None at the end, and other objects (errors, tool calls) passed on as they are.
    """

    def __init__(self, queue: asyncio.Queue, stops: list[str], config: Any) -> None:
        self._queue, self._stops, self._config = queue, stops, config
        self._hold = max(map(len, stops)) - 1
        self._pending: deque = deque()
        self._text = ""
        self._stopped = False

    async def get(self) -> Any:
        while not self._pending:
            self._take(await self._queue.get())
        return self._pending.popleft()

    def get_nowait(self) -> Any:
        while not self._pending:
            self._take(self._queue.get_nowait())
        return self._pending.popleft()

    def _take(self, item: Any) -> None:
        if self._stopped:
            if item is None:
                self._pending.append(None)
            return  # the tokens after the stop string, until generation ends
        if type(item) is not str:  # the end, an error or a tool call: the held text goes first
            if self._text:
                self._pending.append(self._text)
                self._text = ""
            self._pending.append(item)
            return
        self._text += item
        index = first_stop(self._text, self._stops)
        if index is not None:
            if index:
                self._pending.append(self._text[:index])
            self._text, self._stopped = "", True
            _answered_as_stopped(self._config)
            return
        ready = len(self._text) - self._hold
        if ready > 0:
            self._pending.append(self._text[:ready])
            self._text = self._text[ready:]


class StopCuttingManager:
    """A generation manager of transformers' server whose generations stop at `stop` and whose texts end
    before it; they also get the request's OpenAI penalties and logit bias (`serving.penalties`)."""

    def __init__(self, manager: Any) -> None:
        self._manager = manager

    def __getattr__(self, name: str) -> Any:
        return getattr(self._manager, name)

    @staticmethod
    def _stopping(processor: Any, inputs: Any, config: Any) -> tuple[Any, list[str]]:
        """The inputs to generate with the stop criterion (in place of the config's stop strings) and the request's
        logits processor, and the stops."""
        processors = request_processors()
        if processors is not None:
            inputs = {**inputs, "logits_processor": processors}
        stops = stop_list(config.stop_strings)
        if not stops:
            return inputs, stops
        config.stop_strings = None
        criterion = DecodedStopStringCriteria(stops, getattr(processor, "tokenizer", processor))
        return {**inputs, "stopping_criteria": StoppingCriteriaList([criterion])}, stops

    def generate_streaming(self, model, processor, inputs, gen_config, *args, **kwargs):
        inputs, stops = self._stopping(processor, inputs, gen_config)
        queue, streamer = self._manager.generate_streaming(model, processor, inputs, gen_config, *args, **kwargs)
        return (StopCuttingQueue(queue, stops, gen_config) if stops else queue), streamer

    async def generate_non_streaming(self, model, processor, inputs, gen_config, *args, **kwargs):
        inputs, stops = self._stopping(processor, inputs, gen_config)
        text, input_length, generated_ids = await self._manager.generate_non_streaming(
            model, processor, inputs, gen_config, *args, **kwargs
        )
        index = first_stop(text, stops)
        if index is not None:
            text = text[:index]
            _answered_as_stopped(gen_config)
        return text, input_length, generated_ids


class GenerationState(_utils.GenerationState):
    """transformers' generation state, handing out managers that cut texts at `stop` and generating requests
    with `stop`, penalties, a logit bias or sampling outside the continuous batch (which has no per-request criteria
    or processors, and samples every request as the first it was started with)."""

    def use_continuous_batching(self, model: Any, modality: Any) -> bool:
        sampled = asks_to_sample(REQUEST_SAMPLING.get(), bool(model.generation_config.do_sample))
        alone = REQUEST_HAS_STOP.get() or REQUEST_LOGITS.get() is not None or sampled
        return not alone and super().use_continuous_batching(model, modality)

    def get_manager(self, model_id: str, use_cb: bool = False) -> Any:
        """The model's manager; a continuous batch whose worker died is replaced by a new one (its requests were
        answered 503; transformers' server answered every later request 503 too, until restarted)."""
        if use_cb and not self.is_cb_alive():
            logger.warning("the continuous batch's worker died; starting a new one for the next requests")
            self.shutdown()
        return StopCuttingManager(super().get_manager(model_id, use_cb=use_cb))


__all__ = ["REQUEST_HAS_STOP", "GenerationState", "StopCuttingManager", "StopCuttingQueue", "first_stop", "stop_list"]
