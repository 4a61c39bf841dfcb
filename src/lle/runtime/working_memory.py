"""Working memory: a compact state the runtime keeps per episode, shown before the observation.

A small model loses what it learned three steps ago in a long raw trajectory; a short list of the
actions tried and what each returned (each once, however often it was repeated), the facts a world
can state about itself, and the last error keep it in view for a few dozen tokens. A world may
supply its own summary (`state_summary()`: tables and columns seen, rooms and exits, …); the generic
one works for every world from the recorded steps alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from lle.actions import NO_ACTION
from lle.core import Step
from lle.runtime.stuck import action_key, describe

MAX_ACTIONS = 8
RESULT_CHARS = 90


@runtime_checkable
class StateSummary(Protocol):
    """A world that can summarize what the agent has established so far, in a few lines."""

    def state_summary(self) -> str: ...


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def working_memory(history: Sequence[Step], world: object = None) -> str:
    """The state section for the next step ('' when there is nothing to say)."""
    tried: dict[str, tuple[Step, list[int]]] = {}
    for step in history:
        if step.request.tool == NO_ACTION:
            continue
        key = action_key(step)
        if key in tried:
            tried[key][1].append(step.index + 1)
            tried[key] = (step, tried[key][1])  # the latest result of the same action
        else:
            tried[key] = (step, [step.index + 1])
    lines = []
    for step, at in list(tried.values())[-MAX_ACTIONS:]:
        result = _clip(step.effect.error or step.effect.observation, RESULT_CHARS)
        when = f"step {at[0]}" if len(at) == 1 else f"steps {', '.join(map(str, at))}"
        lines.append(f"- {describe(step, 60)} -> {result} ({when})")
    if isinstance(world, StateSummary):
        facts = world.state_summary().strip()
        if facts:
            lines.append("Facts: " + _clip(facts, 300))
    errors = [s for s in history if s.effect.error]
    if errors and errors[-1] is not history[-1]:  # the latest error is already in the observation
        lines.append(f"Last error (step {errors[-1].index + 1}): {_clip(errors[-1].effect.error or '', RESULT_CHARS)}")
    return "## What you have done so far\n" + "\n".join(lines) if lines else ""
