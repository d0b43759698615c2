"""Errors of `minitf serve` in OpenAI's shape: what the server's routes raise and how it is answered, the API key
every route requires, and the limit on a request body's size (both engines' apps install these)."""

from __future__ import annotations

import asyncio
import hmac
import time
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from hf_minitf.serving import API_KEY_VARIABLE

# How much of a body past the limit is read and dropped before the 413, so that a client which sends its whole body
# before reading the answer (urllib, requests, curl without `Expect`) gets the 413 rather than a connection reset
# (closing a socket with unread bytes resets it, and the reset discards the answer the client had not read yet).
# Past either bound the server answers and closes at once, as nginx's lingering close gives up.
DISCARD_BYTES = 256 * 2**20
DISCARD_SECONDS = 10.0


class RequestError(Exception):
    """A request the server cannot answer, as OpenAI reports it: HTTP status, message, offending parameter, code."""

    def __init__(self, status: int, message: str, param: str | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.param, self.code = status, message, param, code


def error_body(message: str, status: int, param: str | None = None, code: str | None = None) -> dict[str, Any]:
    """OpenAI's error object. The message is made valid UTF-8 (a lone surrogate a request sent, quoted back in it,
    would fail the JSON answer)."""
    kind = {401: "authentication_error", 404: "invalid_request_error"}.get(
        status, "invalid_request_error" if status < 500 else "server_error"
    )
    message = message.encode("utf-8", "backslashreplace").decode("utf-8")
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


def install_openai_errors(app: FastAPI) -> None:
    """Answer every error in OpenAI's shape: ours, transformers' HTTPExceptions (`{"detail": ...}` there), a body
    that is not a JSON object (FastAPI's 422 list of validation errors), and unexpected failures (500)."""

    @app.exception_handler(RequestError)
    async def request_error(_request: Request, error: RequestError) -> JSONResponse:
        return JSONResponse(error_body(error.message, error.status, error.param, error.code), status_code=error.status)

    @app.exception_handler(HTTPException)
    async def http_error(_request: Request, error: HTTPException) -> JSONResponse:
        return JSONResponse(
            error_body(str(error.detail), error.status_code),
            status_code=error.status_code,
            headers=getattr(error, "headers", None),
        )

    @app.exception_handler(RequestValidationError)
    async def invalid_body(_request: Request, error: RequestValidationError) -> JSONResponse:
        kinds = {problem.get("type") for problem in error.errors()}
        message = (
            "The request body is not valid JSON; send a JSON object (Content-Type: application/json)."
            if "json_invalid" in kinds
            else "The request body must be a JSON object of the request's fields."
        )
        return JSONResponse(error_body(message, 400, code="invalid_json"), status_code=400)

    @app.exception_handler(Exception)
    async def server_error(_request: Request, error: Exception) -> JSONResponse:
        return JSONResponse(error_body(f"{type(error).__name__}: {error}", 500), status_code=500)


def require_api_key(app: FastAPI, api_key: str) -> None:
    """Every route answers 401 unless the request carries `Authorization: Bearer <api_key>`."""
    api_key = api_key.strip()
    if not api_key:
        raise ValueError("The API key is empty: give a key, or none to serve without one.")
    expected = api_key.encode()

    @app.middleware("http")
    async def check_api_key(request: Request, call_next):
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(token.strip().encode(), expected):
            message = (
                "Missing or incorrect API key: send the header `Authorization: Bearer <key>` with the key "
                "given to minitf serve (--api-key or " + API_KEY_VARIABLE + ")."
            )
            return JSONResponse(
                error_body(message, 401, code="invalid_api_key"),
                status_code=401,
                headers={"WWW-Authenticate": "Bearer"},
            )
        return await call_next(request)


def limit_request_bytes(app: FastAPI, limit: int) -> None:
    """Answer 413 in OpenAI's shape to a request whose body passes `limit` bytes, without parsing it: where its
    Content-Length says so, else as soon as the chunks read so far pass it (a chunked body has no length). The
    rest of the body is read and dropped first (within DISCARD_BYTES and DISCARD_SECONDS) so that the answer
    reaches the client. Added last, the check wraps the other middleware (the API key's included)."""
    app.add_middleware(_BodyLimit, limit=limit)


class _RequestTooLarge(Exception):
    """Raised into the app by `_BodyLimit` when a chunked body passes the limit: the app stops reading it."""


class _BodyLimit:
    """The ASGI middleware of `limit_request_bytes`. FastAPI's own `max_body_size` answers a plain-text 413 over
    any response the app writes, so the server's errors could not have OpenAI's shape."""

    def __init__(self, app, limit: int) -> None:
        self.app, self.limit = app, limit

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = dict(scope["headers"])
        length = headers.get(b"content-length", b"0")
        if not length.isdigit():
            message = "The Content-Length header is not a number of bytes."
            return await self._answer(scope, receive, send, 400, message, "invalid_content_length")
        if int(length) > self.limit:
            # A client waiting for `100 Continue` has sent nothing: it gets the answer without sending its body.
            waiting = headers.get(b"expect", b"").lower() == b"100-continue"
            read = not waiting and int(length) <= DISCARD_BYTES and await _discard(receive, 0, True)
            return await self._answer(scope, receive, send, 413, self._message(int(length)), read=read)
        received, more, too_large = 0, True, False

        async def counted_receive():
            nonlocal received, more, too_large
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                more = message.get("more_body", False)
                if received > self.limit:
                    too_large = True
                    raise _RequestTooLarge
            return message

        async def send_unless_too_large(message) -> None:
            if not too_large:  # the app's answer to the unread body (FastAPI: 400) gives way to the 413
                await send(message)

        try:
            await self.app(scope, counted_receive, send_unless_too_large)
        except Exception:
            if not too_large:
                raise
        if too_large:
            read = not more or await _discard(receive, received, more)
            await self._answer(scope, receive, send, 413, self._message(None), read=read)

    def _message(self, size: int | None) -> str:
        sent = f"is {size:,} bytes, more than" if size is not None else "(sent in chunks) passes"
        return (
            f"The request body {sent} the {self.limit:,} bytes this server reads (minitf serve --max-request-bytes). "
            "Send fewer or shorter texts per request."
        )

    @staticmethod
    async def _answer(
        scope, receive, send, status: int, message: str, code: str = "request_too_large", read: bool = False
    ) -> None:
        """Answer; the connection closes after it unless the whole body was `read` (a client may then reuse it)."""
        headers = {} if read else {"Connection": "close"}
        response = JSONResponse(error_body(message, status, code=code), status_code=status, headers=headers)
        await response(scope, receive, send)


async def _discard(receive, received: int, more: bool) -> bool:
    """Read and drop the rest of a request body, within DISCARD_BYTES in all and DISCARD_SECONDS; whether it was
    read to its end (the client then reads the answer on a connection with nothing left unread)."""
    deadline = time.monotonic() + DISCARD_SECONDS
    while more:
        left = deadline - time.monotonic()
        if left <= 0 or received > DISCARD_BYTES:
            return False
        try:
            message = await asyncio.wait_for(receive(), left)
        except asyncio.TimeoutError:
            return False
        if message["type"] != "http.request":  # the client went away
            return False
        received += len(message.get("body", b""))
        more = message.get("more_body", False)
    return True


__all__ = [
    "DISCARD_BYTES",
    "DISCARD_SECONDS",
    "RequestError",
    "error_body",
    "install_openai_errors",
    "limit_request_bytes",
    "require_api_key",
]
