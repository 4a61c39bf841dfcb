"""Layouts of the keys world: a few rooms on a grid, a key, a locked door to the vault.

A layout is a pure function of (project, seed): `random.Random` seeded with a string hashes it with
sha512, so layouts are the same on every machine and every run, whatever PYTHONHASHSEED is.
"""

from __future__ import annotations

import random
from collections import deque
from dataclasses import dataclass

ROOM_NAMES = ("hall", "kitchen", "library", "pantry", "study", "gallery", "scullery", "garden", "attic", "chapel")
DOOR_COLORS = ("red", "blue", "green", "iron", "brass")
DECOYS = ("candle", "book", "rope", "spoon", "map")
VAULT = "vault"
DIRECTIONS = {"north": (0, 1), "south": (0, -1), "east": (1, 0), "west": (-1, 0)}
OPPOSITE = {"north": "south", "south": "north", "east": "west", "west": "east"}
PROJECTS = ("manor", "cellar")
"""manor: the key lies in a room. cellar: the key is inside a closed chest that must be opened first."""
ROOMS_BY_LEVEL = ((1, 1), (2, 2), (3, 3), (3, 5))
"""Ordinary rooms (fewest, most) per difficulty level; unlevelled layouts have 3 to 5, like the last level."""
LEVELS = (
    "1 room: the key and the vault door are where you start",
    "2 rooms: walk once to fetch the key or to reach the door",
    "3 rooms",
    "3 to 5 rooms, as unlevelled",
)


@dataclass(frozen=True)
class Layout:
    rooms: tuple[str, ...]
    """Ordinary rooms; the first is the start. The vault is extra."""
    exits: dict[str, dict[str, str]]
    """room -> direction -> neighbour, both ways, the vault door included."""
    door_room: str
    """Room with the locked door to the vault."""
    door_dir: str
    """Direction of the door from `door_room`."""
    door_color: str
    key_room: str
    key_in_chest: bool
    items: dict[str, tuple[str, ...]]
    """Loose items per room at the start (the key included unless it is in the chest)."""

    @property
    def start(self) -> str:
        return self.rooms[0]


def make_layout(project: str, seed: int, *, level: int | None = None) -> Layout:
    """The layout of (project, seed), or of (project, level, seed): a pure function of them."""
    if project not in PROJECTS:
        raise ValueError(f"unknown project {project!r}; use one of {PROJECTS}")
    if level is None:
        rng, (fewest, most) = random.Random(f"toy/keys-v1:{project}:{seed}"), ROOMS_BY_LEVEL[-1]
    else:
        rng, (fewest, most) = random.Random(f"toy/keys-v1:{project}:L{level}:{seed}"), ROOMS_BY_LEVEL[level]
    names = rng.sample(ROOM_NAMES, rng.randint(fewest, most))
    cells = {names[0]: (0, 0)}
    taken = {(0, 0): names[0]}
    exits: dict[str, dict[str, str]] = {n: {} for n in [*names, VAULT]}

    def attach(room: str, candidates: list[str]) -> tuple[str, str]:
        options = [(c, d) for c in candidates for d in DIRECTIONS
                   if _shift(cells[c], d) not in taken]
        anchor, direction = rng.choice(options)
        cell = _shift(cells[anchor], direction)
        cells[room], taken[cell] = cell, room
        exits[anchor][direction] = room
        exits[room][OPPOSITE[direction]] = anchor
        return anchor, direction

    for room in names[1:]:
        attach(room, list(cells))
    # The vault hangs off a room other than the start, so the agent always has to move (except when the
    # start is the only room: the easiest level).
    door_room, door_dir = attach(VAULT, names[1:] or names)
    key_room = rng.choice([n for n in names if n != door_room] or names)
    key_in_chest = project == "cellar"
    items: dict[str, list[str]] = {n: [] for n in names}
    for decoy in rng.sample(DECOYS, 2):
        items[rng.choice(names)].append(decoy)
    if not key_in_chest:
        items[key_room].append("key")
    return Layout(
        rooms=tuple(names), exits=exits, door_room=door_room, door_dir=door_dir,
        door_color=rng.choice(DOOR_COLORS), key_room=key_room, key_in_chest=key_in_chest,
        items={k: tuple(sorted(v)) for k, v in items.items()},
    )


def _shift(cell: tuple[int, int], direction: str) -> tuple[int, int]:
    dx, dy = DIRECTIONS[direction]
    return cell[0] + dx, cell[1] + dy


def path(layout: Layout, start: str, goal: str) -> list[str]:
    """Directions from `start` to `goal` through ordinary rooms (never through the vault door)."""
    previous: dict[str, tuple[str, str] | None] = {start: None}
    queue = deque([start])
    while queue:
        room = queue.popleft()
        if room == goal:
            break
        for direction, nxt in layout.exits[room].items():
            if nxt != VAULT and nxt not in previous:
                previous[nxt] = (room, direction)
                queue.append(nxt)
    steps: list[str] = []
    room = goal
    while (link := previous[room]) is not None:
        room, direction = link
        steps.append(direction)
    return steps[::-1]
