"""Content-addressed large texts inside a JSON value.

A string longer than `THRESHOLD` is replaced by `{"$lle_blob": "<sha256>"}` and stored once in the
`blobs` table; reading puts it back. Rows stay small and a text seen in many steps (a file, a long
observation) is stored once.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

THRESHOLD = 4096
BLOB_KEY = "$lle_blob"
ESCAPE_KEY = "$lle_escaped"
"""Wraps a stored dict that happens to look like a reference, so it is never misread as one."""


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def externalize(value: Any, put: Callable[[str, str], None]) -> Any:
    """`value` with every long string replaced by a blob reference; `put(sha, text)` stores it."""
    if isinstance(value, str):
        if len(value) <= THRESHOLD:
            return value
        digest = sha256_text(value)
        put(digest, value)
        return {BLOB_KEY: digest}
    if isinstance(value, dict):
        inner = {k: externalize(v, put) for k, v in value.items()}
        return {ESCAPE_KEY: inner} if len(value) == 1 and next(iter(value)) in (BLOB_KEY, ESCAPE_KEY) else inner
    if isinstance(value, list):
        return [externalize(v, put) for v in value]
    return value


def internalize(value: Any, get: Callable[[str], str]) -> Any:
    """Inverse of `externalize`."""
    if isinstance(value, dict):
        if len(value) == 1 and BLOB_KEY in value:
            return get(value[BLOB_KEY])
        if len(value) == 1 and ESCAPE_KEY in value:
            return {k: internalize(v, get) for k, v in value[ESCAPE_KEY].items()}
        return {k: internalize(v, get) for k, v in value.items()}
    if isinstance(value, list):
        return [internalize(v, get) for v in value]
    return value
