"""Credit per step: which steps made the outcome.

Two sources, added: the episode's outcome propagated back with a discount (the last steps of a
success share its credit), and step-level evidence — the step after which failing checks pass
gets the rise in progress, denied or erroring steps are penalised, hard failures at a step count
against it. Across several rollouts of one small world, steps taken from the same observation
are compared with each other (GiGPO's anchor states) to give a step-level advantage.
"""

from __future__ import annotations

import hashlib
import re
from collections import defaultdict
from collections.abc import Mapping, Sequence

from pydantic import JsonValue

from lle.core import Evidence, Experience, Outcome, Step, Strength, canonical_json
from lle.errors import InvalidInputError

GAMMA = 0.9
OUTCOME_VALUE = {Outcome.passed: 1.0, Outcome.failed: -1.0, Outcome.unknown: 0.0}
ERROR_PENALTY = -0.5
PROGRESS_WEIGHT = 1.0


def progress_of(step: Step) -> float | None:
    """The world's partial score after this step (`info.progress`, e.g. share of tests passing)."""
    for fb in step.feedback:
        if fb.kind == "reward" and isinstance(fb.content, dict):
            info = fb.content.get("info")
            if isinstance(info, dict) and isinstance(info.get("progress"), int | float):
                return float(info["progress"])  # type: ignore[arg-type]
    return None


def step_credit(steps: Sequence[Step], outcome: Outcome, evidence: Sequence[Evidence] = (),
                gamma: float = GAMMA) -> list[float]:
    n = len(steps)
    value = OUTCOME_VALUE[outcome]
    credit = [value * gamma ** (n - 1 - i) for i in range(n)]
    last_progress = 0.0
    last_change = None  # the latest step that changed the world: a rise seen later is its doing
    for i, step in enumerate(steps):
        if not step.executed.allowed or step.effect.error:
            credit[i] += ERROR_PENALTY
        if step.effect.changes:
            last_change = i
        progress = progress_of(step)
        if progress is not None:
            delta = progress - last_progress
            credit[last_change if last_change is not None and delta > 0 else i] += PROGRESS_WEIGHT * delta
            last_progress = progress
    for ev in evidence:
        if ev.step is not None and 0 <= ev.step < n and ev.strength is Strength.hard and ev.outcome is Outcome.failed:
            credit[ev.step] += ERROR_PENALTY
    return [round(c, 6) for c in credit]


def observation_key(observation: str) -> str:
    """The anchor state a step was taken from: the observation the policy saw (hashed)."""
    return hashlib.sha256(observation.encode()).hexdigest()[:16]


def anchor_state_advantages(rollouts: Sequence[Experience], gamma: float = GAMMA) -> dict[tuple[str, int], float]:
    """Step-level advantage across rollouts of one small world (GiGPO): each step's discounted return
    minus the mean return of all steps taken from the same observation, in any rollout."""
    if len({exp.small_world.id for exp in rollouts}) > 1:
        raise InvalidInputError("anchor-state advantages compare rollouts of one small world; group them first")
    returns: dict[tuple[str, int], float] = {}
    groups: dict[str, list[tuple[str, int]]] = defaultdict(list)
    for exp in rollouts:
        value = OUTCOME_VALUE[exp.outcome]
        n = len(exp.steps)
        previous = ""
        for i, step in enumerate(exp.steps):
            key = (exp.id, step.index)
            returns[key] = value * gamma ** (n - 1 - i)
            groups[observation_key(previous)].append(key)
            previous = step.effect.observation
    advantages = {}
    for members in groups.values():
        mean = sum(returns[k] for k in members) / len(members)
        for k in members:
            advantages[k] = round(returns[k] - mean, 6)
    return advantages


def group_advantages(rollouts: Sequence[Experience], gamma: float = GAMMA) -> dict[str, list[float]]:
    """Per rollout of one small world, per step: the group-relative advantage of exploration by groups.

    The episode's outcome relative to its group (GRPO: value minus the group's mean, over its standard
    deviation, 0 when every attempt ended alike) plus the step's anchor-state advantage (GiGPO: its return
    minus the mean return of the steps taken from the same observation in any rollout)."""
    values = [OUTCOME_VALUE[exp.outcome] for exp in rollouts]
    mean = sum(values) / len(values) if values else 0.0
    spread = (sum((v - mean) ** 2 for v in values) / len(values)) ** 0.5 if values else 0.0
    anchors = anchor_state_advantages(rollouts, gamma)
    out = {}
    for exp, value in zip(rollouts, values, strict=True):
        episode = (value - mean) / spread if spread > 1e-9 else 0.0
        out[exp.id] = [round(episode + anchors[(exp.id, s.index)], 6) for s in exp.steps]
    return out


def _spaceless(args: Mapping[str, JsonValue]) -> str:
    return re.sub(r"\s+", "", canonical_json(dict(args)))


def first_divergence(success: Experience, failure: Experience) -> int | None:
    """The first step index where `failure`, from the observation `success` also saw, acted differently; None
    when their shared prefix never reaches a different action (anchor states, as GiGPO groups them)."""
    previous_s = previous_f = ""
    for s, f in zip(success.steps, failure.steps, strict=False):
        if observation_key(previous_s) != observation_key(previous_f):
            return None  # the worlds already differ: no shared anchor state left
        if (s.request.tool, _spaceless(s.request.args)) != (f.request.tool, _spaceless(f.request.args)):
            return f.index  # `7+3` and `7 + 3` are one action: no lesson in their difference
        previous_s, previous_f = s.effect.observation, f.effect.observation
    return None
