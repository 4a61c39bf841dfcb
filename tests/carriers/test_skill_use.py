"""A skill kept for its measured use: train episodes offered it against those withheld the library's skills.

Real toy-world episodes through the harness, assessed by the real verifiers, in a real store. The flywheel records
each train episode's arm in its levers (`Levers.skills_arm`); here the episodes are played so the arms differ on
purpose: `with` episodes that submit at once (a failure), `without` ones the oracle solves.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from lle.carriers import skill_use
from lle.carriers.skill_use import Usefulness
from lle.carriers.skills import Skill, SkillLibrary, SkillState
from lle.config import Levers
from lle.core import ActionRequest, Experience, Outcome, Split, UpdateOp
from lle.evidence import assess_experience
from lle.flywheel.evaluate import skill_rows, skills_hurt
from lle.flywheel.replay import SkillAwarePolicy, validate_skill
from lle.flywheel.report import skills_summary
from lle.governance import gates
from lle.governance.lineage import active_items
from lle.policies.scripted import ScriptedPolicy
from lle.runtime.harness import run_episode
from lle.store import Store
from lle.worlds.toy import KeysFamily, oracle_actions, oracle_policy

FAMILY = KeysFamily()


def train(seed: int):  # type: ignore[no-untyped-def]
    return FAMILY.small_world(Split.train, seed)


@pytest.fixture
def active(store: Store) -> tuple[SkillLibrary, Skill]:
    """`take_key_go` mined from six oracle successes, then activated by its A/B replay."""
    library = SkillLibrary(store)
    for seed in range(6):
        sw = train(seed)
        library.observe(run_episode(sw, oracle_policy(sw), store=store, assess=assess_experience))
    take = library.get("take_key_go")
    replay = validate_skill(library, take.item_id, [train(s) for s in range(10, 14)],
                            lambda sw: SkillAwarePolicy(oracle_actions(sw), [take]))
    assert replay.state is SkillState.active
    return library, library.get(take.item_id)


def play(library: SkillLibrary, skill: Skill, seeds: Sequence[int], arm: str | None, *, solve: bool,
         split: Split = Split.train) -> list[Experience]:
    """Episodes recorded in one arm: `with` offered the skill, `without` offered nothing; `solve=False` submits at
    once (fails)."""
    out = []
    for seed in seeds:
        sw = FAMILY.small_world(split, seed)
        offered = [skill] if arm == "with" else []
        plan = oracle_actions(sw) if solve else [ActionRequest(tool="submit")]
        policy = SkillAwarePolicy(plan, offered) if solve else ScriptedPolicy(plan)
        exp = run_episode(sw, policy, store=library.store, assess=assess_experience, skills=offered,
                          levers=Levers(skills_arm=arm))  # type: ignore[arg-type]
        assert exp.outcome is (Outcome.passed if solve else Outcome.failed)
        out.append(exp)
    return out


def test_a_skill_whose_episodes_do_worse_with_it_is_retired_with_its_figures(
        active: tuple[SkillLibrary, Skill]) -> None:
    library, take = active
    lineage, derived = list(take.item.experience_ids), [s for s in library.skills() if take.item_id in
                                                         s.item.derived_from]
    assert lineage and derived
    worse = play(library, take, range(20, 24), "with", solve=False)
    better = play(library, take, range(30, 34), "without", solve=True)
    use = skill_use.usefulness(library, take.item_id)
    assert (use.with_n, use.with_passed, use.without_n, use.without_passed) == (4, 0, 4, 4)
    assert use.decided and use.useless and use.hurts and use.diff == -1.0 and use.high <= 0
    assert set(use.with_ids) == {e.id for e in worse} and set(use.without_ids) == {e.id for e in better}
    # The replay's episodes (no arm) and those before the activation are in neither arm.
    assert not {*use.with_ids, *use.without_ids} & {*lineage, *library.store.list_updates(
        carrier="skills", op="activate")[0].experience_ids}

    (update,) = skill_use.retire_useless(library, "flywheel:test")
    assert update.op is UpdateOp.retire and update.item_id == take.item_id and update.actor == "flywheel:test"
    assert update.gate is not None and update.gate.name == "skills_usefulness" and not update.gate.passed
    assert update.gate.reasons[0].startswith("with 0/4, without 4/4: \u2212100.0 points (\u2212")
    assert sorted(update.experience_ids) == sorted(e.id for e in [*worse, *better])
    assert update.evidence_ids  # the hard evidence of both arms
    # Retired, not revoked: the item and its lineage stay as they were.
    again = library.get(take.item_id)
    assert again.state is SkillState.retired and library.offered(train(40)) == []
    assert again.item.experience_ids == lineage
    assert all(take.item_id in library.get(s.item_id).item.derived_from for s in derived)
    assert library.store.list_revocations() == [] and take.item_id in {i.id for i in library.store.items_by_id(
        [take.item_id])}
    assert skill_use.retire_useless(library, "flywheel:test") == []  # once: a retired skill is left alone
    # The report's rows: it hurt, and it was retired for its use.
    (row,) = skill_rows(library.store)
    assert (row["skill"], row["state"], row["source"], row["retired_for_use"], row["hurts"]) == (
        "take_key_go", "retired", "experience", True, True)
    assert row["with"] == "0/4" and row["without"] == "4/4" and row["ci95_points"][1] <= 0  # type: ignore[index]
    assert skills_hurt([row]) == (1, 1) and skills_summary([row]) == "skills that hurt: 1 of 1 (100 %)"


def test_a_skill_with_too_few_episodes_in_an_arm_is_not_retired(active: tuple[SkillLibrary, Skill]) -> None:
    library, take = active
    needed = gates.DEFAULT.skills_min_pairs
    play(library, take, range(20, 20 + needed), "with", solve=False)
    play(library, take, range(30, 30 + needed - 1), "without", solve=True)  # one short
    use = skill_use.usefulness(library, take)
    assert (use.with_n, use.without_n) == (needed, needed - 1) and use.high <= 0  # it looks bad, but too few
    assert not use.decided and not use.useless and not use.hurts
    assert skill_use.retire_useless(library, "flywheel:test") == []
    assert library.get(take.item_id).state is SkillState.active
    assert take.item_id in {i.id for i in active_items(library.store, "skills")}
    (row,) = skill_rows(library.store)
    assert row["decided"] is False and skills_hurt([row]) == (0, 0)
    assert skills_summary([row]) == "skills that hurt: 0 of 0 (\u2014)"


def test_held_out_episodes_never_count(active: tuple[SkillLibrary, Skill]) -> None:
    library, take = active
    play(library, take, range(20, 24), "with", solve=True)
    play(library, take, range(30, 34), "without", solve=True)
    before = skill_use.usefulness(library, take)
    assert (before.with_n, before.with_passed, before.without_n, before.without_passed) == (4, 4, 4, 4)
    # Dev and test episodes recorded in an arm (as no run records them) would make it look useless: they never count.
    for split in (Split.dev, Split.test):
        play(library, take, range(4), "with", solve=False, split=split)
        play(library, take, range(4, 8), "without", solve=True, split=split)
    # Nor do train episodes outside the estimate (no arm: a replay, a recipe's, an episode outside a run).
    play(library, take, range(50, 54), None, solve=False)
    assert skill_use.usefulness(library, take) == before
    assert skill_use.retire_useless(library, "flywheel:test") == []
    assert library.get(take.item_id).state is SkillState.active


def test_a_skill_never_active_has_no_estimate(store: Store) -> None:
    library = SkillLibrary(store)
    for seed in range(6):
        sw = train(seed)
        library.observe(run_episode(sw, oracle_policy(sw), store=store, assess=assess_experience))
    candidate = library.get("take_key_go")
    assert candidate.state is SkillState.candidate
    assert skill_use.usefulness(library, candidate) == Usefulness(needed=gates.DEFAULT.skills_min_pairs)
    assert skill_rows(store) == []  # never offered: nothing measured, nothing listed
