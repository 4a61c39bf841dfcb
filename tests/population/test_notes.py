"""Rules and lessons shared like skills: judged by validators (who can only hold them back), imported behind
the importer's own gate, and retired everywhere when revoked at their source. Real stores, real toy episodes."""

from __future__ import annotations

from pathlib import Path

import pytest

from lle.carriers.memory import MemoryCarrier, memory_item_from
from lle.carriers.rules import RuleBook, project_scope, rule_key
from lle.core import CarrierItem, CarrierKind, Evidence, Experience, GateResult, Update, UpdateOp, VerificationLevel
from lle.errors import InvalidInputError
from lle.evidence import assess_experience
from lle.evidence.evidence import decide
from lle.governance.lineage import admit_item, denylist
from lle.policies.scripted import ScriptedPolicy
from lle.population import notes
from lle.population.population import Population
from lle.population.sharing import judge_pending, reconcile, revoke_shared, verdict_for
from lle.population.types import Decision, Intent, PopulationConfig
from lle.population.validation import Validator
from lle.runtime.harness import run_episode
from lle.store import Store
from lle.worlds.toy import oracle_policy
from population_factories import toy_population, train

AGENTS = [{"name": "a", "model": "oracle"}, {"name": "b", "model": "oracle"}]
JUDGE = {"name": "judge", "role": "validator", "model": "scripted:verdict.json"}
SHARED = {"shared": ["skills", "rules", "lessons"]}


def judge(score: object) -> Validator:
    return Validator("judge", ScriptedPolicy([{"tool": "verdict", "args": {"score": score, "reason": "general"}}],
                                             name="scripted-judge"))


def solved(store: Store, seed: int) -> Experience:
    sw = train(seed)
    return run_episode(sw, oracle_policy(sw), store=store, assess=assess_experience)


def rule(store: Store, exp: Experience, text: str, *, active: bool) -> CarrierItem:
    """A rule of `exp`'s project: admitted through a passed rules gate, or left a candidate."""
    item = CarrierItem(carrier=CarrierKind.rules, scope=project_scope(exp), experience_ids=[exp.id],
                       content={"text": text, "key": rule_key(text)})
    op = UpdateOp.admit if active else UpdateOp.propose
    gate = GateResult(name="rules", passed=True, reasons=["reproduced"]) if active else None
    admit_item(store, item, Update(carrier=CarrierKind.rules, op=op, item_id=item.id, scope=item.scope,
                                   experience_ids=[exp.id], gate=gate, actor="a"))
    return item


def test_a_validator_cannot_promote_a_rule(tmp_path: Path) -> None:
    with toy_population(tmp_path, [*AGENTS, JUDGE], **SHARED) as pop:
        store = pop.store_of("a")
        exp = solved(store, 0)
        draft = rule(store, exp, "Take the key before the door.", active=False)
        updates = store.count("updates")
        notes.ask_judges(pop, "a", draft.id)
        [verdict] = judge_pending(pop, judge(1.0))
        assert verdict.payload["decision"] == "allow" and verdict.item_ids == [draft.id]
        evidence = Evidence.model_validate(verdict.payload["evidence"])
        assert evidence.anchor == "model_judge" and evidence.detail["model"] == "scripted-judge"  # type: ignore[index]
        assert decide([evidence])[1] is VerificationLevel.model_judge
        # "allow" wrote nothing and moved nothing: the rule is still a candidate, and a candidate is not shared.
        assert store.count("updates") == updates and RuleBook(store).items()[draft.id][1] == "candidate"
        with pytest.raises(InvalidInputError, match="only an active rule"):
            notes.publish(pop, "a", draft.id)
        # An active rule: a block or an undecided judge holds it back.
        active = rule(store, exp, "Doors open only with their key.", active=True)
        notes.ask_judges(pop, "a", active.id)
        judge_pending(pop, judge(0.0))
        assert verdict_for(pop, active.id) is Decision.block
        with pytest.raises(InvalidInputError, match="validators said block"):
            notes.publish(pop, "a", active.id)
        notes.ask_judges(pop, "a", active.id)
        judge_pending(pop, judge("yes"))
        with pytest.raises(InvalidInputError, match="validators said delay"):
            notes.publish(pop, "a", active.id)
        notes.ask_judges(pop, "a", active.id)
        judge_pending(pop, judge(0.9))
        share = notes.publish(pop, "a", active.id)
        # Allowed and shared, the importer's copy is still a candidate: only its own rules gate admits it.
        [offer] = notes.shares_for(pop, "b", now=share.created_at)
        reply = notes.adopt(pop, "b", offer)
        assert reply.intent is Intent.adopted and reply.payload["state"] == "candidate"
        copy = reply.item_ids[1]
        book = RuleBook(pop.store_of("b"))
        assert book.items()[copy][1] == "candidate" and book.retrieve("door", active.scope) == []


def test_revoking_a_shared_rule_at_its_source_retires_the_copy(tmp_path: Path) -> None:
    with toy_population(tmp_path, AGENTS, **SHARED) as pop:
        exp = solved(pop.store_of("a"), 0)
        source = rule(pop.store_of("a"), exp, "Doors open only with their key.", active=True)
        reply = notes.adopt(pop, "b", notes.publish(pop, "a", source.id))
        copy = reply.item_ids[1]
        assert RuleBook(pop.store_of("b")).items()[copy][1] == "candidate"
        revocations = revoke_shared(pop, "a", source.id, "wrong in the cellar", "dana")
        assert [r.target for r in revocations] == [source.id, copy]
        assert RuleBook(pop.store_of("b")).items()[copy][1] == "revoked"
        [message] = pop.bus.messages(intent=Intent.revoked)
        assert message.item_ids == [source.id, copy] and message.skill_ids == []
        assert reconcile(pop) == []  # nothing left to retire


def test_a_lesson_is_imported_only_beside_a_success_of_the_importers_own(tmp_path: Path) -> None:
    with toy_population(tmp_path, AGENTS, **SHARED) as pop:
        mine = solved(pop.store_of("a"), 0)
        memory = memory_item_from(mine)
        MemoryCarrier(pop.store_of("a")).admit(memory, Update(
            carrier=CarrierKind.memory, op=UpdateOp.admit, item_id=memory.id, scope=memory.scope,
            experience_ids=[mine.id], gate=GateResult(name="memory", passed=True, reasons=["ok"]), actor="a"))
        share = notes.publish(pop, "a", memory.id)
        declined = notes.adopt(pop, "b", share)
        assert declined.intent is Intent.declined and "no train success of its own" in str(declined.payload["reasons"])
        # Once b solved a task of that project itself, a shared lesson is admitted, quoted, and derives from it.
        project = mine.small_world.project
        own = solved(pop.store_of("b"), next(s for s in range(1, 40) if train(s).project == project))
        adopted = notes.adopt(pop, "b", notes.publish(pop, "a", memory.id))
        assert adopted.intent is Intent.adopted and adopted.payload["state"] == "active"
        [copy] = pop.store_of("b").items_by_id([adopted.item_ids[1]])
        assert copy.experience_ids == [own.id] and str(copy.content["lesson"]).startswith("<<untrusted")  # type: ignore[index]
        revoke_shared(pop, "a", memory.id, "a bad lesson", "dana")
        assert denylist(pop.store_of("b")).blocks_item(copy) is not None


def test_rules_are_not_shared_unless_the_population_says_so(tmp_path: Path) -> None:
    config = PopulationConfig.model_validate({"name": "toy", "world": "toy/keys-v1", "agents": AGENTS})
    with Population(config, tmp_path / "pop") as pop:
        exp = solved(pop.store_of("a"), 0)
        source = rule(pop.store_of("a"), exp, "Doors open only with their key.", active=True)
        with pytest.raises(InvalidInputError, match="shares no rules"):
            notes.publish(pop, "a", source.id)


def test_a_population_run_shares_lessons_through_the_validator(tmp_path: Path) -> None:
    import json

    from lle.population.run import run_population

    verdicts = tmp_path / "verdict.json"
    verdicts.write_text(json.dumps([{"tool": "verdict", "args": {"score": 1.0, "reason": "general"}}] * 50))
    judge_agent = {"name": "judge", "role": "validator", "model": f"scripted:{verdicts}"}
    with toy_population(tmp_path, [*AGENTS, judge_agent], train=2, max_steps=20, shared=["lessons"]) as pop:
        [round_] = run_population(pop)["rounds"]
        counts = round_["sharing"]
        # Each explorer routed its own episodes, offered its lessons, the judge allowed them, the other took them
        # beside its own successes (the oracle solves every toy task).
        assert counts["notes_asked"] == counts["notes_verdicts"] == counts["notes_shared"] == 4
        assert counts["notes_adopted"] == 4
        judged = [m for m in pop.bus.messages(intent=Intent.verdict) if m.item_ids]
        assert len(judged) == 4 and all(m.payload["evidence"]["anchor"] == "model_judge"  # type: ignore[index]
                                        for m in judged)
