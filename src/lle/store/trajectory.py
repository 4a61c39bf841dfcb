"""Content hashes of an experience that outlive its ids (for revocation by content, `lle.store.content`).

Pure functions, no store: the store calls `trajectory_hash` when it appends an experience.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from lle.core import Experience, Step, canonical_json

CONTENT, TRAJECTORY = "content", "trajectory"
"""The two kinds of hash a revocation records."""


def _text(value: str | None) -> str:
    # Whitespace is not content: a copy re-indented or re-wrapped is still the same trajectory.
    return " ".join((value or "").split())


def trajectory_hash(world: str, steps: Sequence[Step]) -> str | None:
    """sha256 of what happened in `world`, step by step: the action asked for, the action run, what came back.

    The world is part of it (two worlds may echo the same actions alike); the task's id, goal, outcome,
    score and evidence are not, so a copy with those edited still matches. None for an empty
    trajectory: every episode that did nothing would share its hash.
    """
    if not steps:
        return None
    body: list[object] = [world]
    body += [[s.request.tool, s.request.args, s.executed.tool, s.executed.args, s.executed.allowed,
             _text(s.effect.observation), _text(s.effect.error)] for s in steps]
    return "sha256:" + hashlib.sha256(canonical_json(body).encode()).hexdigest()


def hashes_of(exp: Experience) -> list[tuple[str, str]]:
    """(kind, hash) of an experience's content, for a revocation to record."""
    found = [(CONTENT, exp.content_hash or exp.compute_hash())]
    if (trajectory := trajectory_hash(exp.small_world.world, exp.steps)) is not None:
        found.append((TRAJECTORY, trajectory))
    return found
