"""Trajectory compression: keep the decision points, collapse the repeats.

The model sees a short account of what happened so far. The full steps stay in the store (every
line names the step indices it stands for), so compression only chooses what the model reads now;
it never loses data.

A step is a *decision point* when something happened that the next action should depend on: the
world changed, a tool failed or was denied or rewritten, or it is the latest step. Consecutive
steps that repeat the same action with the same observation (and are not decision points) collapse
into one line with a count, because the model gains nothing from reading the same thing twice —
but it does need to know that it has been looping.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from lle.core import ActionStatus, Step

DEFAULT_DECISION_CHARS = 400
"""Observation characters kept for a decision point."""
DEFAULT_ROUTINE_CHARS = 120
"""Observation characters kept for a routine step (nothing changed, no error)."""


@dataclass(frozen=True)
class TrajectoryLine:
    """One line of the compressed trajectory, standing for steps `first..last` (inclusive)."""

    first: int
    last: int
    text: str
    decision: bool

    @property
    def count(self) -> int:
        return self.last - self.first + 1


def is_decision_point(step: Step, *, last: bool = False) -> bool:
    """Whether `step` changed the world, failed, was denied or normalized, or is the latest."""
    return (
        last
        or bool(step.effect.changes)
        or step.effect.error is not None
        or not step.executed.allowed
        or step.executed.status != ActionStatus.ok
    )


def clip_end(text: str, limit: int) -> str:
    """`text` cut to `limit` characters with an ellipsis (where only the start matters)."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def shorten_middle(text: str, max_chars: int) -> str:
    """`text` with its middle replaced by a marker when it is longer than `max_chars`.

    The head usually says what the output is and the tail how it ended (errors, totals), so
    both ends are kept.
    """
    if len(text) <= max_chars:
        return text
    marker = f" …[{len(text) - max_chars} chars omitted]… "
    keep = max(max_chars - len(marker), 0)
    head = (keep + 1) // 2
    tail = keep - head
    return text[:head] + marker + (text[len(text) - tail:] if tail else "")


def _action_key(step: Step) -> str:
    return json.dumps([step.request.tool, step.request.args, step.effect.observation, step.effect.error],
                      sort_keys=True, ensure_ascii=False)


def render_step(step: Step, *, max_chars: int) -> str:
    """One step as the model reads it: what it asked, what ran, what came back."""
    args = json.dumps(step.request.args, sort_keys=True, ensure_ascii=False)
    parts = [f"{step.request.tool} {args}"]
    if not step.executed.allowed:
        parts.append(f"DENIED: {step.executed.denied_reason or 'not allowed'}")
    elif step.executed.status == ActionStatus.normalized:
        ran = json.dumps(step.executed.args, sort_keys=True, ensure_ascii=False)
        parts.append(f"ran as {step.executed.tool} {ran}")
    if step.effect.error:
        parts.append(f"ERROR: {shorten_middle(step.effect.error, max_chars)}")
    if step.effect.observation:
        parts.append(f"-> {shorten_middle(step.effect.observation, max_chars)}")
    if step.effect.changes:
        targets = ", ".join(sorted({c.target for c in step.effect.changes}))
        parts.append(f"(changed: {shorten_middle(targets, max_chars)})")
    return " ".join(parts)


def compress_trajectory(
    steps: list[Step],
    *,
    decision_chars: int = DEFAULT_DECISION_CHARS,
    routine_chars: int = DEFAULT_ROUTINE_CHARS,
) -> list[TrajectoryLine]:
    """The trajectory as lines: decision points in full (up to `decision_chars`), routine steps
    shortened to `routine_chars`, runs of identical routine steps collapsed into one line."""
    lines: list[TrajectoryLine] = []
    run_key: str | None = None
    for pos, step in enumerate(steps):
        decision = is_decision_point(step, last=pos == len(steps) - 1)
        key = None if decision else _action_key(step)
        if key is not None and key == run_key and lines and not lines[-1].decision:
            prev = lines[-1]
            text = render_step(step, max_chars=routine_chars)
            lines[-1] = TrajectoryLine(prev.first, step.index, f"{text} [same result {prev.count + 1}x]", False)
            continue
        text = render_step(step, max_chars=decision_chars if decision else routine_chars)
        lines.append(TrajectoryLine(step.index, step.index, text, decision))
        run_key = key
    return lines


def format_line(line: TrajectoryLine) -> str:
    """The line with its step label, e.g. `step 3-7: look {} -> … [same result 5x]`."""
    label = f"step {line.first}" if line.count == 1 else f"steps {line.first}-{line.last}"
    return f"{label}: {line.text}"
