"""Slots the runtime fills: a skill argument read from the goal or from an earlier observation.

A weak model often cannot copy an argument: SmolLM2-135M copied a two-step goal's expression into
`calculate` correctly 2 times in 12. Where every supporting occurrence of a mined skill shows that a
slot's value was written in the goal (`Calculate 6 + 7.` -> `calculate(expression="6 + 7")`) or in an
observation the macro saw before the call (`6 + 7 = 13` -> `submit(answer="13")`), the slot is *bound*:
the skill tool no longer asks the model for it, and the harness reads it from the same place at run
time. A binding is two anchors around the value (the longest context every occurrence shares, cut
short), found on the first or the last occurrence of the value in the text; it is kept only when it
reads back every supporting value exactly, so a binding is a fact about the evidence, not a guess.

A binding that holds only where its anchors are found (`always=False`: `Calculate 6 + 7.` binds the
expression, `Solve for b: b - 15 = -4` has no such place) is kept when it reads the value in at least
`min_reads` distinct small worlds and never reads a wrong one; the skill then asks the model for the
slot only where the anchors are missing. At run time a slot that can be neither read nor was given
stops the macro with a denied step saying so.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue

ANCHOR_CHARS = 16
"""Longest anchor kept on either side: enough to find the place, short enough to generalize."""
GOAL = "goal"
Occurrence = Literal["first", "last", "word_before"]


class SlotBinding(BaseModel):
    """Where the runtime reads a slot: `goal`, or `observation:N` (0: before the macro's first call, N: after
    its N-th call); the value lies between `left` and `right` (empty: the text's start or end)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    source: str = Field(pattern=r"^(goal|observation:[0-9]{1,2})$")
    left: str = Field(default="", max_length=ANCHOR_CHARS)
    right: str = Field(default="", max_length=ANCHOR_CHARS)
    occurrence: Occurrence = "first"
    """Which occurrence of `left` starts the value (a result is usually the last thing an observation says);
    `word_before`: the one word right before `right` (`Exits: north, east through a locked door` gives the
    door's `east` wherever it stands in the list, where a left anchor `, ` would not)."""
    always: bool = True
    """Read in every supporting occurrence; False: only where the anchors are found (the model gives it elsewhere)."""

    def describe(self) -> str:
        if self.source == GOAL:
            return "the goal"
        n = int(self.source.split(":", 1)[1])
        return "the observation before it" if n == 0 else f"the result of call {n}"


def read(binding: SlotBinding, text: str) -> str | None:
    """The value `binding` points at in `text`, or None when its anchors are not there (or it is empty)."""
    if binding.occurrence == "word_before":
        end = text.find(binding.right) if binding.right else -1
        word = re.search(r"([^\s,;:]+)$", text[:end].rstrip()) if end >= 0 else None
        return word.group(1) if word else None
    if binding.left:
        at = text.find(binding.left) if binding.occurrence == "first" else text.rfind(binding.left)
        if at < 0:
            return None
        start = at + len(binding.left)
    else:
        start = 0
    end = text.find(binding.right, start) if binding.right else len(text)
    if end < 0:
        return None
    value = text[start:end].strip()
    return value or None


def typed(value: str, kind: str | None) -> JsonValue:
    """`value` as the slot's JSON type (a number slot gets a number); None when it is not one."""
    try:
        if kind == "integer":
            return int(value)
        if kind == "number":
            return float(value)
    except ValueError:
        return None
    if kind == "boolean":
        return {"true": True, "false": False}.get(value.lower())
    return value


def _as_text(value: JsonValue) -> str | None:
    if isinstance(value, bool) or value is None or isinstance(value, dict | list):
        return None
    return str(value)


def _common_prefix(texts: Sequence[str]) -> str:
    """Longest start every text shares, character by character (not path components)."""
    first = min(texts, key=len) if texts else ""
    for n, char in enumerate(first):
        if any(t[n] != char for t in texts):
            return first[:n]
    return first


def _common_suffix(texts: Sequence[str]) -> str:
    return _common_prefix([t[::-1] for t in texts])[::-1][-ANCHOR_CHARS:]


def _anchored(source: str, texts: Sequence[str], wanted: Sequence[str], occurrence: Occurrence,
              at: Literal["first", "last"]) -> SlotBinding | None:
    """The anchors every (text, value) pair shares around the value's first or last place (`at`); None if
    one lacks it (or, for `word_before`, when a value is not one word or the right anchor has no word)."""
    places = [t.rfind(w) if at == "last" else t.find(w) for t, w in zip(texts, wanted, strict=True)]
    if not texts or any(p < 0 for p in places):
        return None
    lefts = [t[:p] for t, p in zip(texts, places, strict=True)]
    right = _common_prefix([t[p + len(w):] for t, p, w in zip(texts, places, wanted, strict=True)])[:ANCHOR_CHARS]
    if occurrence == "word_before":
        if not re.search(r"\w", right) or any(not re.fullmatch(r"[^\s,;:]+", w) for w in wanted):
            return None
        return SlotBinding(source=source, right=right, occurrence=occurrence)
    return SlotBinding(source=source, left=_common_suffix(lefts), right=right, occurrence=occurrence)


def find(values: Sequence[JsonValue], sources: Mapping[str, Sequence[str | None]], *,
         worlds: Sequence[str] = (), min_reads: int = 0) -> SlotBinding | None:
    """The first binding (sources in the order given) that reads every one of `values` from its text; else,
    with `min_reads`, one that reads the value in at least that many distinct `worlds` and nothing wrong.

    `sources` maps a source name to one text per occurrence, aligned with `values` (None: not seen)."""
    wanted = [_as_text(v) for v in values]
    if not wanted or any(w is None or not w.strip() for w in wanted):
        return None
    pairs = {source: [(t, w) for t, w in zip(texts, wanted, strict=True)] for source, texts in sources.items()
             if len(texts) == len(wanted)}
    occurrences: tuple[tuple[Occurrence, Literal["first", "last"]], ...] = (
        ("word_before", "first"), ("word_before", "last"), ("first", "first"), ("last", "last"))
    for source, both in pairs.items():
        if all(t is not None for t, _ in both):
            texts, values_ = [t or "" for t, _ in both], [w or "" for _, w in both]
            for occurrence, at in occurrences:
                binding = _anchored(source, texts, values_, occurrence, at)
                if binding is not None and all(read(binding, t) == w for t, w in zip(texts, values_, strict=True)):
                    return binding
    if min_reads <= 0 or len(worlds) != len(wanted):
        return None
    for source, both in pairs.items():
        where = [i for i, (t, w) in enumerate(both) if t is not None and w is not None and w in t]
        if len({worlds[i] for i in where}) < min_reads:
            continue
        for occurrence, at in occurrences:
            binding = _anchored(source, [both[i][0] or "" for i in where], [both[i][1] or "" for i in where],
                                occurrence, at)
            if binding is None or not (binding.left or binding.occurrence == "word_before"):
                # without a left anchor it would read from anywhere
                continue
            binding = binding.model_copy(update={"always": False})
            reads = [(i, read(binding, t)) for i, (t, _) in enumerate(both) if t is not None]
            right = {worlds[i] for i, got in reads if got is not None and got == both[i][1]}
            if len(right) >= min_reads and all(got is None or got == both[i][1] for i, got in reads):
                return binding
    return None


def transplant(value: str, source: str, target: str) -> str | None:
    """What stands in `target` where `value` stands in `source` (the anchors of its one occurrence there),
    or None: a memory's `calculate("6 + 7")` from `Calculate 6 + 7.` reads `2 + 4` in `Calculate 2 + 4.`."""
    at = source.find(value) if value.strip() else -1
    if at < 0:
        return None
    binding = SlotBinding(source=GOAL, left=source[:at][-ANCHOR_CHARS:],
                          right=source[at + len(value):][:ANCHOR_CHARS])
    return read(binding, target) if binding.left or binding.right else None
