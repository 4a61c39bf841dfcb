"""Helpers for act/submit worlds (public: `from lle.worlds import SUBMIT, GameVerdict, replay, tool`).

An act/submit world lets the agent act with its own tools, then `submit` to be judged on the real
state. `tool()` writes a `ToolSpec` in one line, `SUBMIT` is the shared ending tool, `GameVerdict`
is what a game's own state says (always decided), and `replay()` re-runs executed actions in a fresh
world and asks its anchor again. A checker that can fail to decide uses `AnchorResult` instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from pydantic import JsonValue

from lle.core import ActionRequest, SmallWorld, ToolSpec, WorldStep
from lle.errors import InvalidInputError, WorldError

SUBMIT = ToolSpec(
    name="submit",
    description="Stop playing and have the game judged as it stands now; ends the episode.",
    permissions=[],
)
"""The tool that ends an episode: the world answers it with its anchor's verdict (terminated)."""

JSON_TYPES = frozenset({"string", "integer", "number", "boolean", "array", "object"})


def tool(name: str, description: str, *, permissions: Sequence[str] = (), **args: str) -> ToolSpec:
    """A `ToolSpec` whose arguments are all required, each a JSON type name: `tool("go", "Move.", direction="string")`.

    Write the full JSON Schema in `ToolSpec(parameters=...)` instead when an argument needs an
    enum, bounds or is optional.
    """
    bad = sorted(k for k, v in args.items() if v not in JSON_TYPES)
    if bad:
        raise InvalidInputError(f"tool {name!r}: argument(s) {', '.join(bad)} have no JSON type; "
                                f"use one of {', '.join(sorted(JSON_TYPES))}")
    schema: dict[str, JsonValue] = {"type": "object", "properties": {k: {"type": v} for k, v in args.items()},
                                    "required": list(args), "additionalProperties": False}
    return ToolSpec.model_validate({"name": name, "description": description, "parameters": schema,
                                    "permissions": list(permissions)})


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

    def world_step(self, observation: str, *, ended_by: str = "submit") -> WorldStep:
        """The step that ends the episode with this verdict: reward 1.0 only on success."""
        return WorldStep(observation, 1.0 if self.success else 0.0, True, False, self.info(ended_by=ended_by))


@runtime_checkable
class GameWorld(Protocol):
    """A world whose anchor can be asked at any time (`verdict()`), as `replay` needs."""

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
    from lle.worlds.base import open_world  # base reaches the registry; keep this module light to import

    world = open_world(small_world)
    if not isinstance(world, GameWorld):
        raise WorldError(f"{small_world.world} has no verdict(); replay needs a world with `done` and `verdict()` "
                         "(the GameWorld protocol)")
    try:
        world.reset(seed=small_world.seed)
        for action in actions:
            if world.done:
                break
            world.step(action)
        return world.verdict()
    finally:
        world.close()
