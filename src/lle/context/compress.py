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
import re
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


# --- quoted untrusted text ------------------------------------------------------------------------------
# Hygiene stores tool output that carries instruction-like text as a quoted block (see
# `lle.governance.hygiene.quote_untrusted`). A cut through its closing marker would leave the
# instruction standing in the prompt as if the harness had written it, so every cut here happens
# inside a quote, never through its markers: a block cut short is closed again, a tail that starts
# inside one is opened again with its source. A block too short to cut inside is kept as its markers
# around an ellipsis, which may exceed the limit by their length: the quoting is not negotiable.

QUOTE_OPEN = re.compile(r"<<untrusted source=[^>\n]*>>")
"""The opening marker of a quoted block (its source after `source=`)."""
QUOTE_CLOSE = "<<end>>"
QUOTE_TAIL = "\n" + QUOTE_CLOSE
"""What ends a block: the body's last line, then the closing marker on its own line."""


@dataclass(frozen=True)
class QuoteSpan:
    """One quoted block of a text: `start` (its opening marker) ≤ `body` < `body_end` ≤ `end`; an
    unclosed block (cut by an older version) runs to the end of the text with `closed` False."""

    start: int
    body: int
    body_end: int
    end: int
    closed: bool


def quote_spans(text: str) -> list[QuoteSpan]:
    """The quoted blocks of `text`, in order."""
    spans, pos = [], 0
    while (opened := QUOTE_OPEN.search(text, pos)) is not None:
        close = text.find(QUOTE_CLOSE, opened.end())
        if close < 0:
            spans.append(QuoteSpan(opened.start(), opened.end(), len(text), len(text), False))
            break
        body_end = close - 1 if text[close - 1: close] == "\n" else close
        spans.append(QuoteSpan(opened.start(), opened.end(), body_end, close + len(QUOTE_CLOSE), True))
        pos = close + len(QUOTE_CLOSE)
    return spans


def outside_quotes(text: str) -> str:
    """`text` with every quoted block left out: what speaks with the voice of whoever wrote the text."""
    spans = quote_spans(text)
    cuts = [0, *(i for span in spans for i in (span.start, span.end)), len(text)]
    return "".join(text[cuts[i]:cuts[i + 1]] for i in range(0, len(cuts), 2))


def _closed(text: str) -> str:
    """`text` with an unclosed block (cut by an older version) closed."""
    spans = quote_spans(text)
    return text + QUOTE_TAIL if spans and not spans[-1].closed else text


def _head(text: str, cut: int, spans: list[QuoteSpan], ellipsis: str) -> str:
    """`text[:cut]` + `ellipsis`, cut inside the block that `cut` falls in and closed again."""
    for span in spans:
        if span.start < cut < span.end:
            keep = max(span.body, min(span.body_end, cut - len(ellipsis) - len(QUOTE_TAIL)))
            return text[:keep] + ellipsis + QUOTE_TAIL
    return text[:cut] + ellipsis


def _tail(text: str, start: int, spans: list[QuoteSpan]) -> str:
    """`text[start:]`, opened again with its source when `start` falls inside a block."""
    for span in spans:
        if span.start < start < span.end:
            if start >= span.body_end:  # inside its closing marker: the tail begins after the block
                return text[span.end:]
            return text[span.start:span.body] + "\n" + text[max(start, span.body):]
    return text[start:]


def clip_end(text: str, limit: int) -> str:
    """`text` cut to `limit` characters with an ellipsis (where only the start matters); quoted
    untrusted text is cut inside its quote, and stays quoted."""
    if len(text) <= limit:
        return _closed(text)
    return _closed(_head(text, max(limit - 1, 0), quote_spans(text), "…"))


def shorten_middle(text: str, max_chars: int) -> str:
    """`text` with its middle replaced by a marker when it is longer than `max_chars`.

    The head usually says what the output is and the tail how it ended (errors, totals), so
    both ends are kept; quoted untrusted text on either side stays quoted.
    """
    if len(text) <= max_chars:
        return _closed(text)
    spans = quote_spans(text)
    marker = f" …[{len(text) - max_chars} chars omitted]… "
    keep = max(max_chars - len(marker), 0)
    head = (keep + 1) // 2
    tail = keep - head
    head_text = _head(text, head, spans, "")
    tail_text = _tail(text, len(text) - tail, spans) if tail else ""
    if len(head_text) + len(tail_text) > keep:  # a quote reopened or closed again costs its markers
        tail_text = _tail(text, min(len(text), len(text) - tail + len(head_text) + len(tail_text) - keep), spans)
    omitted = max(len(text) - len(head_text) - len(tail_text), 0)
    return _closed(head_text + f" …[{omitted} chars omitted]… " + tail_text)


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
    """The line with its step label, counted from 1 as the model's other notes count (the budget line, the
    working memory, the stuck note), e.g. `steps 4-8: look {} -> … [same result 5x]`."""
    first, last = line.first + 1, line.last + 1
    label = f"step {first}" if line.count == 1 else f"steps {first}-{last}"
    return f"{label}: {line.text}"
