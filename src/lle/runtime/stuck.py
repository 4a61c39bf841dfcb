"""Stuck detection: is the agent going round in circles? Compared by content, never by id.

Four patterns, checked on the committed steps after each step (newest last):

- `repeat` — the same action (tool and arguments) with the same observation as the step before;
- `repeat_error` — the same action failing with the same error again;
- `ping_pong` — A, B, A, B: two actions alternating with the same observations each time;
- `no_new_info` — the last `window` steps returned nothing the episode had not already seen.

Small models fall into these loops all the time (a 0.5B model recomputed one expression seven times
without submitting); the founding essay's remedy is to change the observation, then the grounding:
the first detection puts a plain note in the next observation, a second one masks the repeated
action out of the next decode (`lle.runtime.levers`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from lle.actions import NO_ACTION
from lle.core import ActionStatus, Step, canonical_json


class StuckKind(StrEnum):
    repeat = "repeat"
    repeat_error = "repeat_error"
    ping_pong = "ping_pong"
    no_new_info = "no_new_info"


@dataclass(frozen=True)
class StuckSignal:
    """One detection: what pattern, on which steps, which actions to avoid, and the note for the model."""

    kind: StuckKind
    steps: tuple[int, ...]
    tools: tuple[str, ...]
    """The tools of the repeated actions (what a mask removes from the next decode)."""
    note: str


def action_key(step: Step) -> str:
    """The action as content: tool and arguments in canonical JSON."""
    return canonical_json({"tool": step.request.tool, "args": step.request.args})


def describe(step: Step, limit: int = 80) -> str:
    args = ", ".join(f"{k}={canonical_json(v)}" for k, v in step.request.args.items())
    call = f"{step.request.tool}({args})"
    return call if len(call) <= limit else call[: limit - 1] + "…"


def _result(step: Step, limit: int = 100) -> str:
    text = " ".join((step.effect.error or step.effect.observation).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _failed(step: Step) -> bool:
    return step.executed.status is ActionStatus.error or step.effect.error is not None


def detect(history: Sequence[Step], *, window: int = 4) -> StuckSignal | None:
    """The first pattern that the latest steps show, or None. Steps are 0-indexed; notes count from 1."""
    steps = [s for s in history if s.request.tool != NO_ACTION]
    if len(steps) < 2:
        return None
    last, before = steps[-1], steps[-2]
    if action_key(last) == action_key(before):
        first = before
        for earlier in reversed(steps[:-2]):  # the start of the run of identical actions
            if action_key(earlier) != action_key(last):
                break
            first = earlier
        if _failed(last) and _failed(before) and last.effect.error == before.effect.error:
            return StuckSignal(StuckKind.repeat_error, (first.index, last.index), (last.request.tool,),
                               f"you ran {describe(last)} at step {first.index + 1} and again now, and it failed "
                               f"the same way: {_result(last)}. Try something different.")
        if last.effect.observation == before.effect.observation:
            return StuckSignal(StuckKind.repeat, (first.index, last.index), (last.request.tool,),
                               f"you already ran {describe(last)} at step {first.index + 1} and got: {_result(last)}. "
                               "Running it again gives the same; use that result.")
    if len(steps) >= 4:
        a1, b1, a2, b2 = steps[-4:]
        if (action_key(a1) == action_key(a2) and action_key(b1) == action_key(b2) and action_key(a1) != action_key(b1)
                and a1.effect.observation == a2.effect.observation
                and b1.effect.observation == b2.effect.observation):
            return StuckSignal(StuckKind.ping_pong, (a1.index, b2.index), (a1.request.tool, b1.request.tool),
                               f"you are alternating between {describe(a1)} and {describe(b1)} since step "
                               f"{a1.index + 1}, with the same results each time. Do something else.")
    if len(steps) > window:
        seen = {s.effect.observation for s in steps[:-window]}
        recent = steps[-window:]
        if all(s.effect.observation in seen for s in recent):
            return StuckSignal(StuckKind.no_new_info, tuple(s.index for s in recent),
                               tuple(dict.fromkeys(s.request.tool for s in recent)),
                               f"the last {window} steps showed nothing new. Use what you have learned so far.")
    return None
