"""`demo/counter-v1`: reach a seeded target by adding small numbers to a counter, then submit.

The worked example of docs/11-writing-a-world.md, written from that page alone.
"""

from __future__ import annotations

import random
from typing import Any

from pydantic import JsonValue

from lle.core import ActionRequest, Limits, Outcome, SmallWorld, Split, WorldStep
from lle.worlds import SUBMIT, AnchorResult, BaseWorld, TaskFamily, tool

WORLD_ID = "demo/counter-v1"
ADD = tool("add", "Add a number from 1 to 9 to the counter.", n="integer")
SPLIT_OFFSET = {Split.train: 0, Split.dev: 1, Split.test: 2}


class CounterWorld(BaseWorld):
    """The counter starts at 0; the target is drawn from the seed."""

    def __init__(self) -> None:
        self.tools = [ADD, SUBMIT]
        self.count = 0
        self.target = 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        self.count, self.target = 0, random.Random(seed).randint(10, 99)
        return f"The counter is at 0. Reach exactly {self.target}.", {}

    def step(self, action: ActionRequest) -> WorldStep:
        if action.tool == "submit":
            passed = self.count == self.target
            verdict = AnchorResult(Outcome.passed if passed else Outcome.failed,
                                   f"the counter is at {self.count}, the target is {self.target}",
                                   anchor="state", checker="demo-counter")
            return verdict.world_step(f"Submitted at {self.count}.")
        n = action.args.get("n")
        if not isinstance(n, int) or not 1 <= n <= 9:
            return WorldStep(f"error: n must be 1..9, got {n!r}", 0.0, False, False, {})
        self.count += n
        return WorldStep(f"The counter is at {self.count}.", 0.0, False, False, {})

    def state(self) -> dict[str, JsonValue]:
        return {"count": self.count}


class CounterFamily(TaskFamily):
    """Reach a target number by adding 1..9 at a time."""

    id = WORLD_ID
    family = "demo"
    tools = ("add", "submit")
    anchor = "state"

    def small_world(self, split: Split, seed: int, *, project: str | None = None) -> SmallWorld:
        split = Split(split)
        world_seed = seed * 3 + SPLIT_OFFSET[split]  # interleaved: no world seed in two splits
        target = random.Random(world_seed).randint(10, 99)
        return SmallWorld(id=f"{WORLD_ID}:{split.value}:{seed}", world=WORLD_ID, family=self.family,
                          project="default", split=split, seed=world_seed,
                          goal=f"Make the counter show exactly {target}, then call submit.",
                          tools=list(self.tools), limits=Limits(max_steps=30, max_seconds=30.0))

    def make_world(self, small_world: SmallWorld) -> CounterWorld:
        self.check_small_world(small_world)
        return CounterWorld()
