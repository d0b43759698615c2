"""Errors of `minitf serve` in OpenAI's shape: what the server's routes raise and how it is answered."""

from __future__ import annotations

from typing import Any


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


__all__ = ["RequestError", "error_body"]
