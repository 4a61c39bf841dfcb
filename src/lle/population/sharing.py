"""Skill sharing across agents: judged, offered, replayed by each importer, revoked together.

    ask_judges(pop, owner, skill, now)         a `judge` message to the validators
    judge_pending(pop, validator, name, now)   each validator answers (`verdict`, model_judge evidence)
    publish(pop, owner, skill, now)            a `share` message with the skill's descriptor, only if the
                                               skill is active in the owner's store (its own replay gate)
                                               and no validator blocked or delayed it
    adopt(pop, agent, share, train worlds, policy factory, now)
                                               import as a candidate, record the lineage row, then the
                                               importer's own replay gate (`lle.flywheel.replay`) on its
                                               own train small worlds: active there, or rejected there only
    revoke_shared(pop, owner, skill, reason)   revoke at the source (lineage cascade in its store), then
                                               every copy made of it, in each importer's store
    reconcile(pop)                             copies whose source is revoked by any route (e.g. a
                                               supporting experience) are revoked too; idempotent

A copy's provenance crosses stores twice: its descriptor's `evidence.origin` is the source item, and
`shared_copies` (in the population's store) names the source agent and the share message.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from lle.carriers.skill_mining import SkillDescriptor
from lle.carriers.skills import Skill, SkillState, Validation
from lle.core import CarrierKind, Revocation, Scope, SmallWorld, utcnow
from lle.errors import InvalidInputError
from lle.flywheel.replay import validate_skill
from lle.governance.lineage import denylist, revoke
from lle.population.population import AgentPolicyFactory, Population
from lle.population.types import Decision, Intent, Message, Role
from lle.population.validation import Validator, answer, combine, note_candidate, skill_candidate, verdict_of
from lle.runtime.parallel import PolicyFactory
from lle.store import messages as rows


def _shared(pop: Population) -> None:
    if "skills" not in pop.config.shared:
        raise InvalidInputError(f"population {pop.config.name} shares nothing of skills; add shared = [\"skills\"] "
                                "to its file to let agents offer them")


def ask_judges(pop: Population, owner: str, ref: str, *, now: datetime | None = None) -> Message | None:
    """Ask every validator to judge `owner`'s skill before it is shared (None: the population has none)."""
    judges = [a.name for a in pop.config.validators]
    if not judges:
        return None
    skill = pop.library(owner).get(ref)
    return pop.bus.post(Message(sender=owner, recipients=judges, intent=Intent.judge, skill_ids=[skill.item_id],
                                experience_ids=list(skill.item.experience_ids), created_at=now or utcnow(),
                                payload={"kind": "skill", "scope": skill.item.scope.model_dump(mode="json"),
                                         "descriptor": pop.library(owner).export(skill.item_id)}))


def judge_pending(pop: Population, validator: Validator, *, now: datetime | None = None) -> list[Message]:
    """The validator answers every unexpired `judge` message in its inbox."""
    now = now or utcnow()
    if pop.agent(validator.name).role is not Role.validator:
        raise InvalidInputError(f"agent {validator.name} is not a validator; give it role = \"validator\"")
    out = []
    for message in pop.bus.inbox(validator.name, now=now, intents=[Intent.judge]):
        if message.payload.get("kind") != "skill":  # a rule or a lesson (`lle.population.notes`)
            candidate = note_candidate(message)
        else:
            descriptor = SkillDescriptor.model_validate(message.payload["descriptor"])
            scope = Scope.model_validate(message.payload["scope"])  # payload data is typed again before use
            candidate = skill_candidate(message.skill_ids[0], scope, descriptor)
        out.append(pop.bus.post(answer(validator, message, candidate, now=now)))
    return out


def verdict_for(pop: Population, item_id: str) -> Decision | None:
    """The validators' combined decision on `item_id` (a skill, rule or lesson) from their latest verdicts (None:
    not judged)."""
    latest: dict[str, Decision] = {}
    for message in pop.bus.messages(intent=Intent.verdict):
        if item_id in message.skill_ids or item_id in message.item_ids:
            latest[message.sender] = verdict_of(message)
    return combine(list(latest.values()))


def publish(pop: Population, owner: str, ref: str, *, now: datetime | None = None, ttl_s: float | None = 3600.0,
            priority: int = 5) -> Message:
    """Offer `owner`'s skill to the others. Refused unless the skill is active in the owner's store (its replay
    gate passed) and, where the population has validators, they allowed it (a verdict never activates)."""
    _shared(pop)
    skill = pop.library(owner).get(ref)
    if skill.state is not SkillState.active:
        raise InvalidInputError(f"skill {skill.name} ({skill.item_id}) of {owner} is {skill.state}: only an active "
                                "skill (its replay gate passed) is shared; replay it first")
    if pop.config.validators:
        decision = verdict_for(pop, skill.item_id)
        if decision is not Decision.allow:
            why = "no validator judged it yet" if decision is None else f"the validators said {decision}"
            raise InvalidInputError(f"skill {skill.item_id} of {owner} is not shared: {why}; ask them with "
                                    "ask_judges, then publish again")
    return pop.bus.post(Message(sender=owner, intent=Intent.share, skill_ids=[skill.item_id], priority=priority,
                                experience_ids=list(skill.item.experience_ids), ttl_s=ttl_s,
                                created_at=now or utcnow(),
                                payload={"descriptor": pop.library(owner).export(skill.item_id)}))


@dataclass(frozen=True)
class Adoption:
    """What an importer did with one shared skill."""

    agent: str
    share: str
    copy: Skill | None
    validation: Validation | None
    reply: Message

    @property
    def state(self) -> SkillState | None:
        return None if self.validation is None else self.validation.state


def adopt(pop: Population, agent: str, share: Message, small_worlds: Sequence[SmallWorld],
          policy_factory: PolicyFactory, *, now: datetime | None = None) -> Adoption:
    """Import a shared skill into `agent`'s store and run its own replay gate on its own train small worlds.
    The copy is active there only if it does not regress that agent; the source and other agents are untouched."""
    _shared(pop)
    now = now or utcnow()
    if share.intent is not Intent.share or not share.for_agent(agent):
        raise InvalidInputError(f"message {share.id} is not a skill shared with {agent}")
    if share.expired(now):
        raise InvalidInputError(f"message {share.id} expired at {share.expires_at}; ask its sender to share again")
    source = share.skill_ids[0]
    library = pop.library(agent)
    try:
        copy = library.import_descriptor(share.payload["descriptor"], actor=agent)  # type: ignore[arg-type]
    except InvalidInputError as err:
        reply = pop.bus.post(Message(sender=agent, recipients=[share.sender], intent=Intent.declined,
                                     reply_to=share.id, created_at=now, skill_ids=[source],
                                     payload={"state": "not_imported", "reasons": [str(err)[:300]]}))
        return Adoption(agent, share.id, None, None, reply)
    rows.append_copy(pop.store, rows.CopyRow(agent, copy.item_id, share.sender, source, share.id, now.isoformat()))
    if isinstance(policy_factory, AgentPolicyFactory):  # the agent's own model: replayed as it plays elsewhere
        result = pop.replay(agent, copy.item_id, small_worlds, factory=policy_factory)
    else:
        result = validate_skill(library, copy.item_id, small_worlds, policy_factory, actor=agent)
    intent = Intent.adopted if result.state is SkillState.active else Intent.declined
    reply = pop.bus.post(Message(sender=agent, recipients=[share.sender], intent=intent, reply_to=share.id,
                                 created_at=now, skill_ids=[source, copy.item_id],
                                 experience_ids=[i for p in result.pairs for i in (p.without, p.with_skill)],
                                 payload={"state": result.state.value, "reasons": list(result.gate.reasons)}))
    return Adoption(agent, share.id, library.get(copy.item_id), result, reply)


def revoke_shared(pop: Population, owner: str, item_id: str, reason: str, author: str, *,
                  now: datetime | None = None) -> list[Revocation]:
    """Revoke `owner`'s skill, rule or lesson (and what derives from it in its store), then every copy made of it,
    and copies of those copies, in each importer's store. Returns the revocations appended, the source's first."""
    revocations = [revoke(pop.store_of(owner), item_id, reason, author)]
    revocations += _revoke_copies(pop, owner, item_id, reason, author)
    ids = [item_id, *(r.target for r in revocations[1:])]
    found = pop.store_of(owner).items_by_id([item_id])
    skill = bool(found) and found[0].carrier is CarrierKind.skills  # a rule or lesson is named in item_ids
    pop.bus.post(Message(sender=owner, intent=Intent.revoked, created_at=now or utcnow(), ttl_s=None,
                         skill_ids=ids if skill else [], item_ids=[] if skill else ids,
                         payload={"reason": reason[:300]}))
    return revocations


def _revoke_copies(pop: Population, owner: str, item_id: str, reason: str, author: str) -> list[Revocation]:
    out = []
    for row in rows.copies(pop.store, source_agent=owner, source_item=item_id):
        store = pop.store_of(row.agent)
        if row.item_id not in denylist(store).ids:
            out.append(revoke(store, row.item_id, f"its source {owner}/{item_id} was revoked: {reason}", author))
        out += _revoke_copies(pop, row.agent, row.item_id, reason, author)
    return out


def reconcile(pop: Population, *, author: str = "population") -> list[Revocation]:
    """Revoke every copy whose source is revoked in its owner's store, however that happened."""
    out = []
    for row in rows.copies(pop.store):
        source_store = pop.store_of(row.source_agent)
        item = source_store.items_by_id([row.source_item])
        blocked = denylist(source_store).blocks_item(item[0]) if item else None
        if blocked is not None and row.item_id not in denylist(pop.store_of(row.agent)).ids:
            out.append(revoke(pop.store_of(row.agent), row.item_id,
                              f"its source {row.source_agent}/{row.source_item} is revoked (by {blocked})", author))
    return out


def shares_for(pop: Population, agent: str, *, now: datetime) -> list[Message]:
    """Shared skills `agent` has not answered yet and that have not expired at `now` (rules and lessons:
    `lle.population.notes.shares_for`)."""
    return [m for m in pop.bus.inbox(agent, now=now, intents=[Intent.share]) if "descriptor" in m.payload]
