"""The router end to end on real episodes: poisoned tool outputs and one-off preferences never become
rules; real project quirks, seen twice with hard evidence, do; every decision is an Update with reasons."""

from __future__ import annotations

from pathlib import Path

import pytest

from lle.carriers.dataset import Dataset
from lle.core import CarrierKind, Experience, Outcome, Split, UpdateOp, VerificationLevel
from lle.evidence import assess_experience
from lle.flywheel import poison
from lle.governance.hygiene import ContaminationIndex
from lle.governance.lineage import active_items, revoke
from lle.policies.scripted import ScriptedPolicy
from lle.router.router import UpdateRouter
from lle.runtime.harness import run_episode
from lle.store import Store
from lle.worlds.base import open_family
from lle.worlds.sql.world import reference_actions

N_POISONED = 100


@pytest.fixture(scope="module")
def routed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Store, list[str]]:
    """100 SQL episodes (shop) whose every tool output carries an injected instruction, and whose goal
    carries a one-off preference; solved by the reference query so the quirk lessons are confirmed."""
    store = Store(tmp_path_factory.mktemp("router") / "lle.db")
    family = open_family("sql/shop-v1")
    contamination = ContaminationIndex.from_registry(worlds=["sql/shop-v1"], per_split=100)
    router = UpdateRouter(store, contamination=contamination)
    ids = []
    for seed in range(N_POISONED):
        sw = family.small_world(Split.train, seed)
        prefs = sw.model_copy(update={"goal": f"{sw.goal}\n\n{poison.PREFERENCES[seed % 3]}"})
        world = poison.PoisonWrapper(family.make_world(prefs), prefs)
        world.active = True  # every episode poisoned here
        exp = assess_experience(run_episode(prefs, ScriptedPolicy(reference_actions(sw)), world=world))
        store.append_experience(exp)
        router.route(exp)
        ids.append(exp.id)
    return store, ids


@pytest.mark.slow
def test_injected_instructions_never_reach_rules_and_are_stored_flagged_and_quoted(
        routed: tuple[Store, list[str]]) -> None:
    store, ids = routed
    rules = active_items(store, CarrierKind.rules.value)
    assert rules, "the project's real quirks, confirmed by the anchor, become rules"
    assert not any(poison.INJECTION_MARK in str(r.content) for r in rules)
    memories = active_items(store, CarrierKind.memory.value)
    assert len(memories) == N_POISONED
    for item in memories:
        text = str(item.content)
        if poison.INJECTION_MARK in text:  # kept only as quoted data, with its source
            assert "untrusted" in text
    for exp_id in ids[:10]:
        updates = [u for u in store.list_updates(limit=10_000) if exp_id in u.experience_ids]
        assert updates and all(u.gate is None or u.gate.reasons for u in updates)


@pytest.mark.slow
def test_one_off_preferences_never_become_project_or_global_rules(routed: tuple[Store, list[str]]) -> None:
    store, _ = routed
    rules = active_items(store, CarrierKind.rules.value)
    assert all(poison.PREFERENCE_MARK not in str(r.content).lower() for r in rules)
    assert all(r.scope.level.value == "project" and r.scope.project == "shop" for r in rules)


@pytest.mark.slow
def test_revoking_a_supporting_experience_revokes_the_rule(routed: tuple[Store, list[str]], tmp_path: Path) -> None:
    store, _ = routed
    rule = active_items(store, CarrierKind.rules.value)[0]
    supporters = [u for u in store.list_updates(limit=10_000, carrier="rules")
                  if u.item_id == rule.id and u.op is UpdateOp.propose]
    assert len(supporters) >= 2
    rev = revoke(store, rule.experience_ids[0], "test: the first supporter was bad", "test")
    assert rule.id in rev.cascade
    assert rule.id not in {i.id for i in active_items(store, CarrierKind.rules.value)}


def test_dev_experiences_are_refused_with_a_reason(tmp_path: Path) -> None:
    family = open_family("toy/keys-v1")
    sw = family.small_world(Split.dev, 0)
    from lle.worlds.toy.keys import oracle_actions

    exp = assess_experience(run_episode(sw, ScriptedPolicy(oracle_actions(sw))))
    with Store(tmp_path / "lle.db") as store:
        store.append_experience(exp)
        updates = UpdateRouter(store, contamination=ContaminationIndex.from_registry(worlds=["toy/keys-v1"])).route(exp)
        assert [(u.op, u.gate.name if u.gate else None) for u in updates] == [(UpdateOp.reject, "held_out")]
        assert store.carrier_items() == []


def _toy_success(split: Split = Split.train, seed: int = 0, **small_world: object) -> Experience:
    """A hard-verified success in the toy world, its small world changed by `small_world`."""
    from lle.worlds.toy.keys import oracle_actions

    sw = open_family("toy/keys-v1").small_world(split, seed)
    exp = assess_experience(run_episode(sw, ScriptedPolicy(oracle_actions(sw))))
    assert (exp.outcome, exp.verification) == (Outcome.passed, VerificationLevel.hard_anchor)
    return exp.model_copy(update={"small_world": sw.model_copy(update=small_world)}).sealed()


def test_a_small_world_that_forbids_writeback_leaves_every_carrier_untouched(tmp_path: Path) -> None:
    exp = _toy_success(writeback=[])
    with Store(tmp_path / "lle.db") as store:
        store.append_experience(exp)
        router = UpdateRouter(store, contamination=ContaminationIndex.from_registry(worlds=["toy/keys-v1"]))
        updates = router.route(exp)
        routed = [CarrierKind.memory, CarrierKind.rules, CarrierKind.skills, CarrierKind.dataset]
        assert [(u.carrier, u.op, u.gate.name if u.gate else None) for u in updates] == \
            [(c, UpdateOp.reject, "writeback") for c in routed]
        assert all(u.gate and f"writeback forbids {u.carrier.value}" in u.gate.reasons[0] for u in updates)
        assert store.carrier_items() == []  # memory, rules, skills, verifier cases, dataset: all empty
        assert Dataset(store).admit_pending() == []  # decided once, by the router: export adds nothing later


def test_writeback_admits_only_the_carriers_it_lists(tmp_path: Path) -> None:
    exp = _toy_success(writeback=[CarrierKind.memory])
    with Store(tmp_path / "lle.db") as store:
        store.append_experience(exp)
        updates = UpdateRouter(store, contamination=ContaminationIndex.from_registry(worlds=["toy/keys-v1"])).route(exp)
        decided = {u.carrier: (u.op, u.gate.name if u.gate else None) for u in updates}
        assert decided[CarrierKind.memory] == (UpdateOp.admit, "memory")
        assert decided[CarrierKind.dataset] == (UpdateOp.reject, "writeback")
        assert {i.carrier for i in store.carrier_items()} == {CarrierKind.memory}


def test_by_default_a_small_world_writes_back_to_every_carrier(tmp_path: Path) -> None:
    exp = _toy_success()
    assert exp.small_world.writeback == list(CarrierKind)
    with Store(tmp_path / "lle.db") as store:
        store.append_experience(exp)
        updates = UpdateRouter(store, contamination=ContaminationIndex.from_registry(worlds=["toy/keys-v1"])).route(exp)
        assert not any(u.gate and u.gate.name == "writeback" for u in updates)
        assert {i.carrier for i in store.carrier_items()} == {CarrierKind.memory, CarrierKind.dataset}
