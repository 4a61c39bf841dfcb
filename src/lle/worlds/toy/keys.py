"""`toy/keys-v1`: find the key, unlock the door, enter the vault, submit.

Small on purpose (a few rooms, a handful of tools) but real: every tool reads and changes real
state, the layout depends on the seed, and one tool (`smash`) exists in the world but is never
allowed by its small worlds, so the runtime's denials have something to deny.
"""

from __future__ import annotations

import hashlib
import time
from typing import Any

from pydantic import JsonValue

from lle.core import ActionRequest, Limits, SmallWorld, Split, ToolSpec, WorldStep
from lle.errors import WorldError
from lle.worlds.base import BaseWorld, TaskFamily
from lle.worlds.levels import level_pool, levelled_id
from lle.worlds.toy.layout import DIRECTIONS, LEVELS, PROJECTS, VAULT, Layout, make_layout, path

WORLD_ID = "toy/keys-v1"
SPLIT_OFFSET = {Split.train: 0, Split.dev: 1, Split.test: 2}
ALLOWED_TOOLS = ["look", "go", "take", "open", "submit"]

TOOLS = [
    ToolSpec(name="look", description="Describe the room you are in: exits, doors, items.", permissions=["read"]),
    ToolSpec(
        name="go", description="Walk through an exit.", permissions=["write"],
        parameters={"type": "object", "properties": {"direction": {"type": "string", "enum": list(DIRECTIONS)}},
                    "required": ["direction"], "additionalProperties": False},
    ),
    ToolSpec(
        name="take", description="Pick up an item in this room (e.g. `key`).", permissions=["write"],
        parameters={"type": "object", "properties": {"item": {"type": "string", "minLength": 1}},
                    "required": ["item"], "additionalProperties": False},
    ),
    ToolSpec(
        name="open", description="Open a door (needs its key) or a chest here.", permissions=["write"],
        parameters={"type": "object", "properties": {"target": {"type": "string", "enum": ["door", "chest"]}},
                    "required": ["target"], "additionalProperties": False},
    ),
    ToolSpec(name="submit", description="Declare the task done; ends the episode.", permissions=[]),
    ToolSpec(
        name="smash", description="Break a door open without its key.", permissions=["write"],
        parameters={"type": "object", "properties": {"target": {"type": "string", "enum": ["door"]}},
                    "required": ["target"], "additionalProperties": False},
    ),
]


class KeysWorld(BaseWorld):
    """One instance of the keys world; `reset(seed=…)` builds the layout for that seed."""

    version = "1"

    def __init__(self, project: str = "manor", *, seed: int = 0, step_cost_ms: float = 0.0,
                 level: int | None = None) -> None:
        if project not in PROJECTS:
            raise WorldError(f"toy/keys-v1 has no project {project!r}; use one of {', '.join(PROJECTS)}")
        self.tools = list(TOOLS)
        self.project = project
        self.default_seed = seed
        self.level = level
        self.step_cost_ms = step_cost_ms
        self.layout: Layout | None = None

    # --- Gymnasium shape ----------------------------------------------------------------------------

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        self.layout = make_layout(self.project, self.default_seed if seed is None else seed, level=self.level)
        self.room = self.layout.start
        self.items = {room: list(items) for room, items in self.layout.items.items()}
        self.inventory: list[str] = []
        self.door_open = False
        self.chest_open = False
        self.done = False
        self.moves = 0
        return f"You are in the {self.room}. {self._describe()}", {"project": self.project}

    def step(self, action: ActionRequest) -> WorldStep:
        if self.layout is None or self.done:
            raise WorldError("toy/keys-v1: step() before reset() or after the episode ended; call reset()")
        self._burn()
        self.moves += 1
        handler = getattr(self, f"_do_{action.tool}", None)
        if handler is None:
            raise WorldError(f"toy/keys-v1 has no tool {action.tool!r}")
        result: WorldStep = handler(**action.args)
        return result

    def state(self) -> dict[str, JsonValue]:
        if self.layout is None:
            return {}
        state: dict[str, JsonValue] = {
            "room": self.room,
            "inventory": list[JsonValue](sorted(self.inventory)),
            "door": "open" if self.door_open else "locked",
            "done": self.done,
        }
        if self.layout.key_in_chest:
            state["chest"] = "open" if self.chest_open else "closed"
        for room, items in self.items.items():
            state[f"items.{room}"] = list[JsonValue](sorted(items))
        return state

    # --- tools ------------------------------------------------------------------------------------

    def _do_look(self) -> WorldStep:
        return self._obs(self._describe())

    def _do_go(self, direction: str) -> WorldStep:
        assert self.layout is not None
        target = self.layout.exits[self.room].get(direction)
        if target is None:
            return self._obs(f"There is no exit to the {direction}.")
        if self._is_door(self.room, direction) and not self.door_open:
            return self._obs(f"The {self.layout.door_color} door is locked.")
        self.room = target
        if target == VAULT:
            return self._obs("You step into the vault. Gold glitters on the shelves.")
        return self._obs(f"You go {direction} to the {target}. {self._describe()}")

    def _do_take(self, item: str) -> WorldStep:
        here = self.items.get(self.room, [])
        name = item.strip().lower().removeprefix("the ").removeprefix("a ")
        if name not in here:
            return self._obs(f"There is no {name} here.")
        here.remove(name)
        self.inventory.append(name)
        return self._obs(f"You take the {name}.")

    def _do_open(self, target: str) -> WorldStep:
        assert self.layout is not None
        if target == "chest":
            if not (self.layout.key_in_chest and self.room == self.layout.key_room):
                return self._obs("There is no chest here.")
            if self.chest_open:
                return self._obs("The chest is already open.")
            self.chest_open = True
            self.items[self.room].append("key")
            return self._obs("You open the chest. Inside lies a key.")
        color = self.layout.door_color
        if self.room != self.layout.door_room:
            return self._obs("There is no door here.")
        if self.door_open:
            return self._obs(f"The {color} door is already open.")
        if "key" not in self.inventory:
            return self._obs(f"The {color} door is locked and you have no key.")
        self.door_open = True
        return self._obs(f"You unlock the {color} door with the key and open it.")

    def _do_submit(self) -> WorldStep:
        self.done = True
        success = self.room == VAULT
        text = "You submit from inside the vault: done." if success else f"You submit, but you are in the {self.room}."
        return WorldStep(text, 1.0 if success else 0.0, True, False, {"success": success})

    def _do_smash(self, target: str) -> WorldStep:
        assert self.layout is not None
        if self.room != self.layout.door_room:
            return self._obs("There is no door here.")
        self.door_open = True
        return self._obs(f"You smash the {self.layout.door_color} door open.")

    # --- helpers -----------------------------------------------------------------------------------

    def _obs(self, text: str) -> WorldStep:
        return WorldStep(text, 0.0, False, False, {})

    def _is_door(self, room: str, direction: str) -> bool:
        assert self.layout is not None
        return self.layout.exits[room].get(direction) == VAULT or (
            room == VAULT and self.layout.exits[VAULT].get(direction) == self.layout.door_room)

    def _describe(self) -> str:
        assert self.layout is not None
        if self.room == VAULT:
            return "Gold glitters on the shelves."
        parts = []
        for direction, target in sorted(self.layout.exits[self.room].items()):
            if target == VAULT:
                state = "open" if self.door_open else "locked"
                parts.append(f"{direction} through a {state} {self.layout.door_color} door")
            else:
                parts.append(f"{direction} to the {target}")
        text = "Exits: " + ", ".join(parts) + "."
        if self.layout.key_in_chest and self.room == self.layout.key_room:
            text += f" There is a {'open' if self.chest_open else 'closed'} chest here."
        if self.items[self.room]:
            text += " You see: " + ", ".join(f"a {i}" for i in sorted(self.items[self.room])) + "."
        if self.inventory:
            text += " You carry: " + ", ".join(sorted(self.inventory)) + "."
        return text

    def _burn(self) -> None:
        # A deterministic CPU cost per step, for measuring parallel speed-up on a world-bound load.
        if self.step_cost_ms <= 0:
            return
        end = time.perf_counter() + self.step_cost_ms / 1000
        digest = b"lle"
        while time.perf_counter() < end:
            digest = hashlib.sha256(digest).digest()


class KeysFamily(TaskFamily):
    """Task family `toy/keys-v1`: projects `manor` (key on the floor) and `cellar` (key in a chest)."""

    id = WORLD_ID
    family = "toy"
    version = "1"
    projects = PROJECTS
    description = "find a key, unlock a door, reach the vault (a seeded text maze)"
    quick_reset = True
    tools = tuple(ALLOWED_TOOLS)
    anchor = "state"
    levels = LEVELS

    def __init__(self, *, step_cost_ms: float = 0.0) -> None:
        self.step_cost_ms = float(step_cost_ms)

    def options(self) -> dict[str, JsonValue]:
        return {"step_cost_ms": self.step_cost_ms} if self.step_cost_ms else {}

    def small_world(self, split: Split, seed: int, *, project: str | None = None,
                    level: int | None = None) -> SmallWorld:
        split = Split(split)
        level = self.check_level(level)
        project = project or PROJECTS[seed % len(PROJECTS)]
        if project not in PROJECTS:
            raise WorldError(f"{WORLD_ID} has no project {project!r}; use one of {', '.join(PROJECTS)}")
        if level is None:
            # Interleaved seeds keep train, dev and test disjoint for every seed.
            world_seed = seed * len(SPLIT_OFFSET) + SPLIT_OFFSET[split]
        else:
            world_seed = level_world_seed(project, level, split, seed)
        layout = make_layout(project, world_seed, level=level)
        where = "Find the key (it is in a chest somewhere)" if layout.key_in_chest else "Find the key"
        return SmallWorld(
            id=levelled_id(f"{WORLD_ID}:{project}", split, seed, level), world=WORLD_ID, family=self.family,
            project=project, split=split, seed=world_seed, level=level,
            goal=f"{where}, unlock the {layout.door_color} door, step into the vault, then call submit.",
            tools=list(ALLOWED_TOOLS), limits=Limits(max_steps=30, max_seconds=60.0),
        )

    def make_world(self, small_world: SmallWorld) -> KeysWorld:
        self.check_small_world(small_world)
        return KeysWorld(small_world.project, seed=small_world.seed, step_cost_ms=self.step_cost_ms,
                         level=self.check_level(small_world.level))


def level_world_seed(project: str, level: int, split: Split, seed: int) -> int:
    """The world seed of the `seed`-th distinct layout of `split` at `level`: a layout's split is the stable
    hash of the whole layout, so one layout (few exist with one room) is never in two splits. World seeds
    interleave the projects (`n * len(PROJECTS) + project`), so no world seed serves two projects."""
    stride, offset = len(PROJECTS), PROJECTS.index(project)
    pool = level_pool(f"{WORLD_ID} {project} level {level}",
                      lambda n: repr(make_layout(project, n * stride + offset, level=level)), f"{WORLD_ID}:levels")
    return pool.world_seed(split, seed) * stride + offset


def oracle_actions(small_world: SmallWorld) -> list[ActionRequest]:
    """The shortest solving script for a keys small world, computed from its layout (for tests and demos)."""
    layout = make_layout(small_world.project, small_world.seed, level=small_world.level)
    actions = [ActionRequest(tool="look", thought="See where I am.")]
    actions += [ActionRequest(tool="go", args={"direction": d}) for d in path(layout, layout.start, layout.key_room)]
    if layout.key_in_chest:
        actions.append(ActionRequest(tool="open", args={"target": "chest"}, expect="a key inside"))
    actions.append(ActionRequest(tool="take", args={"item": "key"}, expect="the key in my inventory"))
    actions += [ActionRequest(tool="go", args={"direction": d})
                for d in path(layout, layout.key_room, layout.door_room)]
    actions.append(ActionRequest(tool="open", args={"target": "door"}, expect="the door opens"))
    actions.append(ActionRequest(tool="go", args={"direction": layout.door_dir}))
    actions.append(ActionRequest(tool="submit", thought="I am in the vault.", expect="success"))
    return actions
