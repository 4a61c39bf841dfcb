"""Math worlds over reasoning-gym: splits by question text, the calculator tool, the symbolic anchor."""

from __future__ import annotations

import json
import re
import threading
from typing import Any

import pytest

from lle import registry
from lle.core import ActionRequest, Experience, Split
from lle.policies.scripted import ScriptedPolicy
from lle.runtime.harness import run_episode
from lle.worlds.base import check_family, open_family, split_of
from lle.worlds.math import AnchorResult, MathFamily, reference_actions, verify
from lle.worlds.math.anchor import screen
from lle.worlds.math.items import SPLIT_SALT, entry, normalize, split_index

IDS = {"math/arith-v1": "basic_arithmetic", "math/equations-v1": "simple_equations", "math/gsm-v1": "gsm_symbolic"}


def _family(world_id: str) -> MathFamily:
    family = open_family(world_id)
    assert isinstance(family, MathFamily)
    return family


def _final(exp: Experience) -> dict[str, Any]:
    signal = next(fb.content for fb in exp.steps[-1].feedback if fb.kind == "reward")
    assert isinstance(signal, dict)
    return signal


@pytest.mark.parametrize("world_id", sorted(IDS))
def test_every_dataset_passes_check_family(world_id: str) -> None:
    report = check_family(_family(world_id))
    assert {"family-determinism", "family-splits", "family-variety", f"world:{IDS[world_id]}"} <= set(report.passed)


def test_one_registered_world_per_dataset() -> None:
    assert set(IDS) <= set(registry.ids("math/"))
    for world_id, dataset in IDS.items():
        sw = _family(world_id).small_world(Split.train, 0)
        assert sw.project == dataset and sw.family == "math" and sw.world == world_id
        assert sw.tools == ["calculate", "submit"]


@pytest.mark.parametrize("world_id", sorted(IDS))
def test_reference_solution_succeeds_and_doing_nothing_scores_zero(world_id: str) -> None:
    family = _family(world_id)
    for split in Split:
        for seed in range(3):
            sw = family.small_world(split, seed)
            final = _final(run_episode(sw, ScriptedPolicy(reference_actions(sw))))
            assert final["reward"] == 1.0 and final["terminated"] is True
            info = final["info"]
            assert isinstance(info, dict) and info["success"] is True and info["anchor"] == "symbolic"
            # Both pieces of evidence are reported; success follows math-verify.
            assert info["detail"]["math_verify"] is True and info["detail"]["reasoning_gym_score"] == 1.0
            empty = _final(run_episode(sw, ScriptedPolicy([ActionRequest(tool="submit", args={"answer": ""})])))
            assert empty["reward"] == 0.0
            assert isinstance(empty["info"], dict) and empty["info"]["success"] is False


def test_the_calculator_tool_computes_the_arithmetic_items() -> None:
    family = _family("math/arith-v1")
    for seed in range(10):
        sw = family.small_world(Split.train, seed)
        world = family.make_world(sw)
        world.reset(seed=sw.seed)
        item = entry("basic_arithmetic", sw.seed)
        shown = world.step(ActionRequest(tool="calculate", args={"expression": item["metadata"]["expression"]}))
        value = shown.observation.rsplit("= ", 1)[1]
        assert float(value) == float(item["answer"]) and shown.reward == 0.0 and not shown.terminated
        assert world.state() == {"calculations": 1, "submitted": False}
        refused = world.step(ActionRequest(tool="calculate", args={"expression": "__import__('os').getcwd()"}))
        assert refused.observation.startswith("error: only these functions") and not refused.terminated


def test_the_anchor_accepts_equivalent_forms_and_rejects_wrong_ones() -> None:
    sw = _family("math/equations-v1").small_world(Split.dev, 0)
    gold = str(entry("simple_equations", sw.seed)["answer"])
    var = re.search(r"(?:for|of) ([a-z])\b", sw.goal)
    forms = [gold, f"{gold}.0", f"${gold}$", f"\\boxed{{{gold}}}", f"The answer is {gold}."]
    if var:
        forms.append(f"{var.group(1)} = {gold}")
    for form in forms:
        result = verify(sw, form)
        assert isinstance(result, AnchorResult) and result.passed, form
    wrong = str(int(gold) + 1)
    for answer in [wrong, "", "   ", "no idea", f"{gold} ** 1", f"{gold}!", "\\binom{10}{3}", "1" * 101]:
        result = verify(sw, answer)
        assert not result.passed and result.info()["success"] is False, answer
    assert verify(sw, "").reason == "empty answer"


def test_the_anchor_screen_keeps_sympy_bounded() -> None:
    assert screen("42") is None and screen("\\frac{1}{2}") is None and screen("x = -3.5") is None
    for answer in ["10^10^10", "9**9**9", "100000!", "factorial(100000)", "\\binom{99999999}{4999999}", "a_1"]:
        assert screen(answer) is not None, answer


def test_an_answer_that_is_still_an_operation_is_not_the_final_value() -> None:
    # "Calculate 9 + 3." answered "9 + 3" passed before: the anchor evaluated it. A skill mined from such a success
    # could not read its answer from the calculator's result (it was not the value submitted).
    for answer in ["9 + 3", "8/2", "7 - 3", "3 - -2", "(2)+(3)"]:
        assert "still an expression" in str(screen(answer)), answer
    for answer in ["-3", "4.0", "12", "1e-5", "1,000", "x = -3.5"]:
        assert screen(answer) is None, answer
    sw = _family("math/arith-v1").small_world(Split.train, 0, level=0)
    assert not verify(sw, sw.goal.split("Calculate ", 1)[1].split(".", 1)[0]).passed


def test_the_anchor_runs_off_the_main_thread() -> None:
    # math-verify's own timeout needs SIGALRM (main thread only); parallel runners use threads.
    sw = _family("math/gsm-v1").small_world(Split.test, 1)
    gold = str(entry("gsm_symbolic", sw.seed)["answer"])
    results: list[AnchorResult] = []
    thread = threading.Thread(target=lambda: results.extend([verify(sw, gold), verify(sw, gold + "1")]))
    thread.start()
    thread.join(30)
    assert [r.passed for r in results] == [True, False]


def test_no_observation_or_info_leaks_the_gold() -> None:
    for world_id, dataset in IDS.items():
        family = _family(world_id)
        for split in Split:
            for seed in range(10):
                sw = family.small_world(split, seed)
                item = entry(dataset, sw.seed)
                gold = str(item["answer"])
                dumped = sw.model_dump_json()
                assert '"answer"' not in dumped and "metadata" not in dumped
                world = family.make_world(sw)
                obs, info = world.reset(seed=sw.seed)
                # The observation is the question plus fixed instructions, nothing from the private entry.
                assert obs.startswith(item["question"]) and "answer_cot" not in obs
                cot = item["metadata"].get("answer_cot")
                if isinstance(cot, str):
                    assert cot not in obs and cot not in sw.goal
                assert set(info) == {"dataset", "index"}
                calc = world.step(ActionRequest(tool="calculate", args={"expression": "0.5 + 0.25"}))
                wrong = world.step(ActionRequest(tool="submit", args={"answer": "-987654321"}))
                for text in [calc.observation, wrong.observation, json.dumps(calc.info), json.dumps(wrong.info)]:
                    assert not re.search(rf"(?<![\d.]){re.escape(gold)}(?![\d.])", text), (sw.id, gold, text)
                assert wrong.reward == 0.0 and wrong.info["success"] is False


def test_splits_are_disjoint_by_question_text_and_stable() -> None:
    # Computed once; a change of the split function, salt, dataset seed or pool size must fail here.
    assert [split_index("basic_arithmetic", Split.test, i) for i in range(5)] == [0, 14, 16, 17, 22]
    assert [split_index("simple_equations", Split.dev, i) for i in range(5)] == [8, 14, 28, 32, 35]
    assert [split_index("gsm_symbolic", Split.train, i) for i in range(5)] == [0, 1, 2, 3, 6]
    assert _family("math/gsm-v1").small_world(Split.test, 2).seed == 22
    for dataset in IDS.values():
        texts = {s: [normalize(entry(dataset, split_index(dataset, s, i))["question"]) for i in range(40)]
                 for s in Split}
        for s, found in texts.items():
            assert len(set(found)) == len(found)  # no question twice within a split
            # The split is a function of the text alone.
            assert all(split_of(f"{SPLIT_SALT}:{normalize(t)}") is s for t in found)
        assert not (set(texts[Split.train]) & set(texts[Split.dev]))
        assert not (set(texts[Split.train]) & set(texts[Split.test]))
        assert not (set(texts[Split.dev]) & set(texts[Split.test]))
