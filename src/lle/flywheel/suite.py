"""Suites: which worlds a run draws its small worlds from, and how the draw is made.

The draw is a pure function of (suite, seed, round, split): every strategy of a run, and a
resumed run, see exactly the same small worlds. Train small worlds come from the train split
only; evaluation always uses the same dev small worlds, and the test split is never touched
(it is for release evaluation).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import cache

from lle.core import Limits, SmallWorld, Split
from lle.errors import InvalidInputError, LleError
from lle.worlds.base import TaskFamily, open_family


@dataclass(frozen=True)
class Suite:
    name: str
    worlds: tuple[str, ...]
    max_steps: int
    description: str


SUITES = {
    "starter": Suite("starter", ("code/humaneval-v1", "sql/shop-v1", "math/arith-v1", "games/guess-number-v1"),
                     max_steps=6, description="code repair (HumanEval), SQL, math and one text game"),
    "toy": Suite("toy", ("toy/keys-v1",), max_steps=20, description="the toy rooms-and-keys world (tests)"),
}


def get_suite(name: str) -> Suite:
    try:
        return SUITES[name]
    except KeyError:
        raise InvalidInputError(f"no suite {name!r}; choose one of {', '.join(SUITES)}") from None


@cache
def family(world_id: str) -> TaskFamily:
    return open_family(world_id)


def _index(seed: int, round_: int, world: str, i: int, modulus: int) -> int:
    digest = hashlib.sha256(f"{seed}/{round_}/{world}/{i}".encode()).digest()
    return int.from_bytes(digest[:8], "big") % modulus


def draw(suite: Suite, split: Split, n: int, *, seed: int, round_: int,
         max_steps: int | None = None) -> list[SmallWorld]:
    """`n` small worlds of `split`, spread over the suite's worlds in turn (world i gets every k-th)."""
    if split is Split.test:
        raise InvalidInputError("the test split is for release evaluation only; the flywheel draws train and dev")
    out = []
    for i in range(n):
        world = suite.worlds[i % len(suite.worlds)]
        # Train draws change per round; evaluation keeps the first dev tasks of each world, every round.
        index = _index(seed, round_, world, i, 50_000) if split is Split.train else i // len(suite.worlds)
        out.append(_small_world(world, split, index, max_steps or suite.max_steps))
    return out


def draw_for_skill(suite: Suite, family_name: str, n: int, *, seed: int, round_: int,
                   max_steps: int | None = None) -> list[SmallWorld]:
    """`n` train small worlds of the suite's world of `family_name`, for a skill's A/B replay
    (drawn apart from the round's train draw; empty when the suite has no such world)."""
    world = next((w for w in suite.worlds if family(w).family == family_name), None)
    if world is None:
        return []
    return [_small_world(world, Split.train, _index(seed, round_, f"skills/{world}", i, 50_000),
                         max_steps or suite.max_steps) for i in range(n)]


def _small_world(world: str, split: Split, index: int, max_steps: int) -> SmallWorld:
    fam = family(world)
    for candidate in (index, index % 97, 0):  # worlds with fewer tasks in a split: fall back to one it has
        try:
            sw = fam.small_world(split, candidate)
        except LleError:
            continue
        return sw.model_copy(update={"limits": Limits(max_steps=max_steps, max_seconds=sw.limits.max_seconds)})
    raise InvalidInputError(f"{world} gives no {split.value} small world; check `lle worlds show {world}`")
