"""Program skills an extractor writes from one verified train success (`lle.flywheel.extractor`): what is shown to
it and how what it writes enters the library (a candidate, checked by execution before anyone is offered it).

    pending(library, world)        a program of the world in use or waiting: nothing new is written for it
    successes(library, world)      the successes shown: the latest stored, unrevoked, verified train ones,
                                   those that made the most calls first (a lucky one-call win shows no loop)
    propose(library, shown, ...)   a candidate of the world, its lineage the successes; the same program once

The check itself is the flywheel's skill replay, judged by `SkillLibrary.decide` (a program must pass at least half
of the fresh train small worlds itself and lose none the no-skill arm passed).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from lle.carriers.skill_mining import SkillDescriptor, SkillEvidence
from lle.carriers.skills import Skill, SkillLibrary, SkillState
from lle.core import (
    CarrierItem,
    CarrierKind,
    Experience,
    GateResult,
    Outcome,
    Scope,
    ScopeLevel,
    Split,
    Update,
    UpdateOp,
    VerificationLevel,
)
from lle.governance import gates
from lle.governance.lineage import admit_item
from lle.store import experiences


def pending(library: SkillLibrary, world: str) -> bool:
    """Whether a program skill of `world` is in use or waiting for its check (then nothing new is written)."""
    return any(s.descriptor.world == world and s.state in (SkillState.candidate, SkillState.validated,
                                                           SkillState.active) for s in library.skills())


def successes(library: SkillLibrary, world: str, k: int = 3) -> list[Experience]:
    """Up to `k` of the latest stored, unrevoked, verified train successes of `world` (of the mining window), those
    that made the most calls first, then the latest."""
    levels = [v.value for v in VerificationLevel if v.rank >= library.config.skills_min_level.rank]
    found = []
    for exp_id in experiences.latest(library.store, family=world.split("/", 1)[0], split=Split.train.value,
                                     outcome=Outcome.passed.value, verification=levels, limit=library.mining.window):
        exp = library.store.get_experience(exp_id)
        if exp.small_world.world == world and library.supports(exp) and any(s.executed.allowed for s in exp.steps):
            found.append(exp)
    found.sort(key=lambda e: -sum(s.executed.allowed for s in e.steps))  # stable: the latest first among equals
    return found[:k]


def propose(library: SkillLibrary, shown: Sequence[Experience], program: str, tools: Sequence[str], *,
            origin: str) -> Skill | None:
    """A program written from `shown` (verified train successes of one world) as a candidate of that world; None
    when the same program (by key) is already known there, in any state, or one of `shown` supports no skill."""
    if not shown or any(gates.held_out(e) is not None or not library.supports(e) for e in shown):
        return None
    ids = [e.id for e in shown]
    sw = shown[0].small_world
    name = "solve_" + re.sub(r"[^a-z0-9]+", "_", sw.world.split("/", 1)[-1].lower()).strip("_")[:40]
    desc = SkillDescriptor(name=name, family=sw.family, kind="program", program=program, tools=list(tools),
                           world=sw.world, evidence=SkillEvidence(
                               support=len(shown),
                               projects=sorted({f"{sw.family}/{e.small_world.project}" for e in shown}),
                               level=min((e.verification for e in shown), key=lambda v: v.rank).value,
                               experience_ids=ids, origin=origin)).finished()
    if any(s.descriptor.key == desc.key for s in library.skills(sw.family)):
        return None
    desc = desc.model_copy(update={"version": library.next_version(sw.family, name)})
    evidence_ids = library.hard_evidence(ids)
    gate = GateResult(name="skills_program", passed=True, reasons=[
        f"written by {origin} from the verified train successes {', '.join(ids)}; checked by execution before use"])
    item = CarrierItem(carrier=CarrierKind.skills, scope=Scope(level=ScopeLevel.family, family=sw.family),
                       content=desc.model_dump(mode="json"), experience_ids=ids, evidence_ids=evidence_ids)
    admit_item(library.store, item, Update(carrier=CarrierKind.skills, op=UpdateOp.propose, item_id=item.id,
                                           scope=item.scope, experience_ids=ids, evidence_ids=evidence_ids,
                                           gate=gate, actor=library.actor))
    return library.get(item.id)
