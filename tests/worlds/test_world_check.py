"""check_world passes on the toy world and names the broken check on bad worlds."""

from __future__ import annotations

import random
from functools import partial
from typing import Any

import pytest

from lle.core import ActionRequest, Split, ToolSpec, WorldStep
from lle.errors import WorldError
from lle.worlds import BaseWorld, check_family, check_world, open_family
from lle.worlds.toy import KeysFamily, KeysWorld, oracle_actions

SUBMIT = ToolSpec(name="submit", description="Finish.")
MOVE = ToolSpec(name="move", description="Move.", parameters={
    "type": "object", "properties": {"steps": {"type": "integer"}}, "required": ["steps"]})


class GoodWorld(BaseWorld):
    """A counter that `move` advances and `submit` ends; everything follows from the seed."""

    def __init__(self) -> None:
        self.tools = [MOVE, SUBMIT]

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        self.position = random.Random(seed).randint(0, 9)
        return f"at {self.position}", {"seed": seed}

    def step(self, action: ActionRequest) -> WorldStep:
        if action.tool == "submit":
            return WorldStep("done", 1.0, True, False, {})
        self.position += int(str(action.args["steps"]))
        return WorldStep(f"at {self.position}", 0.0, False, False, {})

    def state(self) -> dict[str, Any]:
        return {"position": self.position}


class Unseeded(GoodWorld):
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        self.position = random.randint(0, 10**9)  # ignores the seed
        return f"at {self.position}", {}


class DictObservation(GoodWorld):
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        return {"position": self.position}, {}  # type: ignore[return-value]


class StringReward(GoodWorld):
    def step(self, action: ActionRequest) -> WorldStep:
        obs, _, term, trunc, info = super().step(action)
        return WorldStep(obs, "1", term, trunc, info)  # type: ignore[arg-type]


class ObjectInfo(GoodWorld):
    def step(self, action: ActionRequest) -> WorldStep:
        obs, reward, term, trunc, _ = super().step(action)
        return WorldStep(obs, reward, term, trunc, {"when": object()})


class NeverEnds(GoodWorld):
    def step(self, action: ActionRequest) -> WorldStep:
        return WorldStep("still here", 0.0, False, False, {})


class RaisesOnValidAction(GoodWorld):
    def step(self, action: ActionRequest) -> WorldStep:
        if action.tool == "move":
            raise IndexError("off the board")
        return super().step(action)


class BadSchema(GoodWorld):
    def __init__(self) -> None:
        self.tools = [ToolSpec(name="move", description="Move.", parameters={"type": "object", "properties": 3}),
                      SUBMIT]


class HiddenState(GoodWorld):
    """Keeps a counter across resets: the same instance diverges on the second run."""

    runs = 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        HiddenState.runs += 1
        obs, info = super().reset(seed=seed)
        return obs + f" (run {HiddenState.runs})", info


def test_check_world_passes_on_the_toy_world_and_a_good_world() -> None:
    family = KeysFamily()
    for project in family.projects:
        sw = family.small_world(Split.train, 4, project=project)
        report = check_world(partial(family.make_world, sw), seeds=(sw.seed,))
        assert {"determinism", "termination", "reset-after-done", "tools", "robustness"} <= set(report.passed)
        assert report.steps_probed >= 5  # every tool was played, submit last
    solved = check_world(KeysWorld("manor", seed=sw.seed), seeds=(sw.seed,), probe=oracle_actions(sw))
    assert solved.steps_probed == len(oracle_actions(sw))
    assert "determinism" in check_world(GoodWorld).passed


@pytest.mark.parametrize(("world", "check"), [
    (Unseeded, "determinism"),
    (HiddenState, "determinism"),
    (DictObservation, "reset-types"),
    (StringReward, "step-types"),
    (ObjectInfo, "info-json"),
    (NeverEnds, "termination"),
    (RaisesOnValidAction, "robustness"),
    (BadSchema, "tools"),
])
def test_check_world_names_the_check_a_bad_world_fails(world: type[GoodWorld], check: str) -> None:
    with pytest.raises(WorldError, match=f"check_world: {check} failed"):
        check_world(world)


def test_an_object_without_the_interface_fails_the_interface_check() -> None:
    class NoState:
        def __init__(self) -> None:
            self.tools = [SUBMIT]

        def reset(self, **_: Any) -> tuple[str, dict[str, Any]]:
            return "", {}

    with pytest.raises(WorldError, match=r"interface failed.*lacks .*state"):
        check_world(NoState)  # type: ignore[arg-type]


def test_check_family_on_the_registered_toy_family() -> None:
    family = open_family("toy/keys-v1")
    assert isinstance(family, KeysFamily)
    report = check_family(family)
    assert {"family-determinism", "family-splits", "family-variety", "world:manor", "world:cellar"} <= set(
        report.passed)
