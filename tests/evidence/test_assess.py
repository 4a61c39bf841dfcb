"""Evidence on crafted trajectories and on the toy world: outcome, level, credit, attribution, failures."""

from __future__ import annotations

import time
from pathlib import Path

from pydantic import JsonValue

from lle.core import (
    ActionRequest,
    ActionStatus,
    Change,
    Effect,
    Evidence,
    ExecutedAction,
    Feedback,
    Outcome,
    Permissions,
    SmallWorld,
    Split,
    Step,
    Strength,
    VerificationLevel,
)
from lle.evidence import assess, assess_experience, decide, verifier
from lle.evidence.attribution import attribute
from lle.evidence.budget import VerificationBudget
from lle.evidence.credit import anchor_state_advantages, step_credit
from lle.evidence.verifiers import ModelJudge
from lle.policies.scripted import ScriptedPolicy
from lle.runtime.harness import run_episode
from lle.store import Store
from lle.worlds.toy.keys import KeysFamily, oracle_actions

SW = SmallWorld(id="code/demo-v1:train:0", world="code/demo-v1", family="code", project="demo", split=Split.train,
                seed=0, goal="Make the tests pass.", tools=["read_file", "write_file", "run_tests", "submit"],
                permissions=Permissions(protected=["tests/*"]))


def step(i: int, tool: str, args: dict[str, JsonValue] | None = None, *, observation: str = "ok",
         changes: list[Change] | None = None, info: dict[str, JsonValue] | None = None, terminated: bool = False,
         allowed: bool = True, error: str | None = None, refs: list[str] | None = None, expect: str = "") -> Step:
    feedback = []
    if info is not None or terminated:
        feedback.append(Feedback(source=SW.world, kind="reward", content={
            "reward": 1.0 if (info or {}).get("success") else 0.0, "terminated": terminated, "truncated": False,
            "info": info or {}}))
    return Step(index=i, context_refs=refs or [], request=ActionRequest(tool=tool, args=args or {}, expect=expect),
                executed=ExecutedAction(tool=tool, args=args or {}, allowed=allowed,
                                        denied_reason=None if allowed else "protected path",
                                        status=ActionStatus.ok if allowed else ActionStatus.denied),
                effect=Effect(observation=observation, changes=changes or [], error=error), feedback=feedback)


def fix_trajectory(success: bool = True) -> list[Step]:
    return [
        step(0, "read_file", {"path": "mod.py"}, observation="def f(x): return x - 1"),
        step(1, "run_tests", observation="1 failed", info={"progress": 0.0}),
        step(2, "write_file", {"path": "mod.py", "content": "def f(x):\n    return x + 1\n"},
             changes=[Change(kind="file", target="mod.py", before="sha256:a", after="sha256:b")]),
        step(3, "run_tests", observation="1 passed", info={"progress": 1.0}),
        step(4, "submit", info={"success": success, "relevant": ["mod.py"]}, terminated=True),
    ]


def test_good_and_bad_trajectories() -> None:
    good = assess(SW, fix_trajectory())
    assert (good.outcome, good.score) == (Outcome.passed, 1.0)
    # tests + compiler: two independent hard anchors
    assert good.verification is VerificationLevel.independent_anchors
    assert {e.anchor for e in good.evidence} >= {"test", "compiler", "rule"}
    assert all(e.experience_id == good.id for e in good.evidence)
    bad = assess(SW, fix_trajectory(success=False))
    assert bad.outcome is Outcome.failed and bad.score == 0.0
    assert bad.attribution is not None and bad.attribution["kind"] == "plan"


def test_self_report_and_judge_never_make_a_pass() -> None:
    trajectory = [step(0, "submit", observation="submitted")]  # no anchor result at all
    trajectory[0] = trajectory[0].model_copy(update={"request": ActionRequest(tool="submit", thought="solved it")})
    judge = ModelJudge(ScriptedPolicy([ActionRequest(tool="verdict", args={"score": 0.9, "reason": "looks right"})]))
    exp = assess(SW, trajectory, extra=[judge], purpose="dataset")
    assert exp.outcome is not Outcome.passed
    assert {e.anchor: e.strength for e in exp.evidence if e.anchor in ("model_judge", "self_report")} == {
        "model_judge": Strength.soft, "self_report": Strength.weak}
    out_of_range = ModelJudge(ScriptedPolicy([ActionRequest(tool="verdict", args={"score": 7, "reason": "!"})]))
    judged = assess(SW, trajectory, extra=[out_of_range], purpose="dataset")
    assert [e.outcome for e in judged.evidence if e.anchor == "model_judge"] == [Outcome.unknown]


def test_budget_skips_expensive_checks_and_says_so() -> None:
    judge = ModelJudge(ScriptedPolicy([ActionRequest(tool="verdict", args={"score": 1, "reason": "ok"})] * 3))
    budget = VerificationBudget(units=1)
    low = assess(SW, fix_trajectory(), extra=[judge], budget=budget, purpose="memory")
    high = assess(SW, fix_trajectory(), extra=[judge], budget=budget, purpose="dataset")
    spent = assess(SW, fix_trajectory(), extra=[judge], budget=budget, purpose="dataset")
    reasons = [[str(e.detail.get("reason")) for e in x.evidence if "verification_skipped" in e.risk_tags]  # type: ignore[union-attr]
               for x in (low, high, spent)]
    assert "only for memory" in reasons[0][0] and reasons[1] == [] and "budget" in reasons[2][0]
    assert [e.anchor for e in high.evidence if e.anchor == "model_judge"] == ["model_judge"]


@verifier("test/crashing-v1")
class Crashing:
    def verify(self, small_world: SmallWorld, trajectory: list[Step]) -> list[Evidence]:
        raise RuntimeError("disk on fire")


@verifier("test/slow-v1")
class Slow:
    def verify(self, small_world: SmallWorld, trajectory: list[Step]) -> list[Evidence]:
        time.sleep(3)
        return []


def test_crashing_or_slow_verifiers_give_unknown_and_the_experience_is_stored(tmp_path: Path) -> None:
    started = time.monotonic()
    exp = assess(SW, fix_trajectory(), extra=[Crashing(), Slow()], timeout_s=0.5)
    assert time.monotonic() - started < 3
    broken = [e for e in exp.evidence if "verifier_error" in e.risk_tags]
    assert [e.outcome for e in broken] == [Outcome.unknown, Outcome.unknown]
    assert "disk on fire" in str(broken[0].detail) and "timed out" in str(broken[1].detail)
    assert exp.outcome is Outcome.passed  # the anchors that did run still decide
    with Store(tmp_path / "lle.db") as db:
        db.append_experience(exp)
        assert db.get_experience(exp.id) == exp


def test_the_step_that_makes_the_tests_pass_has_the_highest_credit() -> None:
    exp = assess(SW, fix_trajectory())
    assert max(range(len(exp.credit)), key=exp.credit.__getitem__) == 2
    denied = step_credit([step(0, "write_file", {"path": "tests/t.py"}, allowed=False)], Outcome.failed)
    assert denied[0] < -1


def test_attribution_kinds() -> None:
    submit_fail = step(9, "submit", info={"success": False, "relevant": ["mod.py"]}, terminated=True)
    grounding = [step(0, "write_file", {"path": "tests/t.py"}, allowed=False),
                 step(1, "run_tests", error="runner crashed"), submit_fail]
    context = [step(0, "read_file", {"path": "mod.py"}),
               step(1, "write_file", {"path": "mod.py"}, error="edit did not apply", refs=["itm_rule1"]),
               step(2, "run_tests"), submit_fail]
    observation = [step(0, "write_file", {"path": "other.py", "content": "x = 1\n"}), step(1, "run_tests"),
                   submit_fail]
    plan = [step(0, "read_file", {"path": "mod.py"}), step(1, "write_file", {"path": "mod.py", "content": "y=2\n"},
            changes=[Change(kind="file", target="mod.py", before="a", after="b")]), submit_fail]
    kinds = {name: assess(SW, t).attribution for name, t in
             [("grounding", grounding), ("context", context), ("observation", observation), ("plan", plan)]}
    assert {name: a["kind"] for name, a in kinds.items() if a} == {n: n for n in kinds}
    assert kinds["context"]["items"] == ["itm_rule1"]  # type: ignore[index]
    assert kinds["observation"]["missed"] == ["mod.py"]  # type: ignore[index]
    scope = assess(SW, plan).evidence[0].scope
    disagree = [Evidence(experience_id="e", anchor=anchor, outcome=o, strength=Strength.hard, scope=scope)
                for anchor, o in (("test", Outcome.passed), ("human", Outcome.failed))]
    assert decide(disagree)[0] is Outcome.failed
    assert attribute(SW, plan, disagree, Outcome.failed)["kind"] == "evidence"  # type: ignore[index]


def test_world_model_calibration_is_evidence_about_the_model_not_the_task() -> None:
    good = step(0, "read_file", {"path": "mod.py"}, observation="def f(x): return x - 1",
                expect="def f that will return x")
    bad = step(1, "run_tests", observation="1 failed", expect="all green and passing")
    exp = assess(SW, [good, bad, step(2, "submit", info={"success": False}, terminated=True)])
    calib = {e.step: e.detail["calibration"] for e in exp.evidence if e.anchor == "world_model"}  # type: ignore[index]
    assert calib[0] > calib[1]
    assert exp.outcome is Outcome.failed


def test_toy_world_oracle_passes_and_wandering_fails_with_anchor_states() -> None:
    family = KeysFamily()
    sw = family.small_world(Split.train, 5)
    good = assess_experience(run_episode(sw, ScriptedPolicy(oracle_actions(sw))))
    assert (good.outcome, good.verification) == (Outcome.passed, VerificationLevel.hard_anchor)
    early = ScriptedPolicy([ActionRequest(tool="submit", thought="done")])
    bad = assess_experience(run_episode(sw, early))
    assert bad.outcome is Outcome.failed and bad.verification is VerificationLevel.hard_anchor
    adv = anchor_state_advantages([good, bad])
    # Both rollouts acted from the start state: the one that went on to succeed is the better choice there.
    assert adv[(good.id, 0)] > 0 > adv[(bad.id, 0)]
