"""Verifier cases on real episodes: a pass a person later fails becomes a case; approved, it catches the repeat."""

from __future__ import annotations

from pathlib import Path

import pytest

from lle import registry
from lle.carriers.verifier_cases import CaseVerifier, VerifierCases, catches, make_check
from lle.core import (
    ActionRequest,
    Change,
    Effect,
    Evidence,
    ExecutedAction,
    Experience,
    Feedback,
    Outcome,
    SmallWorld,
    Split,
    Step,
    Strength,
    UpdateOp,
)
from lle.errors import InvalidInputError
from lle.evidence import assess_experience
from lle.evidence.verifiers import human_verdict, task_scope
from lle.governance.lineage import revoke
from lle.policies.scripted import ScriptedPolicy
from lle.runtime.harness import run_episode
from lle.store import Store
from lle.worlds.math.items import entry
from lle.worlds.math.world import ArithFamily
from lle.worlds.toy.keys import KeysFamily, oracle_actions


def math_task() -> tuple[SmallWorld, str]:
    sw = ArithFamily().small_world(Split.train, 0)
    return sw, str(entry("basic_arithmetic", sw.seed)["answer"])


def submit(answer: str) -> list[ActionRequest]:
    return [ActionRequest(tool="submit", args={"answer": answer})]


def replay(sw: SmallWorld, actions: list[ActionRequest], *checks: object) -> Experience:
    """The same task played again, assessed with the given extra verifiers (no store: a fresh record)."""
    return assess_experience(run_episode(sw, ScriptedPolicy(actions)), extra=list(checks))


def test_a_contradicted_pass_becomes_a_case_that_runs_once_approved(store: Store,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    sw, answer = math_task()
    missed = submit(f"{answer}.0")  # the symbolic anchor accepts it; the reviewer wanted an integer
    exp = run_episode(sw, ScriptedPolicy(missed), store=store, assess=assess_experience)
    assert (exp.outcome, exp.verification.value) == (Outcome.passed, "hard_anchor")
    cases = VerifierCases(store)
    assert cases.observe(exp) == []  # nothing contradicts it yet: no case, no ledger row
    store.append_evidence(human_verdict(exp.id, sw, Outcome.failed, "the answer must be an integer", "reviewer"))
    [proposed] = cases.observe(exp)
    assert proposed.op is UpdateOp.propose and proposed.gate is not None and proposed.gate.passed
    assert cases.observe(exp) == [] and cases.scan() == []  # decided once
    item_id = str(proposed.item_id)
    item, state = cases.get(item_id)
    assert state == "candidate" and item.scope.family == "math" and item.experience_ids == [exp.id]
    assert isinstance(item.content, dict) and item.content["check"] == {
        "type": "submission", "tool": "submit", "args": {"answer": f"{answer}.0"}}

    verifier = CaseVerifier(store)
    assert replay(sw, missed, verifier).outcome is Outcome.passed  # a candidate never runs

    approved = cases.approve(item_id, actor="lead", reason="a real formatting bug the anchor misses")
    assert approved.op is UpdateOp.admit and approved.actor == "lead" and approved.gate is not None
    assert "approved by lead: a real formatting bug the anchor misses" in approved.gate.reasons
    assert cases.get(item_id)[1] == "active"
    caught = replay(sw, missed, verifier)
    assert caught.outcome is Outcome.failed
    [ev] = [e for e in caught.evidence if e.anchor == "verifier_case"]
    assert ev.strength is Strength.hard and isinstance(ev.detail, dict) and ev.detail["case"] == item_id
    assert replay(sw, submit(answer), verifier).outcome is Outcome.passed  # the right answer still passes
    monkeypatch.setenv("LLE_WORKSPACE", str(store.path.parent))  # built by id, as `assess` does: the workspace's
    assert replay(sw, missed, registry.make("verifier/cases-v1")).outcome is Outcome.failed

    revoke(store, exp.id, "the reviewer was wrong after all", "lead")
    assert cases.get(item_id)[1] == "revoked"
    assert replay(sw, missed, verifier).outcome is Outcome.passed  # a revoked case never runs


def test_only_a_stronger_anchor_against_a_hard_pass_makes_a_case(store: Store) -> None:
    sw, answer = math_task()
    cases = VerifierCases(store)
    exp = run_episode(sw, ScriptedPolicy(submit(answer)), store=store, assess=assess_experience)
    same_anchor = Evidence(experience_id=exp.id, anchor="symbolic", outcome=Outcome.failed, strength=Strength.hard,
                           scope=task_scope(sw))
    [update] = cases.observe(exp, [same_anchor])
    assert update.op is UpdateOp.reject and update.gate is not None and "no later hard fail" in update.gate.reasons[0]
    wrong = run_episode(sw, ScriptedPolicy(submit("-1")), store=store, assess=assess_experience)
    store.append_evidence(human_verdict(wrong.id, sw, Outcome.failed, "wrong", "reviewer"))
    [update] = cases.observe(wrong)
    assert update.op is UpdateOp.reject and update.gate is not None
    assert "recorded fail at hard_anchor" in update.gate.reasons[0]  # the verifiers did not miss it
    dev = ArithFamily().small_world(Split.dev, 0)
    held = run_episode(dev, ScriptedPolicy(submit(str(entry("basic_arithmetic", dev.seed)["answer"]))),
                       store=store, assess=assess_experience)
    store.append_evidence(human_verdict(held.id, dev, Outcome.failed, "wrong", "reviewer"))
    [update] = cases.observe(held)
    assert update.op is UpdateOp.reject and update.gate is not None and "dev task" in update.gate.reasons[0]
    assert cases.items() == {}


def test_a_person_decides_with_a_reason(store: Store) -> None:
    sw = KeysFamily().small_world(Split.train, 0)
    exp = run_episode(sw, ScriptedPolicy(oracle_actions(sw)), store=store, assess=assess_experience)
    store.append_evidence(human_verdict(exp.id, sw, Outcome.failed, "that vault was the decoy", "reviewer"))
    cases = VerifierCases(store)
    [proposed] = cases.scan()
    item_id = str(proposed.item_id)
    assert cases.get(item_id)[0].content["check"]["type"] == "final_state"  # type: ignore[index,call-overload]
    with pytest.raises(InvalidInputError, match="reason is empty"):
        cases.approve(item_id, actor="lead", reason=" ")
    rejected = cases.reject(item_id, actor="lead", reason="the vault was right")
    assert rejected.op is UpdateOp.reject and rejected.actor == "lead"
    assert cases.get(item_id)[1] == "rejected"
    with pytest.raises(InvalidInputError, match="is rejected"):
        cases.approve(item_id, actor="lead", reason="changed my mind")
    assert replay(sw, oracle_actions(sw), CaseVerifier(store)).outcome is Outcome.passed


def _step(i: int, tool: str, args: dict[str, object], changes: list[Change], end: bool = False) -> Step:
    feedback = [Feedback(source="w", kind="reward", content={"reward": 1.0, "terminated": True, "truncated": False,
                                                             "info": {"success": True}})] if end else []
    return Step(index=i, request=ActionRequest(tool=tool, args=args),
                executed=ExecutedAction(tool=tool, args=args, allowed=True),
                effect=Effect(changes=changes), feedback=feedback)


def test_checks_for_written_files_and_submissions() -> None:
    code = [_step(0, "write_file", {"path": "mod.py", "content": "x"},
                  [Change(kind="file", target="mod.py", before="sha256:a", after="sha256:b")]),
            _step(1, "submit", {}, [], end=True)]
    check = make_check(code)
    assert check == {"type": "files", "files": {"mod.py": "sha256:b"}}
    assert catches(check, code) is not None
    fixed = [code[0].model_copy(update={"effect": Effect(changes=[Change(kind="file", target="mod.py",
                                                                         after="sha256:c")])}), code[1]]
    assert catches(check, fixed) is None
    sql = [_step(0, "submit", {"sql": "SELECT  1;"}, [], end=True)]
    check = make_check(sql)
    assert check == {"type": "submission", "tool": "submit", "args": {"sql": "SELECT 1"}}
    assert catches(check, [_step(0, "submit", {"sql": "SELECT 1"}, [], end=True)]) is not None
    assert catches(check, [_step(0, "submit", {"sql": "SELECT 2"}, [], end=True)]) is None


def test_without_a_store_the_registered_verifier_finds_no_cases(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) \
        -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("LLE_WORKSPACE", raising=False)
    sw, answer = math_task()
    assert replay(sw, submit(answer), registry.make("verifier/cases-v1")).outcome is Outcome.passed
    assert not (tmp_path / ".lle").exists()  # looking for cases never creates a workspace
