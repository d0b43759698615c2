"""`POST /v1/embeddings` (OpenAI's embeddings API) for the embedding models `minitf serve` serves.

A request's texts are encoded by the model's `SentenceTransformer.encode` (or an export engine's `encode`), so the
vectors are those of local `encode`; requests that arrive while a batch is being encoded wait and are encoded
together in the next one (`EmbeddingBatcher`).
"""

from __future__ import annotations

import asyncio
import base64
import ctypes
from collections.abc import Callable

import numpy as np
from fastapi import FastAPI
from fastapi.responses import JSONResponse
from starlette.background import BackgroundTask

from hf_minitf.serving.checks import check_field_types, check_text_length, check_unicode
from hf_minitf.serving.errors import RequestError
from hf_minitf.serving.models import ServedModel, ServedModels

# OpenAI's request fields (`user` is accepted and unused, as there).
FIELDS = {"input", "model", "encoding_format", "dimensions", "user"}
# OpenAI's limit on the texts of one request.
MAX_INPUTS = 2048


class EmbeddingBatcher:
    """Encode the texts of concurrent requests in shared batches: one worker takes every request waiting, encodes
    their texts in one `encode` call on a worker thread (at most `max_texts` at once), and hands each request its rows."""

    def __init__(self, encode: Callable[[list[str]], np.ndarray], max_texts: int = 256) -> None:
        self.encode = encode
        self.max_texts = max_texts
        self.batch_sizes: list[int] = []  # requests per encode call, for monitoring and tests
        self._queue: asyncio.Queue | None = None
        self._worker: asyncio.Task | None = None

    async def embed(self, texts: list[str]) -> np.ndarray:
        """The embeddings of `texts`, one row each."""
        loop = asyncio.get_running_loop()
        if self._queue is None:
            self._queue = asyncio.Queue()
            self._worker = loop.create_task(self._run(self._queue))
        future = loop.create_future()
        await self._queue.put((texts, future))
        return await future

    async def _run(self, queue: asyncio.Queue) -> None:
        while True:
            pending = [await queue.get()]
            count = len(pending[0][0])
            while count < self.max_texts and not queue.empty():
                pending.append(queue.get_nowait())
                count += len(pending[-1][0])
            self.batch_sizes.append(len(pending))
            try:
                vectors = await asyncio.to_thread(self.encode, [text for texts, _ in pending for text in texts])
            except Exception as error:  # each waiting request gets the failure; the worker serves the next batch
                for _, future in pending:
                    if not future.done():
                        future.set_exception(error)
                continue
            start = 0
            for texts, future in pending:
                if not future.done():
                    future.set_result(vectors[start : start + len(texts)])
                start += len(texts)


def _texts(body: dict) -> list[str]:
    """The request's `input` as a list of non-empty texts (OpenAI also takes token ids, which need its tokenizer)."""
    value = body.get("input")
    texts = [value] if isinstance(value, str) else value
    if not isinstance(texts, list) or not texts or not all(isinstance(text, str) for text in texts):
        raise RequestError(
            400,
            "input must be a non-empty text or a non-empty list of texts (token ids are not "
            "taken: this server tokenizes with the model's own tokenizer).",
            param="input",
        )
    if len(texts) > MAX_INPUTS:
        raise RequestError(
            400, f"input holds {len(texts)} texts; send at most {MAX_INPUTS} per request.", param="input"
        )
    empty = [index for index, text in enumerate(texts) if not text]
    if empty:
        raise RequestError(400, f"input[{empty[0]}] is empty; every text needs at least one character.", param="input")
    return texts


def _encoding(body: dict, dimension: int) -> str:
    unknown = sorted(set(body) - FIELDS)
    if unknown:
        raise RequestError(400, f"Unknown fields {unknown}; /v1/embeddings takes {sorted(FIELDS)}.", param=unknown[0])
    encoding_format = body.get("encoding_format") or "float"
    if encoding_format not in ("float", "base64"):
        raise RequestError(
            400, f"encoding_format must be 'float' or 'base64', got {encoding_format!r}.", param="encoding_format"
        )
    dimensions = body.get("dimensions")
    if dimensions is not None and dimensions != dimension:
        raise RequestError(
            400,
            f"dimensions={dimensions!r}: this model's embeddings have {dimension} dimensions "
            f"and cannot be shortened; omit dimensions or pass {dimension}.",
            param="dimensions",
        )
    return encoding_format


def _dimension(served: ServedModel) -> int:
    """The embedding size (sentence-transformers 6 renamed the method; 5 has the old name only)."""
    model = served.model
    if served.engine != "transformers":
        return int(model.encode(["a"]).shape[1])
    method = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
    return method()


def _max_length(served: ServedModel) -> int:
    """The most tokens a text may have: the SentenceTransformer's `max_seq_length`, an engine's `max_length`."""
    return served.model.max_seq_length if served.engine == "transformers" else served.model.max_length


def _encoder(served: ServedModel) -> Callable[[list[str]], np.ndarray]:
    model = served.model

    def encode(texts: list[str]) -> np.ndarray:
        if served.engine != "transformers":
            return np.asarray(model.encode(texts), dtype=np.float32)
        if served.runner is not None:  # a verified engine export of the folder: the same vectors, sooner
            return np.asarray(served.runner.encode(texts), dtype=np.float32)
        return model.encode(texts, batch_size=min(len(texts), 64), convert_to_numpy=True).astype(np.float32)

    return encode


# A request of this many texts or more gives its freed memory back to the system once answered.
TRIM_AFTER_TEXTS = 256
# Texts tokenized at once to count their tokens: tokenizers' encodings (offsets included) of a whole request of long
# texts took hundreds of MB.
COUNT_TOKENS_BY = 64


def _token_counts(tokenizer, texts: list[str]) -> list[int]:
    return [
        len(ids)
        for start in range(0, len(texts), COUNT_TOKENS_BY)
        for ids in tokenizer(texts[start : start + COUNT_TOKENS_BY])["input_ids"]
    ]


def release_freed_memory() -> None:
    """Give the memory freed after a large request back to the system (glibc's malloc_trim): glibc keeps the freed
    small blocks of a burst of requests in its arenas, so the server's RSS stayed at its peak. Nothing elsewhere."""
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:  # not glibc (macOS, musl): nothing to trim
        return
    libc.malloc_trim(0)


def add_embeddings_route(app: FastAPI, models: ServedModels) -> None:
    """Add `POST /v1/embeddings`, answering for the encoder models among `models`."""
    encoders = [served for served in models.models.values() if served.family == "encoder"]
    batchers = {served.name: EmbeddingBatcher(_encoder(served)) for served in encoders}
    dimensions = {served.name: _dimension(served) for served in encoders}
    app.state.embedding_batchers = batchers

    @app.post("/v1/embeddings")
    async def embeddings(body: dict) -> JSONResponse:
        check_unicode(body)
        check_field_types(body)
        served = models.find_for(body, ("encoder",), "/v1/embeddings")
        encoding_format = _encoding(body, dimensions[served.name])
        texts = _texts(body)
        limit = _max_length(served)
        for index, text in enumerate(texts):
            check_text_length(len(text), limit, served.chars_per_token, served.name, "input", f"input[{index}]")
        lengths = await asyncio.to_thread(_token_counts, served.tokenizer, texts)
        too_long = [index for index, length in enumerate(lengths) if length > limit]
        if too_long:
            raise RequestError(
                400,
                f"input[{too_long[0]}] is {lengths[too_long[0]]} tokens; {served.name!r} reads at "
                f"most {limit}. Split the text.",
                param="input",
                code="context_length_exceeded",
            )
        vectors = await batchers[served.name].embed(texts)
        encode = (
            (lambda row: base64.b64encode(row.astype("<f4").tobytes()).decode("ascii"))
            if encoding_format == "base64"
            else (lambda row: row.tolist())
        )
        tokens = sum(lengths)
        answer = {
            "object": "list",
            "model": served.name,
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
            "data": [
                {"object": "embedding", "index": index, "embedding": encode(row)} for index, row in enumerate(vectors)
            ],
        }
        # After a large request, once its answer is sent, its freed memory goes back to the system.
        trim = BackgroundTask(release_freed_memory) if len(texts) >= TRIM_AFTER_TEXTS else None
        return JSONResponse(answer, background=trim)


__all__ = ["EmbeddingBatcher", "add_embeddings_route"]
