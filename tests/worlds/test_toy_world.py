"""The toy keys world: deterministic small worlds per split and seed, real state, solvable layouts."""

from __future__ import annotations

import time

import pytest

from lle import registry
from lle.core import ActionRequest, SmallWorld, Split
from lle.errors import RegistryError, WorldError
from lle.worlds import open_world
from lle.worlds.toy import KeysFamily, KeysWorld, oracle_actions
from lle.worlds.toy.layout import make_layout, path


def test_registry_makes_the_family_and_small_worlds_are_deterministic() -> None:
    family = registry.make("toy/keys-v1")
    assert isinstance(family, KeysFamily)
    assert "toy/keys-v1" in registry.ids("toy/")
    a = family.small_world(Split.dev, 7)
    assert a == KeysFamily().small_world(Split.dev, 7)
    assert a.id == "toy/keys-v1:cellar:dev:7" and a.world == "toy/keys-v1" and a.split == Split.dev
    assert "smash" not in a.tools and "submit" in a.tools


def test_splits_never_share_a_world_and_seeds_change_the_layout() -> None:
    family = KeysFamily()
    seeds = {split: {family.small_world(split, s).seed for s in range(100)} for split in Split}
    assert not (seeds[Split.train] & seeds[Split.dev]) and not (seeds[Split.dev] & seeds[Split.test])
    assert not (seeds[Split.train] & seeds[Split.test])
    layouts = {repr(make_layout("manor", s)) for s in range(50)}
    assert len(layouts) >= 45  # different layouts per seed, not one layout with a new id


@pytest.mark.parametrize("split", list(Split))
def test_the_oracle_solves_every_small_world(split: Split) -> None:
    family = KeysFamily()
    for sw in family.small_worlds(split, 40):
        world = family.make_world(sw)
        world.reset(seed=sw.seed)
        results = [world.step(a) for a in oracle_actions(sw)]
        assert results[-1].terminated and results[-1].reward == 1.0 and results[-1].info == {"success": True}
        assert all(not r.terminated for r in results[:-1])
        assert world.state()["room"] == "vault" and world.state()["door"] == "open"


def test_tools_change_real_state_and_the_door_needs_its_key() -> None:
    family = KeysFamily()
    sw = family.small_world(Split.train, 2, project="manor")
    layout = make_layout("manor", sw.seed)
    world = family.make_world(sw)
    world.reset(seed=sw.seed)
    assert world.state()["room"] == layout.start
    plan = oracle_actions(sw)
    take = next(i for i, a in enumerate(plan) if a.tool == "take")
    # Walk straight to the door without the key: it stays locked and the vault is out of reach.
    world.reset(seed=sw.seed)
    for direction in _path_to_door(sw):
        world.step(ActionRequest(tool="go", args={"direction": direction}))
    assert "locked" in world.step(ActionRequest(tool="open", args={"target": "door"})).observation
    assert "locked" in world.step(ActionRequest(tool="go", args={"direction": layout.door_dir})).observation
    world.reset(seed=sw.seed)
    for action in plan[: take + 1]:
        world.step(action)
    assert world.state()["inventory"] == ["key"]
    assert world.state()[f"items.{layout.key_room}"] == [i for i in layout.items[layout.key_room] if i != "key"]


def _path_to_door(sw: SmallWorld) -> list[str]:
    layout = make_layout(sw.project, sw.seed)
    return path(layout, layout.start, layout.door_room)


def test_the_cellar_hides_the_key_in_a_chest() -> None:
    family = KeysFamily()
    sw = family.small_world(Split.train, 1, project="cellar")
    world = family.make_world(sw)
    world.reset(seed=sw.seed)
    plan = oracle_actions(sw)
    opening = next(i for i, a in enumerate(plan) if a.args == {"target": "chest"})
    for action in plan[:opening]:
        world.step(action)
    assert world.step(ActionRequest(tool="take", args={"item": "key"})).observation == "There is no key here."
    assert world.step(plan[opening]).observation == "You open the chest. Inside lies a key."
    assert world.state()["chest"] == "open"


def test_step_cost_burns_time_and_wrong_inputs_say_the_fix() -> None:
    sw = KeysFamily().small_world(Split.train, 0)
    world = open_world(sw, step_cost_ms=20)
    world.reset(seed=sw.seed)
    started = time.perf_counter()
    world.step(ActionRequest(tool="look"))
    assert time.perf_counter() - started >= 0.02
    with pytest.raises(WorldError, match="no project 'attic'"):
        KeysFamily().small_world(Split.train, 0, project="attic")
    with pytest.raises(WorldError, match="belongs to toy/other-v1, not toy/keys-v1"):
        KeysFamily().make_world(sw.model_copy(update={"world": "toy/other-v1"}))
    with pytest.raises(RegistryError, match="no registered id 'toy/keys-v9'"):
        registry.make("toy/keys-v9")
    with pytest.raises(WorldError, match="call reset"):
        KeysWorld().step(ActionRequest(tool="look"))
