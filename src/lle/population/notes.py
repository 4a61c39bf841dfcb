"""Sharing rules and lessons across agents, in the shape of skill sharing (`lle.population.sharing`).

    ask_judges(pop, owner, item, now)    a `judge` message (payload: kind rule|lesson, scope, text) to the
                                         validators; `sharing.judge_pending` answers it like a skill's
    publish(pop, owner, item, now)       a `share` message (kind, scope, text), only if the item is active in
                                         the owner's store (its own rules or memory gate passed) and no
                                         validator blocked or delayed it
    adopt(pop, agent, share, now)        a copy in the importer's store behind its own gate, plus the lineage
                                         row: a rule copy is a candidate that becomes active only through the
                                         importer's rules gate (its own experiences reproduce the rule:
                                         `RuleBook.observe` promotes the candidate by its key); a lesson copy
                                         is admitted only beside a verified success of the importer's own in
                                         that family and project that passes its memory gate (the copy derives
                                         from that experience too), else declined there (a stored memory is a
                                         retrievable one, so a lesson has no candidate state to wait in)
    sharing.revoke_shared / reconcile    the same lineage rows, so revoking the source retires every copy

A validator's verdict is model_judge evidence that only holds a note back: `allow` writes nothing in any
store, and a copy starts as a candidate whatever the verdict said. The shared text is data: a lesson copy
keeps it quoted (`hygiene.quote_untrusted`), and a rule copy is retrieved only once the importer's own
evidence reproduced it.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import JsonValue

from lle.carriers.memory import MemoryCarrier, memory_text
from lle.carriers.rules import STATES as RULE_STATES
from lle.carriers.rules import RuleBook, rule_key
from lle.core import CarrierItem, CarrierKind, Experience, Outcome, Scope, Update, UpdateOp, VerificationLevel, utcnow
from lle.errors import InvalidInputError
from lle.governance import gates, hygiene
from lle.governance.lineage import item_states
from lle.population.population import Population
from lle.population.sharing import verdict_for
from lle.population.types import Decision, Intent, Message, Role
from lle.store import Store
from lle.store import messages as rows

NoteKind = Literal["rule", "lesson"]
CARRIER: dict[str, CarrierKind] = {"rule": CarrierKind.rules, "lesson": CarrierKind.memory}
"""Where each kind of note lives (validators judge them through `validation.note_candidate`)."""
SHARED = {"rule": "rules", "lesson": "lessons"}
MEMORY_STATES = {UpdateOp.admit: "active", UpdateOp.retire: "retired", UpdateOp.revoke: "revoked",
                 UpdateOp.supersede: "superseded"}
LESSON_MIN_LEVEL = VerificationLevel.hard_anchor
"""An importer trusts a shared lesson only beside a success of its own verified at least this well."""


def _kind(pop: Population, owner: str, item_id: str) -> tuple[NoteKind, CarrierItem, str]:
    """The note's kind, its item and its state in `owner`'s store."""
    store = pop.store_of(owner)
    for kind, carrier in CARRIER.items():
        states = item_states(store, carrier.value, RULE_STATES if kind == "rule" else MEMORY_STATES)
        if item_id in states:
            item, state = states[item_id]
            return ("rule" if kind == "rule" else "lesson"), item, state
    raise InvalidInputError(f"{owner} holds no rule or memory {item_id}; list them with `lle carriers`")


def _allowed(pop: Population, kind: NoteKind) -> None:
    if SHARED[kind] not in pop.config.shared:
        raise InvalidInputError(f"population {pop.config.name} shares no {SHARED[kind]}; add \"{SHARED[kind]}\" to "
                                "its shared list to let agents offer them")


def text_of(kind: NoteKind, item: CarrierItem) -> str:
    content = item.content
    if kind == "rule":
        return str(content.get("text", "")) if isinstance(content, dict) else ""
    if isinstance(content, dict) and content.get("lesson"):
        return str(content["lesson"])
    return memory_text(content)


def ask_judges(pop: Population, owner: str, item_id: str, *, now: datetime | None = None) -> Message | None:
    """Ask every validator to judge `owner`'s rule or lesson before it is shared (None: no validators)."""
    judges = [a.name for a in pop.config.validators]
    kind, item, _state = _kind(pop, owner, item_id)
    _allowed(pop, kind)
    if not judges:
        return None
    return pop.bus.post(Message(sender=owner, recipients=judges, intent=Intent.judge, item_ids=[item.id],
                                experience_ids=list(item.experience_ids), created_at=now or utcnow(),
                                payload={"kind": kind, "scope": item.scope.model_dump(mode="json"),
                                         "text": text_of(kind, item)[:2000]}))


def publish(pop: Population, owner: str, item_id: str, *, now: datetime | None = None, ttl_s: float = 3600.0,
            priority: int = 5) -> Message:
    """Offer `owner`'s active rule or lesson to the others; refused unless active and allowed by the validators."""
    kind, item, state = _kind(pop, owner, item_id)
    _allowed(pop, kind)
    if state != "active":
        raise InvalidInputError(f"{kind} {item_id} of {owner} is {state}: only an active {kind} (its own gate "
                                "passed) is shared")
    if pop.config.validators:
        decision = verdict_for(pop, item_id)
        if decision is not Decision.allow:
            why = "no validator judged it yet" if decision is None else f"the validators said {decision}"
            raise InvalidInputError(f"{kind} {item_id} of {owner} is not shared: {why}; ask them with ask_judges, "
                                    "then publish again")
    return pop.bus.post(Message(sender=owner, intent=Intent.share, item_ids=[item.id], priority=priority, ttl_s=ttl_s,
                                experience_ids=list(item.experience_ids), created_at=now or utcnow(),
                                payload={"kind": kind, "scope": item.scope.model_dump(mode="json"),
                                         "text": text_of(kind, item)[:2000]}))


def shares_for(pop: Population, agent: str, *, now: datetime) -> list[Message]:
    """Shared rules and lessons `agent` has not answered yet and that have not expired at `now`."""
    return [m for m in pop.bus.inbox(agent, now=now, intents=[Intent.share]) if m.payload.get("kind") in CARRIER]


def adopt(pop: Population, agent: str, share: Message, *, now: datetime | None = None) -> Message:
    """Import a shared rule or lesson into `agent`'s store behind its own gate (a rule as a candidate, a lesson
    only beside a verified success of its own); the reply (adopted, with the copy's state, or declined) goes on
    the bus."""
    now = now or utcnow()
    if share.intent is not Intent.share or not share.for_agent(agent) or share.payload.get("kind") not in CARRIER:
        raise InvalidInputError(f"message {share.id} is not a rule or lesson shared with {agent}")
    if pop.agent(agent).role is not Role.explorer:
        raise InvalidInputError(f"agent {agent} is a {pop.agent(agent).role}; only explorers import notes")
    if share.expired(now):
        raise InvalidInputError(f"message {share.id} expired at {share.expires_at}; ask its sender to share again")
    kind: NoteKind = "rule" if share.payload["kind"] == "rule" else "lesson"
    _allowed(pop, kind)
    scope, text, source = Scope.model_validate(share.payload["scope"]), str(share.payload["text"]), share.item_ids[0]
    store = pop.store_of(agent)

    def reply(intent: Intent, payload: dict[str, JsonValue], ids: list[str]) -> Message:
        return pop.bus.post(Message(sender=agent, recipients=[share.sender], intent=intent, reply_to=share.id,
                                    created_at=now, item_ids=ids, payload=payload))

    origin = f"{share.sender}/{source}"
    if kind == "rule":
        held = [i for i, _s in RuleBook(store).items().values() if isinstance(i.content, dict)
                and (i.scope.family, i.scope.project, i.content.get("key")) == (scope.family, scope.project,
                                                                                rule_key(text))]
        if held:
            return reply(Intent.declined, {"state": "held", "reasons": [f"{agent} already holds {held[0].id}"]},
                         [source])
        item = CarrierItem(carrier=CarrierKind.rules, scope=scope,
                           content={"text": text, "key": rule_key(text), "origin": origin})
        with store.transaction():  # a candidate: only the importer's own rules gate admits it
            store.append_item(item)
            store.append_update(Update(carrier=CarrierKind.rules, op=UpdateOp.propose, item_id=item.id, scope=scope,
                                       actor=agent))
        state = "candidate"
    else:
        own = _own_success(store, scope)
        gate = None if own is None else gates.memory_gate(own, contamination_hit=None, secrets_left=0)
        if own is None or gate is None or not gate.passed:
            why = gate.reasons if gate is not None else [f"{agent} has no train success of its own verified at "
                                                         f"{LESSON_MIN_LEVEL} or better in {scope.family}/"
                                                         f"{scope.project} to check it beside"]
            return reply(Intent.declined, {"state": "rejected", "reasons": list(why)}, [source])
        # Quoted: another agent's words are data here, never an instruction.
        item = CarrierItem(carrier=CarrierKind.memory, scope=scope, experience_ids=[own.id], content={
            "kind": "shared_lesson", "task": "", "origin": origin,
            "lesson": hygiene.quote_untrusted(text, f"agent {share.sender}")})
        MemoryCarrier(store).admit(item, Update(carrier=CarrierKind.memory, op=UpdateOp.admit, item_id=item.id,
                                                scope=scope, actor=agent, experience_ids=[own.id], gate=gate))
        state = "active"
    rows.append_copy(pop.store, rows.CopyRow(agent, item.id, share.sender, source, share.id, now.isoformat()))
    return reply(Intent.adopted, {"state": state, "kind": kind}, [source, item.id])


def _own_success(store: Store, scope: Scope) -> Experience | None:
    """The importer's latest unrevoked train success in the scope's family and project, verified well enough."""
    for row in reversed(store.list_experiences(limit=10_000, split="train", outcome=Outcome.passed.value)):
        if row.revoked:
            continue
        exp = store.get_experience(row.id)
        if (exp.small_world.family, exp.small_world.project) == (scope.family, scope.project) \
                and exp.verification.rank >= LESSON_MIN_LEVEL.rank:
            return exp
    return None
