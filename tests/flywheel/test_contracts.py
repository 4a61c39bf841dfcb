"""The small world's contracts in the flywheel: `lle` retrieval reads only what the small world `inherits`,
and a train batch is assessed within the run's verification budget (skips recorded on the experience)."""

from __future__ import annotations

from pathlib import Path

from lle.config import RunConfig
from lle.core import CarrierKind, Evidence, Outcome, Scope, ScopeLevel, SmallWorld, Split, Step, Strength
from lle.evidence import assess_experience, verifier
from lle.evidence.verifiers import evidence
from lle.flywheel import loop
from lle.flywheel.strategies import Retriever
from lle.governance.gates import covers, inherited
from lle.governance.hygiene import ContaminationIndex
from lle.policies.scripted import ScriptedPolicy
from lle.router.router import UpdateRouter
from lle.runtime.harness import run_episode
from lle.store import Store
from lle.worlds.toy.keys import KeysFamily, oracle_actions

JUDGE = "test/expensive-judge-v1"


@verifier(JUDGE, cost="expensive")
class ExpensiveJudge:
    """Stands for a model judge: soft, so it never changes an outcome; only whether it ran matters here."""

    def verify(self, small_world: SmallWorld, trajectory: list[Step]) -> list[Evidence]:
        return [evidence(self, small_world, anchor="model_judge", outcome=Outcome.passed, strength=Strength.soft)]


def test_an_inherited_scope_covers_the_scopes_inside_it() -> None:
    task = Scope(level=ScopeLevel.task, family="toy", project="a", task_id="t1")
    project = Scope(level=ScopeLevel.project, family="toy", project="a")
    family = Scope(level=ScopeLevel.family, family="toy")
    assert covers(Scope(level=ScopeLevel.global_), task) and covers(family, project) and covers(project, task)
    assert not covers(project, family)  # a project does not inherit its family's items
    assert not covers(Scope(level=ScopeLevel.project, family="toy", project="b"), task)
    assert not covers(Scope(level=ScopeLevel.family, family="sql"), project)
    sw = KeysFamily().small_world(Split.train, 0)
    assert inherited(sw, family)  # the default inherits everything
    assert not inherited(sw.model_copy(update={"inherits": []}), family)


def test_retrieval_reads_only_what_the_small_world_inherits(tmp_path: Path) -> None:
    keys = KeysFamily()
    db_path = tmp_path / "lle.db"
    with Store(db_path) as store:
        router = UpdateRouter(store, contamination=ContaminationIndex.from_registry(worlds=["toy/keys-v1"]))
        for seed in (0, 1):
            sw = keys.small_world(Split.train, seed)
            exp = store.append_experience(assess_experience(run_episode(sw, ScriptedPolicy(oracle_actions(sw)))))
            router.route(exp)
    sw = keys.small_world(Split.train, 2)

    def shown(**small_world: object) -> set[CarrierKind]:
        items = Retriever("lle", str(db_path)).find(sw.model_copy(update=small_world))
        return {i.carrier for i in items}

    assert shown() == {CarrierKind.memory}
    assert shown(inherits=[Scope(level=ScopeLevel.family, family="toy")]) == {CarrierKind.memory}
    assert shown(inherits=[Scope(level=ScopeLevel.project, family="toy", project="elsewhere")]) == set()
    assert shown(inherits=[]) == set()


def test_a_train_batch_is_assessed_within_the_verification_budget(tmp_path: Path) -> None:
    keys = KeysFamily()
    worlds = [keys.small_world(Split.train, s).model_copy(update={"verifiers": [JUDGE]}) for s in range(3)]

    def judged(budget: int | None, label: str) -> list[str]:
        """Per experience: `ran` when the judge ran, else the reason its skip was recorded with."""
        config = RunConfig(suite="toy", model="oracle", strategies=["lle"], workers=1, eval_tasks=1,
                           verification_budget=budget)
        flywheel = loop.Flywheel(config, tmp_path)
        out = []
        for exp in flywheel.phase("lle", loop.strategy_db(flywheel.folder, "lle"), label, worlds):
            assert exp.outcome is Outcome.passed  # a skip leaves the outcome to the cheap anchors
            skips = [e for e in exp.evidence if "verification_skipped" in e.risk_tags]
            ran = [e for e in exp.evidence if e.anchor == "model_judge"]
            assert len(skips) + len(ran) == 1 and bool(skips) == ("verification_skipped" in exp.risk_tags)
            out.append("ran" if ran else str(skips[0].detail["reason"]))  # type: ignore[index, call-overload]
        return out

    spent = "skipped: the round's budget of 1 expensive checks is spent"
    assert judged(1, "r1/train") == ["ran", spent, spent]
    assert judged(1, "r1/eval") == ["ran"] * 3  # held-out batches are never budgeted
    assert judged(None, "r1/train") == ["ran"] * 3  # the default: every verifier runs
