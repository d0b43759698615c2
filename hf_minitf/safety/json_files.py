"""The JSON files a folder holds, read with what went wrong named: a file cut off or not UTF-8, or a value of
another kind than the reader needs (`read_json`), in words a message can use (`json_kind`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

# The JSON name of each kind of value json.loads returns.
JSON_KINDS = {dict: "object", list: "array", str: "string", bool: "boolean", int: "number", float: "number"}


def json_kind(value: Any) -> str:
    """What a JSON value is, in a message: `a JSON array`, `null`."""
    return "null" if value is None else f"a JSON {JSON_KINDS.get(type(value), type(value).__name__)}"


def read_json(
    path: Path, expected: type = dict, what: str = "an object", advice: str = "", error: type[Exception] = ValueError
) -> Any:
    """The JSON value of a folder's file `path`, which must be of `expected` type (`what` in the message); an
    `error` naming the file when it is not JSON (cut off, not UTF-8) or holds another kind of value, ending with
    `advice` (what to do)."""
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as problem:
        raise error(f"{path} is not JSON ({problem}); {advice}") from None
    if not isinstance(value, expected) or (isinstance(value, bool) and expected is not bool):
        raise error(f"{path} holds {json_kind(value)}, not {what}; {advice}")
    return value


__all__ = ["JSON_KINDS", "json_kind", "read_json"]
