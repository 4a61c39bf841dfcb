"""What the text-game worlds share: the verdict of a game's own anchor, stable splits, `submit`."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from pydantic import JsonValue

from lle.core import ActionRequest, SmallWorld, Split, ToolSpec, WorldStep
from lle.errors import WorldError

SPLIT_BUCKETS = ((Split.train, 80), (Split.dev, 90), (Split.test, 100))
"""Cumulative percent per split: 80 % train, 10 % dev, 10 % test."""

SUBMIT = ToolSpec(
    name="submit",
    description="Stop playing and have the game judged as it stands now; ends the episode.",
    permissions=[],
)


@dataclass(frozen=True)
class GameVerdict:
    """What a game's anchor found: success only when the real game state says the task is solved."""

    anchor: str
    """Which check decided, e.g. `textworld-express:tasksuccess` or `textarena:towers`."""
    success: bool
    score: float
    """The game's own score or reward (may be partial); the episode's reward is 1.0/0.0 from `success`."""
    detail: dict[str, JsonValue] = field(default_factory=dict)
    """What the anchor looked at; never the hidden answer (it reaches the model as step info)."""

    def info(self, *, ended_by: str) -> dict[str, JsonValue]:
        return {"success": self.success, "anchor": self.anchor, "game_score": self.score,
                "ended_by": ended_by, "detail": dict(self.detail)}


def stable_fraction(key: str) -> int:
    """0..99 from the sha256 of `key`: the same on every machine, whatever PYTHONHASHSEED is."""
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big") % 100


def split_of(key: str) -> Split:
    """The split an item belongs to, from a stable hash of its key (never Python's `hash()`)."""
    bucket = stable_fraction(key)
    return next(split for split, upper in SPLIT_BUCKETS if bucket < upper)


def stable_order(keys: list[str], salt: str) -> list[str]:
    """`keys` in a pseudo-random order that depends only on their text (so seed 0 is not always the easiest)."""
    return sorted(keys, key=lambda k: hashlib.sha256(f"{salt}:{k}".encode()).hexdigest())


@runtime_checkable
class GameWorld(Protocol):
    """A text-game world whose anchor can be asked at any time."""

    done: bool

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]: ...

    def step(self, action: ActionRequest) -> WorldStep: ...

    def verdict(self) -> GameVerdict: ...

    def close(self) -> None: ...


def replay(small_world: SmallWorld, actions: Sequence[ActionRequest]) -> GameVerdict:
    """Re-run `actions` (the executed actions of a trajectory's allowed steps, in order) in a fresh instance
    of the small world's game and ask its anchor.

    Independent of the episode's own world object: what counts is what the rebuilt game says after
    the same moves (the evidence layer can call this on a recorded trajectory's executed actions).
    """
    from lle.worlds.base import open_world  # base imports the runtime; keep this module light

    world = open_world(small_world)
    if not isinstance(world, GameWorld):
        raise WorldError(f"{small_world.world} is not a text-game world; replay works on games/* worlds only")
    try:
        world.reset(seed=small_world.seed)
        for action in actions:
            if world.done:
                break
            world.step(action)
        return world.verdict()
    finally:
        world.close()
