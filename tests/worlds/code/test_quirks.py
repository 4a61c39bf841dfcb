"""`code/quirks-v1`: each quirk is enforced by its project's tests and wrong in every other project."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from lle.core import ActionRequest, Experience, ScopeLevel, SmallWorld, Split
from lle.sandbox import bwrap_available
from lle.worlds.base import check_family, open_family
from lle.worlds.code.projects import DEFAULT_RULES, PROJECTS, render, rules_with_quirk_of
from lle.worlds.code.quirks import (
    HIDDEN_CONFIG,
    PROJECT_NAMES,
    QuirksFamily,
    make_task,
    reference_actions,
    solution_module,
    task_spec,
)
from lle.worlds.code.repo import verify

sandboxed = pytest.mark.skipif(not bwrap_available(), reason="bubblewrap is not installed (apt-get install bubblewrap)")
Play = Callable[[SmallWorld, list[ActionRequest]], Experience]
Outcome = Callable[[Experience], tuple[float, dict[str, Any]]]


def test_small_worlds_are_stable_and_splits_disjoint() -> None:
    family = QuirksFamily()
    firsts = [family.small_world(Split.train, s) for s in range(4)]
    assert [sw.project for sw in firsts] == ["ledger", "storefront", "gateway", "legacy"]
    # Computed once; a change in the task generator shows here.
    assert [(t.template.key, t.mode) for t in (make_task(sw.project, sw.seed) for sw in firsts)] == [
        ("shipping_cost", "write"), ("split_bill", "write"), ("tax_due", "fix"), ("shipping_cost", "fix")]
    assert firsts[0].id == "code/quirks-v1:ledger:train:0" and firsts[3].seed == 9
    assert make_task("gateway", 3).params["discount_rate"] == 20
    ids: set[str] = set()
    seeds: set[tuple[str, int]] = set()
    for split in Split:
        for s in range(30):
            sw = family.small_world(split, s)
            assert sw == family.small_world(split, s) and sw.split == split
            ids.add(sw.id)
            seeds.add((sw.project, sw.seed))
    assert len(ids) == len(seeds) == 90
    assert all(sw.inherits[0].level == ScopeLevel.project and sw.inherits[0].project == sw.project for sw in firsts)


def test_no_goal_appears_in_two_splits() -> None:
    family = QuirksFamily()
    goals = {split: {family.small_world(split, s, project=p).goal for p in PROJECT_NAMES for s in range(40)}
             for split in Split}
    assert all(len(g) > 60 for g in goals.values())
    assert not goals[Split.train] & goals[Split.dev] and not goals[Split.train] & goals[Split.test]
    assert not goals[Split.dev] & goals[Split.test]


@sandboxed
@pytest.mark.slow
def test_the_family_passes_check_family_for_every_project() -> None:
    family = open_family("code/quirks-v1")
    assert isinstance(family, QuirksFamily)
    report = check_family(family, seeds=(0, 1, 2, 3))
    assert [p for p in report.passed if p.startswith("world:")] == [f"world:{p}" for p in PROJECT_NAMES]


@sandboxed
@pytest.mark.parametrize("project", PROJECT_NAMES)
def test_reference_succeeds_and_doing_nothing_fails(project: str, play: Play, reward_and_info: Outcome) -> None:
    sw = QuirksFamily().small_world(Split.train, 4, project=project)
    reward, info = reward_and_info(play(sw, reference_actions(sw)))
    assert reward == 1.0 and info["success"] is True and info["detail"]["hidden_total"] == 4
    reward, info = reward_and_info(play(sw, [ActionRequest(tool="submit")]))
    assert reward == 0.0 and info["success"] is False


@sandboxed
@pytest.mark.slow
@pytest.mark.parametrize("project", PROJECT_NAMES)
def test_the_quirk_helps_at_home_and_is_wrong_elsewhere(project: str, repo_dir: Callable[..., Path]) -> None:
    task = make_task(project, 7)
    spec = task_spec(task)

    def passes(text: str) -> bool:
        return verify(spec, repo_dir(spec, {task.module_path: text})).passed

    assert passes(solution_module(task))
    assert passes(solution_module(task, replace(task.project.rules, helpers=False)))  # the rule, not the helper
    assert not passes(solution_module(task, DEFAULT_RULES)), "the project's tests must enforce its quirk"
    for other in PROJECT_NAMES:
        if other != project:
            assert not passes(solution_module(task, rules_with_quirk_of(other, project))), (other, project)


def test_the_visible_tests_show_each_quirk() -> None:
    shown = {p: task_spec(make_task(p, 1)) for p in PROJECT_NAMES}
    tests = {p: next(t for f, t in s.files.items() if f.startswith("tests/test_")) for p, s in shown.items()}
    assert "Decimal('" in tests["ledger"]
    assert '"STOREFRONT_DIGITS": "3"' in tests["storefront"] and '"STOREFRONT_DIGITS": "0"' in tests["storefront"]
    assert '"GATEWAY_CONFIG": "tests/fixtures/alt.json"' in tests["gateway"]
    legacy = make_task("legacy", 1)
    camel = legacy.template.key.split("_")[0] + "".join(w.capitalize() for w in legacy.template.key.split("_")[1:])
    assert f"from legacy.orders import {camel}" in tests["legacy"]
    for p, spec in shown.items():
        assert spec.editable == (f"{PROJECTS[p].package}/{PROJECTS[p].module}.py",)
        assert "CONVENTIONS.md" in spec.protected and "tests" in spec.protected


def test_no_observation_shows_the_gold_or_the_hidden_settings_over_many_seeds() -> None:
    family = QuirksFamily()
    for project in PROJECT_NAMES:
        for seed in range(25):
            sw = family.small_world(Split.train if seed % 2 else Split.dev, seed, project=project)
            task = make_task(project, sw.seed)
            gold = render(task.template, task.params, task.project.rules, task.project.package)[1]
            world = family.make_world(sw)
            first, info = world.reset(seed=sw.seed)
            texts = [first, sw.goal, json.dumps(info)]
            for path in world.step(ActionRequest(tool="list_files")).observation.splitlines():
                texts.append(world.step(ActionRequest(tool="read_file", args={"path": path})).observation)
            world.close()
            hidden = task_spec(task)
            assert not any(gold in t for t in texts), sw.id
            assert not any(HIDDEN_CONFIG in t or hidden.hidden[0].args in t for t in texts), sw.id


@sandboxed
def test_run_tests_and_submit_hide_the_hidden_cases(play: Play, reward_and_info: Outcome) -> None:
    sw = QuirksFamily().small_world(Split.dev, 2, project="gateway")
    task = make_task("gateway", sw.seed)
    exp = play(sw, [ActionRequest(tool="run_tests"), ActionRequest(tool="submit")])
    text = " ".join(s.effect.observation for s in exp.steps) + json.dumps(reward_and_info(exp)[1])
    spec = task_spec(task)
    assert not any(c.args in text or c.expected in text for c in spec.hidden if c.expected not in
                   {v.expected for v in spec.visible})
    assert HIDDEN_CONFIG not in text
    assert "FAIL v" in text
