"""`code/humaneval-v1`: splits, conformance, the reference succeeds, doing nothing fails, no gold leaks."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from lle.core import ActionRequest, Experience, SmallWorld, Split
from lle.sandbox import bwrap_available
from lle.worlds.base import check_family, open_family
from lle.worlds.code.bugs import inject
from lle.worlds.code.catalog import load_catalog, load_problems
from lle.worlds.code.humaneval import (
    HumanEvalFamily,
    counts,
    decode_world_seed,
    module_path,
    problem_spec,
    problem_splits,
    reference_actions,
    spec_for,
    task_of,
)
from lle.worlds.code.repo import verify

sandboxed = pytest.mark.skipif(not bwrap_available(), reason="bubblewrap is not installed (apt-get install bubblewrap)")
Play = Callable[[SmallWorld, list[ActionRequest]], Experience]
Outcome = Callable[[Experience], tuple[float, dict[str, Any]]]


def test_problems_split_100_32_32_by_a_stable_hash() -> None:
    splits = problem_splits()
    assert len(splits) == 164
    by_split = {s: sorted((t for t, v in splits.items() if v == s), key=lambda t: int(t.split("/")[1])) for s in Split}
    assert {s: len(v) for s, v in by_split.items()} == {Split.train: 100, Split.dev: 32, Split.test: 32}
    # Computed once; a change of the split function (or the dataset) shows here.
    assert by_split[Split.train][:4] == ["HumanEval/0", "HumanEval/1", "HumanEval/2", "HumanEval/3"]
    assert by_split[Split.dev][:4] == ["HumanEval/10", "HumanEval/12", "HumanEval/13", "HumanEval/21"]
    assert by_split[Split.test][:4] == ["HumanEval/9", "HumanEval/28", "HumanEval/36", "HumanEval/37"]
    assert [task_of(Split.train, i) for i in range(3)] == [
        ("HumanEval/56", "wrong_comparison", 0), ("HumanEval/138", "dropped_edge_case", 0),
        ("HumanEval/140", "swapped_arguments", 0)]
    assert task_of(Split.test, 1) == ("HumanEval/36", "off_by_one", 1)


def test_small_worlds_are_deterministic_and_never_cross_splits() -> None:
    family = HumanEvalFamily()
    seen: dict[str, Split] = {}
    for split in Split:
        for seed in range(40):
            sw = family.small_world(split, seed)
            assert sw == family.small_world(split, seed)
            assert decode_world_seed(sw.seed) == (split, seed)
            problem = task_of(split, seed)[0]
            assert problem_splits()[problem] == split
            assert seen.setdefault(problem, split) == split
    assert family.small_world(Split.train, 0).id == "code/humaneval-v1:humaneval:train:0"
    goals = {split: {family.small_world(split, s).goal for s in range(200)} for split in Split}
    assert not goals[Split.train] & (goals[Split.dev] | goals[Split.test]) and not goals[Split.dev] & goals[Split.test]
    assert 'Its docstring begins: "You are given 2 words."' in family.small_world(Split.train, 3).goal
    c = counts()
    assert c["train"]["usable_problems"] >= 85 and c["dev"]["tasks"] > 300 and c["test"]["tasks"] > 300


@sandboxed
def test_the_family_passes_check_family_through_the_registry() -> None:
    family = open_family("code/humaneval-v1")
    assert isinstance(family, HumanEvalFamily)
    report = check_family(family, seeds=(0, 1))
    assert "family-splits" in report.passed and "world:humaneval" in report.passed and report.steps_probed >= 6


@sandboxed
@pytest.mark.parametrize(("split", "seed"), [(Split.train, 0), (Split.train, 5), (Split.dev, 3)])
def test_the_reference_succeeds_through_the_harness(split: Split, seed: int, play: Play,
                                                   reward_and_info: Outcome) -> None:
    sw = HumanEvalFamily().small_world(split, seed)
    exp = play(sw, reference_actions(sw))
    reward, info = reward_and_info(exp)
    assert reward == 1.0 and info["success"] is True
    assert info["anchor"] == "test" and info["detail"]["checker"] == "sandboxed-tests"
    assert info["detail"]["hidden_total"] >= 2 and info["detail"]["hidden_passed"] == info["detail"]["hidden_total"]
    run_tests = next(s for s in exp.steps if s.request.tool == "run_tests")
    assert run_tests.effect.observation.startswith("run_tests: ") and " 0 failed" in run_tests.effect.observation
    assert [c.target for c in exp.steps[1].effect.changes] == [f"src/{run_tests_name(sw)}.py"]


def run_tests_name(sw: SmallWorld) -> str:
    return load_problems()[task_of(*decode_world_seed(sw.seed))[0]].entry_point


@sandboxed
def test_doing_nothing_scores_zero(play: Play, reward_and_info: Outcome) -> None:
    for seed in (0, 1):
        sw = HumanEvalFamily().small_world(Split.train, seed)
        exp = play(sw, [ActionRequest(tool="run_tests"), ActionRequest(tool="submit")])
        reward, info = reward_and_info(exp)
        assert reward == 0.0 and info["success"] is False and info["detail"]["completed"] is True
        assert "failed" in exp.steps[0].effect.observation and "FAIL v" in exp.steps[0].effect.observation


def test_no_observation_shows_the_canonical_solution_over_many_seeds(play: Play) -> None:
    # Reading every file is all an agent can do without the sandbox; none of it may hold the gold.
    family = HumanEvalFamily()
    problems = load_problems()
    for split in (Split.train, Split.dev, Split.test):
        for seed in range(0, 60, 3):
            sw = family.small_world(split, seed)
            problem = problems[task_of(split, seed)[0]]
            world = family.make_world(sw)
            first, info = world.reset(seed=sw.seed)
            texts = [first, sw.goal, repr(info)]
            for path in world.step(ActionRequest(tool="list_files")).observation.splitlines():
                texts.append(world.step(ActionRequest(tool="read_file", args={"path": path})).observation)
            world.close()
            body = problem.canonical_solution.strip()
            assert not any(body in t or problem.source in t for t in texts), sw.id


@sandboxed
def test_tests_and_submit_never_show_hidden_cases_or_the_gold(play: Play, reward_and_info: Outcome) -> None:
    catalog = load_catalog()["problems"]
    problems = load_problems()
    for seed in (0, 3):
        sw = HumanEvalFamily().small_world(Split.dev, seed)
        task_id = task_of(Split.dev, seed)[0]
        problem = problems[task_id]
        exp = play(sw, [ActionRequest(tool="run_tests"), ActionRequest(tool="submit")])
        shown = " ".join([s.effect.observation for s in exp.steps] + [repr(reward_and_info(exp)[1])])
        hidden_args = [a for a, _ in catalog[task_id]["hidden"] if len(a) > 12]
        visible_args = {a for a, _ in catalog[task_id]["visible"]}
        assert len(set(hidden_args) - visible_args) >= 5
        assert not any(a in shown for a in hidden_args if a not in visible_args), sw.id
        assert problem.canonical_solution.strip() not in shown


@sandboxed
def test_catalogued_bugs_fail_the_visible_tests_and_the_canonical_passes(repo_dir: Callable[..., Path]) -> None:
    catalog = load_catalog()["problems"]
    problems = load_problems()
    for task_id, family in [("HumanEval/0", "wrong_comparison"), ("HumanEval/56", "wrong_comparison"),
                            ("HumanEval/140", "swapped_arguments")]:
        problem, entry = problems[task_id], catalog[task_id]
        site = entry["injections"][family][0][0]
        injection = inject(problem.source, problem.entry_point, family, site)
        assert injection is not None
        spec = problem_spec(problem, injection.source, [(a, e) for a, e in entry["visible"]],
                            [(a, e) for a, e in entry["hidden"]])
        buggy = verify(spec, repo_dir(spec))
        assert buggy.completed and not buggy.passed and buggy.visible_passed < len(buggy.visible)
        fixed = verify(spec, repo_dir(spec, {module_path(problem): problem.source}))
        assert fixed.passed and fixed.hidden_passed == fixed.hidden_total > 0


@sandboxed
def test_the_anchor_can_be_called_directly_on_a_workdir() -> None:
    family = HumanEvalFamily()
    sw = family.small_world(Split.train, 2)
    world = family.make_world(sw)
    world.reset(seed=sw.seed)
    assert world.workdir is not None
    spec = spec_for(sw)
    assert spec == world.spec
    before = verify(spec, world.workdir)
    write = reference_actions(sw)[1]
    world.step(write)
    after = world.verify()
    world.close()
    assert not before.passed and before.ran and after.passed
    assert after.info()["detail"]["checker"] == "sandboxed-tests" and after.detail["failures"] == []
