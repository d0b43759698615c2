"""Errors of `minitf serve` in OpenAI's shape: what the server's routes raise and how it is answered, and the API key
every route requires (both engines' apps install these)."""

from __future__ import annotations

import hmac
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from hf_minitf.serving import API_KEY_VARIABLE


class RequestError(Exception):
    """A request the server cannot answer, as OpenAI reports it: HTTP status, message, offending parameter, code."""

    def __init__(self, status: int, message: str, param: str | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.param, self.code = status, message, param, code


def error_body(message: str, status: int, param: str | None = None, code: str | None = None) -> dict[str, Any]:
    """OpenAI's error object."""
    kind = {401: "authentication_error", 404: "invalid_request_error"}.get(
        status, "invalid_request_error" if status < 500 else "server_error"
    )
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


__all__ = ["RequestError", "error_body", "install_openai_errors", "require_api_key"]
