"""Revocation by meaning: content normalized before it is hashed, and near copies of revoked content.

`text` folds what a copy can change without changing what it says: NFKC, format characters (category
Cf: zero-width, joiners, BOM, bidi controls) and combining marks dropped, case folded, Cyrillic and
Greek letters that look Latin folded to those letters, whitespace collapsed, trailing "." (and ,;:!)
dropped. `value` does the same to JSON: every string, keys too, and keys whose value is null dropped.

`Meaning` holds revoked content as normalized fields (a step's action asked for, action run,
observation, error; a skill's calls): their sha256 (equal meaning), and their word 5-shingles, each
field shingled on its own. Content repeats a revoked item when it holds at least `THRESHOLD` of that
item's shingles: text added before or after a field (error text, a note) leaves every one of them. The
containment is computed exactly, not estimated (MinHash's error at 128 permutations, ±0.03, is wider
than the gap to the closest distinct trajectories: docs/50-router.md). Nothing here is stored: it is
computed where denial is decided, so changing it needs no migration.
"""

from __future__ import annotations

import hashlib
import unicodedata
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence

from pydantic import JsonValue

from lle.core import Step, canonical_json
from lle.governance.hygiene import tokens

__all__ = ["SHINGLE", "THRESHOLD", "Meaning", "containment", "digest", "macro_fields", "shingles", "step_fields",
           "text", "value"]

THRESHOLD = 0.95
"""Share of a revoked item's shingles at or above which content repeats it."""
SHINGLE = 5
"""Words per shingle (a field with fewer is one shingle)."""

_LOOKALIKE = str.maketrans(  # lower case only: `text` folds case first
    "аеорсхуіјѕԁԛԝвкмнтӏıαβεηικμνορτυχζϲ",
    "aeopcxyijsdqwbkmhtliabehikmnoptyxzc")
_TRIVIA = " .,;:!"


def text(value: str) -> str:
    """`value` as far as its meaning goes (see the module doc); idempotent."""
    folded = unicodedata.normalize("NFKD", unicodedata.normalize("NFKC", value).casefold())
    kept = "".join(c for c in folded if unicodedata.category(c) not in ("Cf", "Mn")).translate(_LOOKALIKE)
    return " ".join(unicodedata.normalize("NFKC", kept).split()).rstrip(_TRIVIA)


def value(data: JsonValue) -> JsonValue:
    """JSON with every string normalized by `text` and null-valued keys dropped (keys sorted on dumping)."""
    if isinstance(data, str):
        return text(data)
    if isinstance(data, list):
        return [value(v) for v in data]
    if isinstance(data, dict):
        return {text(k): value(v) for k, v in sorted(data.items()) if v is not None}
    return data


def step_fields(steps: Sequence[Step]) -> list[str]:
    """Per step, normalized: the action asked for, the action run, what came back, the error."""
    out = []
    for s in steps:
        out += [f"{text(s.request.tool)} {canonical_json(value(s.request.args))}",
                f"{text(s.executed.tool)} {canonical_json(value(s.executed.args))} {s.executed.allowed}",
                text(s.effect.observation), text(s.effect.error or "")]
    return out


def macro_fields(calls: Iterable[Mapping[str, JsonValue]]) -> list[str]:
    """A skill's calls (as JSON), normalized: one field per call."""
    return [canonical_json(value(dict(call))) for call in calls]


def digest(group: str, fields: Sequence[str]) -> str:
    return "sha256:" + hashlib.sha256(canonical_json([text(group), list(fields)]).encode()).hexdigest()


def shingles(fields: Iterable[str]) -> frozenset[str]:
    out: set[str] = set()
    for field in fields:
        words = tokens(field)
        out.update(" ".join(words[i:i + SHINGLE]) for i in range(max(1, len(words) - SHINGLE + 1)) if words)
    return frozenset(out)


def containment(revoked: frozenset[str], other: frozenset[str]) -> float:
    """The share of `revoked`'s shingles that `other` holds."""
    return len(revoked & other) / len(revoked) if revoked else 0.0


class Meaning:
    """Revoked content by meaning, per group (a world, a family): `find` names the revoked item that
    some content repeats after normalization, or nearly (containment >= `threshold`)."""

    def __init__(self, threshold: float = THRESHOLD) -> None:
        self.threshold = threshold
        self._exact: dict[str, str] = {}
        self._near: dict[str, list[tuple[str, frozenset[str]]]] = defaultdict(list)

    def covers(self, group: str) -> bool:
        return text(group) in self._near

    def add(self, key: str, group: str, fields: Sequence[str]) -> None:
        if not fields:
            return  # nothing happened: every empty trajectory would repeat it
        self._exact.setdefault(digest(group, fields), key)
        self._near[text(group)].append((key, shingles(fields)))

    def closest(self, group: str, fields: Sequence[str]) -> tuple[float, str | None]:
        """(containment, revoked key) of the revoked item of `group` that `fields` come closest to."""
        if (key := self._exact.get(digest(group, fields))) is not None:
            return 1.0, key
        mine = shingles(fields)
        return max(((containment(s, mine), k) for k, s in self._near.get(text(group), [])), default=(0.0, None))

    def find(self, group: str, fields: Sequence[str]) -> str | None:
        if not fields or not self.covers(group):
            return None
        score, key = self.closest(group, fields)
        return key if score >= self.threshold else None
