"""Skill sharing on real parts: skills mined from real toy episodes, the real replay gate, real revocation.

A validator can hold a skill back and never move it forward; an importer's own replay gate decides
for it alone; revoking the source revokes every copy, wherever it was imported.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from lle.carriers.skill_mining import SkillCall, SkillDescriptor, SkillSlot
from lle.carriers.skills import SkillState
from lle.core import Outcome, Strength, VerificationLevel, utcnow
from lle.errors import InvalidInputError
from lle.evidence.evidence import decide
from lle.flywheel.replay import validate_skill
from lle.governance.lineage import active_items
from lle.policies.scripted import ScriptedPolicy
from lle.population.sharing import adopt, ask_judges, judge_pending, publish, reconcile, revoke_shared, verdict_for
from lle.population.types import Decision, Intent
from lle.population.validation import Validator
from lle.store import messages as rows
from population_factories import far, mine, near, skill_aware, toy_population, train

AGENTS = [{"name": "a", "model": "oracle"}, {"name": "b", "model": "oracle"}, {"name": "c", "model": "oracle"}]
JUDGE = {"name": "judge", "role": "validator", "model": "scripted:verdict.json"}


def judge(score: object, name: str = "judge") -> Validator:
    return Validator(name, ScriptedPolicy([{"tool": "verdict", "args": {"score": score, "reason": "looks general"}}],
                                          name="scripted-judge"))


def test_a_validator_cannot_promote(tmp_path: Path) -> None:
    with toy_population(tmp_path, [*AGENTS, JUDGE]) as pop:
        library = pop.library("a")
        mine(library, range(6))
        take = library.get("take_key_go")
        assert take.state is SkillState.candidate
        updates_before = pop.store_of("a").count("updates")
        t0 = utcnow()
        ask_judges(pop, "a", take.item_id, now=t0)
        [verdict] = judge_pending(pop, judge(1.0), now=t0)
        assert verdict.intent is Intent.verdict and verdict.payload["decision"] == "allow"
        assert judge_pending(pop, judge(1.0), now=t0) == []  # answered once
        # The verdict is soft model_judge evidence stamped with the validator's model.
        evidence = verdict.payload["evidence"]
        assert isinstance(evidence, dict) and evidence["anchor"] == "model_judge"
        assert evidence["strength"] == Strength.soft and evidence["detail"]["model"] == "scripted-judge"  # type: ignore[index]
        from lle.core import Evidence
        assert decide([Evidence.model_validate(evidence)])[1] is VerificationLevel.model_judge
        # "allow" moved nothing: the skill is still a candidate, no update was written, and it is not shared.
        assert library.get(take.item_id).state is SkillState.candidate
        assert pop.store_of("a").count("updates") == updates_before
        with pytest.raises(InvalidInputError, match="only an active skill"):
            publish(pop, "a", take.item_id, now=t0)
        # Its own replay gate activates it; then a block (or an undecided judge: delay) still stops the share.
        assert validate_skill(library, take.item_id, near(4, 10), skill_aware(library)).state is SkillState.active
        t1 = t0 + timedelta(seconds=1)
        ask_judges(pop, "a", take.item_id, now=t1)
        judge_pending(pop, judge(0.0), now=t1)
        assert verdict_for(pop, take.item_id) is Decision.block
        with pytest.raises(InvalidInputError, match="validators said block"):
            publish(pop, "a", take.item_id, now=t1)
        ask_judges(pop, "a", take.item_id, now=t1)
        judge_pending(pop, judge("yes"), now=t1)  # a malformed verdict decides nothing
        assert verdict_for(pop, take.item_id) is Decision.delay
        with pytest.raises(InvalidInputError, match="validators said delay"):
            publish(pop, "a", take.item_id, now=t1)
        ask_judges(pop, "a", take.item_id, now=t1)
        judge_pending(pop, judge(0.9), now=t1)
        share = publish(pop, "a", take.item_id, now=t1)
        # Even allowed and shared, the importer's copy is a candidate until its own replay gate.
        b = pop.library("b")
        copy = b.import_descriptor(share.payload["descriptor"], actor="b")  # type: ignore[arg-type]
        assert copy.state is SkillState.candidate and b.offered(train(20)) == []


def test_revoking_a_shared_skill_at_its_source_retires_every_imported_copy(tmp_path: Path) -> None:
    with toy_population(tmp_path, AGENTS) as pop:
        a = pop.library("a")
        mine(a, range(6))
        take = a.get("take_key_go")
        validate_skill(a, take.item_id, near(4, 10), skill_aware(a))
        t0 = utcnow()
        share = publish(pop, "a", take.item_id, now=t0)  # no validator in this population: nothing to wait for
        adoptions = {}
        for name, start in (("b", 100), ("c", 200)):
            inbox = pop.bus.inbox(name, now=t0, intents=[Intent.share])
            assert [m.id for m in inbox] == [share.id]
            adoptions[name] = adopt(pop, name, share, near(4, start), skill_aware(pop.library(name)), now=t0)
            assert adoptions[name].state is SkillState.active and adoptions[name].reply.intent is Intent.adopted
            assert pop.bus.inbox(name, now=t0, intents=[Intent.share]) == []  # acted on once
        copies = {n: ad.copy.item_id for n, ad in adoptions.items() if ad.copy}
        # Provenance crosses agents: the copy names its origin, the lineage rows name the source agent.
        assert all(pop.library(n).get(i).descriptor.evidence.origin == take.item_id for n, i in copies.items())
        assert {(r.agent, r.item_id, r.source_agent, r.source_item) for r in rows.copies(pop.store)} == {
            (n, i, "a", take.item_id) for n, i in copies.items()}
        assert [s.item_id for s in pop.library("b").offered(train(30))] == [copies["b"]]

        revocations = revoke_shared(pop, "a", take.item_id, "the key is not always next to the exit", "dana")
        assert [r.target for r in revocations] == [take.item_id, copies["b"], copies["c"]]
        assert a.get(take.item_id).state is SkillState.revoked
        for name, item_id in copies.items():
            assert pop.library(name).get(item_id).state is SkillState.revoked
            assert item_id not in {i.id for i in active_items(pop.store_of(name), "skills")}
            assert pop.library(name).offered(train(30)) == []
        [notice] = pop.bus.messages(intent=Intent.revoked)
        assert notice.skill_ids == [take.item_id, copies["b"], copies["c"]]
        assert reconcile(pop) == []  # nothing left to do


def test_a_source_revoked_through_its_experience_reaches_the_copies(tmp_path: Path) -> None:
    with toy_population(tmp_path, AGENTS[:2]) as pop:
        a = pop.library("a")
        mine(a, range(6))
        take = a.get("take_key_go")
        validate_skill(a, take.item_id, near(4, 10), skill_aware(a))
        share = publish(pop, "a", take.item_id)
        adoption = adopt(pop, "b", share, near(4, 100), skill_aware(pop.library("b")))
        assert adoption.copy is not None and adoption.state is SkillState.active
        from lle.governance.lineage import revoke
        revoke(pop.store_of("a"), take.item.experience_ids[0], "its world had a bug", "erin")  # not the skill itself
        assert a.get(take.item_id).state is SkillState.revoked
        [done] = reconcile(pop)
        assert done.target == adoption.copy.item_id
        assert pop.library("b").get(adoption.copy.item_id).state is SkillState.revoked


def test_an_imported_skill_that_regresses_its_importer_is_rejected_there_only(tmp_path: Path) -> None:
    with toy_population(tmp_path, AGENTS) as pop:
        a = pop.library("a")
        # It opens the door one move after taking the key: right where the key room is next to the door,
        # wrong everywhere else. A policy choosing it by its first call meets both.
        harmful = SkillDescriptor(name="take_key_go_open_door", family="toy", calls=[
            SkillCall(tool="take", args={"item": "key"}), SkillCall(tool="go", slots={"direction": "direction"}),
            SkillCall(tool="open", args={"target": "door"})],
            slots=[SkillSlot(name="direction", type="string")]).finished()
        source = a.import_descriptor(harmful.model_dump(mode="json"), actor="a")
        assert validate_skill(a, source.item_id, near(4), skill_aware(a, "first")).state is SkillState.active
        t0 = utcnow()
        share = publish(pop, "a", source.item_id, now=t0)
        at_b = adopt(pop, "b", share, far(4, 100), skill_aware(pop.library("b"), "first"), now=t0)
        at_c = adopt(pop, "c", share, near(4, 100), skill_aware(pop.library("c"), "first"), now=t0)
        assert at_b.state is SkillState.rejected and at_b.reply.intent is Intent.declined
        assert at_b.validation is not None and any("regression" in r for r in at_b.validation.gate.reasons)
        assert sum(p.passed_without for p in at_b.validation.pairs) == 4
        assert sum(p.passed_with for p in at_b.validation.pairs) == 0
        assert at_c.state is SkillState.active and at_c.reply.intent is Intent.adopted
        assert a.get(source.item_id).state is SkillState.active  # the source is untouched
        assert pop.library("b").offered(far(1, 300)[0]) == []
        with pytest.raises(InvalidInputError, match="expired"):
            adopt(pop, "b", share, far(4), skill_aware(pop.library("b")), now=t0 + timedelta(hours=2))
        assert {e.outcome for e in (pop.store_of("b").get_experience(i) for i in at_b.reply.experience_ids)} == {
            Outcome.passed, Outcome.failed}
