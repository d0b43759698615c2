"""Where `minitf serve` generates: one worker thread per served model runs its requests, in transformers'
`generate()` with a streamer (a MiniTF or native folder) or in the engine of an export folder, and hands each
request its new token ids as they come (`Generation.tokens()`). A MiniTF folder served with a verified engine export
beside it (`ServedModel.runner`, `serving.engine_cache`) has its greedy requests with nothing of their own run
there, one at a time, with `generate()`'s tokens; the others in `generate()`.

By default the worker runs one request at a time. With `max_batch` > 1 (`--continuous-batching`), greedy requests
that ask for nothing of their own (no stop strings, penalties, logit bias or sampling: `GenerationRequest.shareable`)
and wait together are generated in one left-padded batch, each row stopping at its own budget or end token, which
gives each the tokens it gets alone; the others run alone. A request whose client went away is cancelled: its row
stops at the next step.
"""

from __future__ import annotations

import asyncio
import collections
import threading
from collections.abc import AsyncIterator, Sequence
from typing import Any

import numpy as np
from transformers import StoppingCriteria, StoppingCriteriaList
from transformers.generation import BaseStreamer

from hf_minitf.serving.requests import GenerationRequest


class Generation:
    """One request's generation, as the event loop sees it: the new token ids as they come, then the end (or the
    error that ended it); `cancel()` stops it at the next step."""

    def __init__(self, request: GenerationRequest, loop: asyncio.AbstractEventLoop) -> None:
        self.request, self._loop = request, loop
        self._queue: asyncio.Queue = asyncio.Queue()
        self.cancelled = threading.Event()

    def push(self, item: list[int] | BaseException | None) -> None:
        """From the worker thread: new ids, an error, or None at the end. Where the event loop that asked has closed,
        nobody waits for them: the generation is cancelled (its row stops at the next step) and the worker goes on."""
        try:
            self._loop.call_soon_threadsafe(self._queue.put_nowait, item)
        except RuntimeError:  # "Event loop is closed"
            self.cancelled.set()

    def cancel(self) -> None:
        self.cancelled.set()

    async def tokens(self) -> AsyncIterator[list[int]]:
        while True:
            item = await self._queue.get()
            if item is None:
                return
            if isinstance(item, BaseException):
                raise item
            yield item


def _end_ids(model: Any) -> set[int]:
    end = model.generation_config.eos_token_id
    return set() if end is None else {end} if isinstance(end, int) else set(end)


class _Rows(BaseStreamer, StoppingCriteria):
    """The streamer and stopping criterion of one `generate()` call: each step's token of a row goes to its
    generation until the row ends (its end token, its budget, or its client gone)."""

    def __init__(self, generations: Sequence[Generation], end_ids: set[int]) -> None:
        self.generations, self.end_ids = generations, end_ids
        self.counts = [0] * len(generations)
        self.done = [False] * len(generations)
        self.prompt_seen = False

    # the streamer
    def put(self, value: Any) -> None:
        if not self.prompt_seen:  # generate() first streams the prompt (a decoder's start token)
            self.prompt_seen = True
            return
        for row, token in enumerate(value.reshape(len(self.generations)).tolist()):
            if self.done[row]:
                continue
            generation = self.generations[row]
            generation.push([token])
            self.counts[row] += 1
            if token in self.end_ids or self.counts[row] >= generation.request.max_new_tokens:
                self.done[row] = True

    def end(self) -> None:
        pass

    # the stopping criterion
    def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
        import torch

        finished = [
            done or generation.cancelled.is_set() for done, generation in zip(self.done, self.generations, strict=True)
        ]
        return torch.tensor(finished, dtype=torch.bool, device=input_ids.device)


class ModelWorker:
    """The thread that generates for one served model, taking requests in order (and batching the shareable ones,
    up to `max_batch`)."""

    def __init__(self, served: Any, max_batch: int = 1) -> None:
        self.served, self.max_batch = served, max_batch
        self.batch_sizes: list[int] = []  # requests per generate() call, for monitoring and tests
        self._waiting: collections.deque[Generation] = collections.deque()
        self._ready = threading.Condition()
        self._closed = False
        self._thread = threading.Thread(target=self._work, name=f"minitf-generate {served.name}", daemon=True)
        self._thread.start()

    def submit(self, request: GenerationRequest) -> Generation:
        """Queue `request`; its `Generation` yields the new ids."""
        generation = Generation(request, asyncio.get_running_loop())
        with self._ready:
            if self._closed:
                raise RuntimeError("the server is shutting down")
            self._waiting.append(generation)
            self._ready.notify()
        return generation

    def close(self) -> None:
        """Stop taking requests; the worker ends after the one it runs."""
        with self._ready:
            self._closed = True
            self._ready.notify()

    def _next_batch(self) -> list[Generation] | None:
        with self._ready:
            while not self._waiting and not self._closed:
                self._ready.wait()
            if not self._waiting:
                return None
            first = self._waiting.popleft()
            batch = [first]
            if first.request.shareable and self.max_batch > 1 and self.served.family == "gpt":
                for other in list(self._waiting):
                    if len(batch) == self.max_batch:
                        break
                    if other.request.shareable:
                        self._waiting.remove(other)
                        batch.append(other)
            return batch

    def _work(self) -> None:
        while (batch := self._next_batch()) is not None:
            batch = [generation for generation in batch if not generation.cancelled.is_set()]
            if not batch:
                continue
            self.batch_sizes.append(len(batch))
            try:
                if self.served.engine != "transformers":  # an export folder
                    self._run_engine(batch[0], self.served.model)
                elif self.served.runner is not None and len(batch) == 1 and batch[0].request.shareable:
                    beams = self.served.model.generation_config.num_beams or 1
                    self._run_engine(batch[0], self.served.runner, beams)
                else:
                    self._generate(batch)
            except Exception as error:  # each request of the batch gets the failure; the worker goes on
                for generation in batch:
                    generation.push(error)
            for generation in batch:
                generation.push(None)

    def _generate(self, batch: list[Generation]) -> None:
        """transformers' `generate()` for the batch: one request with its own arguments, or shareable ones greedily
        from a left-padded batch."""
        import torch

        model, tokenizer = self.served.model, self.served.tokenizer
        rows = _Rows(batch, _end_ids(model))
        if len(batch) == 1:
            arguments = batch[0].request.generation_arguments()
        else:
            arguments = {"generation_config": batch[0].request.generation_arguments()["generation_config"]}
            arguments["generation_config"].max_new_tokens = max(item.request.max_new_tokens for item in batch)
        arguments["stopping_criteria"] = StoppingCriteriaList([*arguments.get("stopping_criteria", []), rows])
        pad = tokenizer.pad_token_id
        if pad is None:
            pad = next(iter(rows.end_ids), 0)
        longest = max(len(item.request.prompt_ids) for item in batch)
        ids = torch.tensor(
            [[pad] * (longest - len(item.request.prompt_ids)) + item.request.prompt_ids for item in batch]
        )
        mask = torch.tensor(
            [[0] * (longest - len(item.request.prompt_ids)) + [1] * len(item.request.prompt_ids) for item in batch]
        )
        streams = arguments["generation_config"].num_beams in (None, 1)
        with torch.inference_mode():
            output = model.generate(
                input_ids=ids.to(model.device),
                attention_mask=mask.to(model.device),
                pad_token_id=pad,
                streamer=rows if streams else None,
                **arguments,
            )
        if not streams:  # beam search streams nothing: the best beam's ids at the end
            rows.prompt_seen = True
            for step in output[0, 1 if model.config.is_encoder_decoder else longest :].tolist():
                rows.put(torch.tensor([step]))

    def _run_engine(self, generation: Generation, runner: Any, beams: int = 1) -> None:
        """An engine runner (an export folder's, or the verified export beside a model: `ServedModel.runner`) for one
        request: a GPT's tokens handed over as each is decoded where the runner decodes one at a time (ONNX
        Runtime), else its whole generation at once; a translator's with `beams` beams."""
        request = generation.request
        if self.served.family == "seq2seq":
            ids = runner.new_ids(request.prompt_ids, request.max_new_tokens, num_beams=beams)
        elif hasattr(runner, "tokens"):
            options = request.engine_arguments()
            options["generator"] = np.random.default_rng(options.pop("seed", 0))
            # a stream gets each token as it comes; an answer given whole gets them at once (waking the event loop
            # for each token cost a lone request more than the engine's decoding)
            held: list[int] = []
            for token in runner.tokens(request.prompt_ids, request.max_new_tokens, **options):
                if generation.cancelled.is_set():
                    return
                held.append(token)
                if request.stream or not request.shareable:
                    generation.push(held)
                    held = []
            if held:
                generation.push(held)
            return
        else:
            ids = runner.generate([request.prompt_ids], request.max_new_tokens, **request.engine_arguments())[0]
        if ids:
            generation.push(list(ids))


__all__ = ["Generation", "ModelWorker"]
