"""Skills: named macros of tool calls, mined from verified successes, offered only after replay.

    observe(exp) ─ supports? ─ mine the family ─ skills gate ─ candidate (propose)
    decide(skill, A/B replay pairs) ─ replay gate ─ validated (admit) ─ active (activate)
        (the pairs are run above the carriers: `lle.flywheel.replay.validate_skill`, the flywheel's rounds)
    observe(exp that used a skill) ─ monitor ─ regression ─ retired (retire, with the evidence)

A skill is a carrier item (`CarrierKind.skills`) whose content is a `SkillDescriptor`; like a project
rule, the item row never changes and its lifecycle is the sequence of update rows over it, checked
against `TRANSITIONS` on every write. Lineage: `experience_ids` are the supporting experiences and a
composite's `derived_from` its atomic skills, so revoking either revokes the skill. An active,
unexpired skill is offered to the policy as the tool `skill_<name>` whose parameters are its slots;
the harness expands a call into the macro's tool calls, each grounded and recorded as its own step.
"""

from __future__ import annotations

import contextlib
import re
from collections import defaultdict
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from pydantic import JsonValue, ValidationError

from lle.carriers import skill_mining
from lle.carriers.skill_mining import SKILL_FEEDBACK, MiningConfig, SkillDescriptor, Trace, trace_of, used_skills
from lle.context import binding as skill_binding
from lle.core import (
    ActionRequest,
    CarrierItem,
    CarrierKind,
    Experience,
    GateResult,
    Outcome,
    Revocation,
    Scope,
    ScopeLevel,
    SmallWorld,
    Split,
    ToolSpec,
    Update,
    UpdateOp,
    VerificationLevel,
    utcnow,
)
from lle.errors import InvalidInputError, UnknownIdError
from lle.governance import gates
from lle.governance.lineage import admit_item, denylist, revoke
from lle.governance.normalize import Meaning, macro_fields
from lle.store import Store, experiences
from lle.store.episodes import get_episode


class SkillState(StrEnum):
    candidate = "candidate"
    validated = "validated"
    active = "active"
    retired = "retired"
    superseded = "superseded"
    rejected = "rejected"
    revoked = "revoked"


OP_STATE = {UpdateOp.propose: SkillState.candidate, UpdateOp.admit: SkillState.validated,
            UpdateOp.activate: SkillState.active, UpdateOp.retire: SkillState.retired,
            UpdateOp.supersede: SkillState.superseded, UpdateOp.reject: SkillState.rejected,
            UpdateOp.revoke: SkillState.revoked}
TRANSITIONS: dict[SkillState, frozenset[SkillState]] = {
    # candidate -> candidate records more support, or a replay too small to decide.
    SkillState.candidate: frozenset({SkillState.candidate, SkillState.validated, SkillState.rejected,
                                     SkillState.retired, SkillState.superseded, SkillState.revoked}),
    SkillState.validated: frozenset({SkillState.active, SkillState.retired, SkillState.superseded,
                                     SkillState.revoked}),
    SkillState.active: frozenset({SkillState.retired, SkillState.superseded, SkillState.revoked}),
    SkillState.retired: frozenset(), SkillState.superseded: frozenset(), SkillState.rejected: frozenset(),
    SkillState.revoked: frozenset(),
}


class SkillTransitionError(InvalidInputError):
    """A lifecycle step the skill's current state does not allow (e.g. candidate -> active without replay)."""


def next_state(current: SkillState, op: UpdateOp, skill: str = "skill") -> SkillState:
    """The state `op` leads to from `current`; raises `SkillTransitionError` when it is not allowed."""
    target = OP_STATE[op]
    if target not in TRANSITIONS[current]:
        allowed = ", ".join(sorted(TRANSITIONS[current])) or "nothing (it has ended)"
        raise SkillTransitionError(f"{skill} is {current}: it cannot become {target} (allowed: {allowed})")
    return target


_EXAMPLE = re.compile(r"^[\w .:/-]{1,32}$")


def _bound(desc: SkillDescriptor) -> int:
    """Slots the runtime reads by itself (everywhere or where its anchors are found)."""
    return sum(s.bind is not None for s in desc.slots)


@dataclass(frozen=True)
class Skill:
    """One skill item with its descriptor and current state; the harness's `SkillTool`."""

    item: CarrierItem
    descriptor: SkillDescriptor
    state: SkillState

    @property
    def item_id(self) -> str:
        return self.item.id

    @property
    def name(self) -> str:
        return self.descriptor.name

    @property
    def spec(self) -> ToolSpec:
        return self.spec_for(None)

    def spec_for(self, goal: str | None) -> ToolSpec:
        """The tool the model sees. The runtime reads a bound slot; one bound only where its anchors are found is
        asked for, optionally, and required where `goal` is known and lacks them (a goal-bound slot)."""
        props: dict[str, JsonValue] = {}
        asked = [s for s in self.descriptor.slots if s.bind is None or not s.bind.always]
        needed = {s.name for s in asked if s.bind is None or (
            goal is not None and s.bind.source == skill_binding.GOAL and skill_binding.read(s.bind, goal) is None)}
        for slot in asked:
            schema: dict[str, JsonValue] = {"type": slot.type} if slot.type else {}
            shown = [str(v) for v in slot.examples if _EXAMPLE.match(str(v))]
            if shown:
                schema["description"] = "e.g. " + ", ".join(shown[:3])
            if slot.bind is not None:
                schema["description"] = (f"read from {slot.bind.describe()} after {slot.bind.left!r} when it is "
                                         "there; give it only otherwise")
            props[slot.name] = schema
        params: dict[str, JsonValue] = {"type": "object", "properties": props,
                                        "required": [s.name for s in asked if s.name in needed],
                                        "additionalProperties": False}
        return ToolSpec(name=f"skill_{self.name}", description=self.descriptor.description, parameters=params)

    @property
    def size(self) -> int:
        return len(self.descriptor.calls)

    @property
    def program(self) -> str | None:
        """A program skill's source (the runtime runs it, `lle.runtime.programs`); None for a macro."""
        return self.descriptor.program

    @property
    def tools(self) -> list[str]:
        """The world tools it calls: a program's declared ones, a macro's calls'."""
        return self.descriptor.tools if self.program is not None else [c.tool for c in self.descriptor.calls]

    def call(self, n: int, args: Mapping[str, JsonValue], *, goal: str,
             observations: Sequence[str]) -> ActionRequest | str:
        """The macro's `n`-th tool call (from 0) with its slots filled: from `args` (already checked against
        `spec`), or for a bound slot from the goal or `observations` (0: before the macro, k: after call k).
        A bound slot that cannot be read gives the reason instead of a call."""
        call, filled = self.descriptor.calls[n], dict(self.descriptor.calls[n].args)
        slots = {s.name: s for s in self.descriptor.slots}
        for arg, name in call.slots.items():
            slot = slots[name]
            if slot.bind is None:
                filled[arg] = args[name]
                continue
            source = slot.bind.source
            index = int(source.split(":", 1)[1]) if source != skill_binding.GOAL else -1
            text = goal if index < 0 else observations[index] if index < len(observations) else ""
            raw = skill_binding.read(slot.bind, text)
            value = skill_binding.typed(raw, slot.type) if raw is not None else None
            if value is None and not slot.bind.always:
                value = args.get(name)  # not in the text this time: what the model gave, if it gave it
            if value is None:
                return (f"skill {self.name} could not read ${name} from {slot.bind.describe()} "
                        f"(between {slot.bind.left!r} and {slot.bind.right!r}); call the tools directly")
            filled[arg] = value
        return ActionRequest(tool=call.tool, args=filled,
                             thought=f"skill {self.name} v{self.descriptor.version}, call {n + 1} of {self.size}")

    def fits(self, goal: str) -> bool:
        """Whether every slot bound to the goal can be read from `goal` (else the skill is not offered)."""
        return all(skill_binding.read(s.bind, goal) is not None for s in self.descriptor.slots
                   if s.bind is not None and s.bind.always and s.bind.source == skill_binding.GOAL)

    def offered_to(self, small_world: SmallWorld, now: datetime | None = None) -> bool:
        """Whether the skill, when active, is offered to `small_world`: unexpired, its tools allowed there, its
        goal-bound slots filled by the goal, and a program on its own world only."""
        return (not self.expired(now) and all(t in small_world.tools for t in self.tools)
                and self.fits(small_world.goal) and self.descriptor.world in (None, small_world.world))

    def expired(self, now: datetime | None = None) -> bool:
        return self.descriptor.expires_at is not None and self.descriptor.expires_at <= (now or utcnow())


@dataclass(frozen=True)
class Pair:
    """One small world of a validation A/B: the episode without the skill and the one offered it."""

    small_world: str
    without: str
    with_skill: str
    passed_without: bool
    passed_with: bool
    used: bool


def _program_check(replay: GateResult, pairs: Sequence[Pair]) -> tuple[GateResult, UpdateOp]:
    """A program's check by execution, stricter than the replay gate: it runs first on every small world, so it
    must pass at least half of them itself and lose none the no-skill arm passed; else it is rejected, never
    offered (an extractor samples several programs and execution chooses)."""
    wins = sum(p.passed_with for p in pairs)
    lost = [p.small_world for p in pairs if p.passed_without and not p.passed_with]
    reasons = [f"passed {wins} of {len(pairs)} fresh train small worlds with the program run first"]
    if lost:
        reasons.append(f"lost {len(lost)} the no-skill arm passed: {', '.join(lost[:3])}")
    if 2 * wins < len(pairs):
        reasons.append("fewer than half passed")
    passed = replay.passed and not lost and 2 * wins >= len(pairs)
    gate = GateResult(name="skills_program_check", passed=passed, reasons=[*reasons, *replay.reasons])
    return gate, (UpdateOp.admit if passed else UpdateOp.reject)


@dataclass(frozen=True)
class Validation:
    skill: str
    pairs: list[Pair]
    gate: GateResult
    state: SkillState
    updates: list[Update]


class SkillLibrary:
    """The skills carrier over the store's ledger (implements the core `Carrier` protocol)."""

    kind = CarrierKind.skills

    def __init__(self, store: Store, config: gates.GateConfig = gates.DEFAULT, actor: str = "router", *,
                 mining: MiningConfig | None = None, ttl: timedelta | None = None) -> None:
        self.store, self.config, self.actor, self.ttl = store, config, actor, ttl
        self.mining = mining or MiningConfig(min_support=config.skills_min_support,
                                             min_projects=config.skills_min_projects)
        # The ledger is append-only and experiences never change: what was read once is cached
        # (traces, step-less records, items, and updates up to the last rowid seen).
        self._traces: dict[str, Trace] = {}
        self._records: dict[str, Experience] = {}
        self._items: dict[str, tuple[CarrierItem, SkillDescriptor]] = {}
        self._updates: dict[str, list[Update]] = defaultdict(list)
        self._last_rowid = self._last_item_rowid = 0

    @contextlib.contextmanager
    def _atomic(self) -> Iterator[None]:
        """One transaction; on failure the cache forgets what it read inside it (rolled-back rowids are reused)."""
        try:
            with self.store.transaction():
                yield
        except BaseException:
            self._items.clear()
            self._updates.clear()
            self._last_rowid = self._last_item_rowid = 0
            raise

    # --- reading ---------------------------------------------------------------------------------

    def _history(self) -> dict[str, list[Update]]:
        # rowid, not id order: ids made in the same millisecond do not sort by time.
        for rowid, update in self.store.update_rows(CarrierKind.skills.value, after=self._last_rowid):
            if update.item_id:
                self._updates[update.item_id].append(update)
            self._last_rowid = rowid
        return self._updates

    def _all_items(self) -> list[tuple[CarrierItem, SkillDescriptor]]:
        for rowid, _, body in self.store.item_rows(CarrierKind.skills.value, after=self._last_item_rowid):
            item = CarrierItem.model_validate(self.store.decode(body))
            self._items[item.id] = (item, SkillDescriptor.model_validate(item.content))
            self._last_item_rowid = rowid
        return list(self._items.values())

    def skills(self, family: str | None = None) -> list[Skill]:
        """Every skill with its state, oldest first."""
        denied, history = denylist(self.store), self._history()
        out = []
        for item, descriptor in self._all_items():
            if family is not None and item.scope.family != family:
                continue
            state = SkillState.candidate
            for update in history.get(item.id, []):
                target = OP_STATE[update.op]
                state = target if target in TRANSITIONS[state] else state
            if denied.blocks_item(item):
                state = SkillState.revoked
            out.append(Skill(item, descriptor, state))
        return out

    def get(self, ref: str) -> Skill:
        """A skill by item id, or by name (`take_key_go` or `skill_take_key_go`: its latest version)."""
        name = ref.removeprefix("skill_")
        found = [s for s in self.skills() if s.item_id == ref or s.name == name]
        if not found:
            raise UnknownIdError("skill", ref, "list skills with `lle skills list`")
        return max(found, key=lambda s: (s.item_id == ref, s.descriptor.version, s.item.created_at))

    def offered(self, small_world: SmallWorld, *, now: datetime | None = None) -> list[Skill]:
        """Active, unexpired skills of the small world's family whose tools it allows and whose goal-bound slots
        its goal fills (the harness offers these)."""
        return [s for s in self.skills(small_world.family) if s.state is SkillState.active
                and s.offered_to(small_world, now)]

    def retrieve(self, query: str, scope: Scope, k: int = 5) -> list[CarrierItem]:
        """Carrier protocol: active, unexpired skills of the scope's family (best supported first)."""
        found = [s for s in self.skills(scope.family) if s.state is SkillState.active and not s.expired()]
        found.sort(key=lambda s: (-s.descriptor.evidence.support, s.name))
        return [s.item for s in found[:k]]

    # --- lifecycle -----------------------------------------------------------------------------------

    def transition(self, ref: str | Skill, op: UpdateOp, *, gate: GateResult | None = None,
                   experience_ids: Sequence[str] = (), evidence_ids: Sequence[str] = (),
                   actor: str | None = None) -> Update:
        """Append one lifecycle update after checking that the skill's state allows it."""
        skill = self.get(ref) if isinstance(ref, str) else ref
        next_state(skill.state, op, f"skill {skill.name} v{skill.descriptor.version} ({skill.item_id})")
        update = Update(carrier=CarrierKind.skills, op=op, item_id=skill.item_id, scope=skill.item.scope,
                        experience_ids=list(experience_ids), evidence_ids=list(evidence_ids), gate=gate,
                        actor=actor or self.actor)
        self.store.append_update(update)
        return update

    def retire(self, ref: str, reason: str, actor: str) -> Update:
        if not reason.strip():
            raise InvalidInputError("the reason is empty; say why the skill is retired (it is kept in the ledger)")
        return self.transition(ref, UpdateOp.retire, actor=actor,
                                gate=GateResult(name="manual", passed=False, reasons=[reason]))

    def activate(self, ref: str, gate: GateResult, experience_ids: Sequence[str] = (),
                 actor: str | None = None) -> list[Update]:
        """Make a validated skill active; older versions of its name that were in use are superseded."""
        skill = self.get(ref)
        next_state(skill.state, UpdateOp.activate, f"skill {skill.name} ({skill.item_id})")
        with self._atomic():  # the superseded versions and the activation: all or none
            updates = []
            for old in self.skills(skill.descriptor.family):
                if old.name == skill.name and old.descriptor.version < skill.descriptor.version and old.state in (
                        SkillState.candidate, SkillState.validated, SkillState.active):
                    why = GateResult(name="skills_version", passed=False,
                                     reasons=[f"superseded by v{skill.descriptor.version} ({skill.item_id})"])
                    updates.append(self.transition(old.item_id, UpdateOp.supersede, gate=why, actor=actor))
            updates.append(self.transition(skill.item_id, UpdateOp.activate, gate=gate,
                                           experience_ids=experience_ids, actor=actor))
        return updates

    def next_version(self, family: str, name: str) -> int:
        return 1 + max((s.descriptor.version for s in self.skills(family) if s.name == name), default=0)

    # --- the router's entry point: support, mining, monitoring ------------------------------------------

    def observe(self, exp: Experience) -> list[Update]:
        """What `exp` says about skills: a regression of skills it used; support for new or candidate skills.

        The router calls this for each assessed train experience, after it is stored.
        """
        if gates.held_out(exp) is not None:
            return []  # evaluation episodes never write to carriers, not even a retirement
        updates = [u for i in used_skills(exp) if self.store.kind_of(i) is not None for u in self.monitor(i)]
        if self.supports(exp) and self.store.kind_of(exp.id) is not None:
            updates += self.mine(exp.small_world.family, new=exp.id)
        return updates

    def supports(self, exp: Experience) -> bool:
        return (exp.outcome is Outcome.passed and exp.verification.rank >= self.config.skills_min_level.rank
                and denylist(self.store).blocks_experience(exp) is None)

    def _family_traces(self, family: str) -> dict[str, Trace]:
        """Traces of the family's latest `mining.window` supporting experiences that are not revoked."""
        levels = [v.value for v in VerificationLevel if v.rank >= self.config.skills_min_level.rank]
        ids = experiences.latest(self.store, family=family, split=Split.train.value, outcome=Outcome.passed.value,
                                 verification=levels, limit=self.mining.window)
        denied = denylist(self.store)
        out = {}
        for exp_id in ids:
            if exp_id in denied.ids:
                continue
            if exp_id not in self._traces:
                exp = self.store.get_experience(exp_id)
                try:
                    initial: str | None = get_episode(self.store, exp_id).initial_observation
                except UnknownIdError:
                    initial = None  # imported experiences have no episode row
                self._traces[exp_id] = trace_of(exp, initial)
                self._records[exp_id] = exp.model_copy(update={"steps": []})
            if denied.sources and denied.blocks_experience(self._records[exp_id]):
                continue
            out[exp_id] = self._traces[exp_id]
        return out

    def mine(self, family: str, *, new: str | None = None) -> list[Update]:
        """Mine the family's supporting experiences; propose what passes the skills gate and is not known yet.

        `new`: the experience that triggered this pass; a candidate it supports records it (`propose`).
        """
        traces, history = self._family_traces(family), self._history()
        known: dict[str, Skill] = {}
        for skill in self.skills(family):  # the latest version of each macro
            latest = known.get(skill.descriptor.key)
            if skill.state is not SkillState.revoked and (
                    latest is None or skill.descriptor.version >= latest.descriptor.version):
                known[skill.descriptor.key] = skill
        item_of = {key: s.item_id for key, s in known.items()}
        updates: list[Update] = []
        for mined in skill_mining.mine(family, list(traces.values()), self.mining):
            desc = mined.descriptor
            existing = known.get(desc.key)
            if existing is not None and existing.state is SkillState.candidate and _bound(desc) > _bound(
                    existing.descriptor):
                # More support now reads a slot the candidate asked the model for: a new version replaces it
                # (a small model can name a skill, not always fill its arguments).
                updates.append(self.transition(existing, UpdateOp.supersede, gate=GateResult(
                    name="skills_rebind", passed=True, reasons=[
                        f"re-mined from {len(mined.experience_ids)} successes, it reads {_bound(desc)} of its "
                        f"slots itself (was {_bound(existing.descriptor)}): superseded by a new version"])))
                existing = None
            if existing is not None:
                supported = {*existing.item.experience_ids, *(e for u in history.get(existing.item_id, [])
                                                               if u.op is UpdateOp.propose for e in u.experience_ids)}
                if new in mined.experience_ids and existing.state is SkillState.candidate and new not in supported:
                    support = GateResult(name="skills_support", passed=True, reasons=[f"{new} ran the macro too"])
                    updates.append(self.transition(existing, UpdateOp.propose, gate=support,
                                                   experience_ids=[new], evidence_ids=self.hard_evidence([new])))
                continue
            derived = [item_of[p] for p in mined.parts if p in item_of]
            if len(derived) < len(mined.parts):
                continue  # a part did not become a skill: neither does the composite
            supporters = [self._records[i] for i in mined.experience_ids]
            gate = gates.skills_gate(supporters, config=self.config)
            if not gate.passed:
                continue
            weakest = min((e.verification for e in supporters), key=lambda v: v.rank)
            desc = desc.model_copy(update={
                "version": self.next_version(family, desc.name),
                "expires_at": utcnow() + self.ttl if self.ttl else None,
                "evidence": desc.evidence.model_copy(update={"level": weakest.value})})
            evidence_ids = self.hard_evidence(mined.experience_ids)
            item = CarrierItem(carrier=CarrierKind.skills, scope=Scope(level=ScopeLevel.family, family=family),
                               content=desc.model_dump(mode="json"), experience_ids=list(mined.experience_ids),
                               evidence_ids=evidence_ids, derived_from=derived)
            update = Update(carrier=CarrierKind.skills, op=UpdateOp.propose, item_id=item.id, scope=item.scope,
                            experience_ids=list(mined.experience_ids), evidence_ids=evidence_ids, gate=gate,
                            actor=self.actor)
            admit_item(self.store, item, update)
            item_of[desc.key] = item.id
            updates.append(update)
        return updates

    def hard_evidence(self, experience_ids: Sequence[str]) -> list[str]:
        out: list[str] = []
        for exp_id in experience_ids:
            out += experiences.evidence_ids(self.store, exp_id, hard_decided=True)
        return out

    def uses(self, item_id: str) -> list[tuple[str, Outcome]]:
        """(experience id, outcome) of every stored, unrevoked experience that called the skill."""
        denied = denylist(self.store)
        return [(i, Outcome(o)) for i, o in experiences.feedback_outcomes(self.store, SKILL_FEEDBACK, item_id)
                if i not in denied.ids]

    def monitor(self, ref: str | None = None) -> list[Update]:
        """Retire active skills whose success in use fell too far below their validation baseline."""
        updates = []
        for skill in [self.get(ref)] if ref else self.skills():
            if skill.state is not SkillState.active:
                continue
            replayed = {e for u in self._history()[skill.item_id] if u.op in (UpdateOp.admit, UpdateOp.activate)
                        for e in u.experience_ids}
            uses = [(i, o) for i, o in self.uses(skill.item_id) if o is not Outcome.unknown]
            base = [o for i, o in uses if i in replayed]
            after = [(i, o) for i, o in uses if i not in replayed]
            if not base:
                continue  # activated without a replay that used it: nothing to compare with
            baseline = sum(o is Outcome.passed for o in base) / len(base)
            gate = gates.skills_monitor_gate(len(after), sum(o is Outcome.passed for _, o in after), baseline,
                                             config=self.config)
            if not gate.passed:
                ids = [i for i, _ in after]
                updates.append(self.transition(skill.item_id, UpdateOp.retire, gate=gate, experience_ids=ids,
                                               evidence_ids=self.hard_evidence(ids), actor="monitor"))
        return updates

    # --- validation: the replay gate over A/B episodes (run by `lle.flywheel.replay`) ----------------

    def decide(self, ref: str, episodes: Sequence[tuple[Experience, Experience]], *, activate: bool = True,
               actor: str | None = None) -> Validation:
        """The replay gate over stored (without, with the skill offered) train episodes of the same small worlds.

        The carrier runs no episodes: `lle.flywheel.replay.validate_skill` runs the pairs one after the
        other, and the flywheel's rounds run them as resumable batches; both call this. A non-negative
        effect over at least `skills_min_pairs` pairs whose skill arm used it validates (and, with
        `activate`, activates) the skill; a regression over that many rejects it; anything less leaves
        it a candidate.
        """
        skill = self.get(ref)
        next_state(skill.state, UpdateOp.admit, f"skill {skill.name} ({skill.item_id})")
        for without, with_skill in episodes:
            if without.small_world != with_skill.small_world or without.small_world.split is not Split.train:
                raise InvalidInputError(f"pair {without.id}/{with_skill.id}: both arms must play the same train "
                                        "small world; dev and test are for evaluation")
        # A program passes a small world only where the episode passed and every call it made was allowed and ran.
        pairs = [Pair(a.small_world.id, a.id, b.id, a.outcome is Outcome.passed, b.outcome is Outcome.passed and (
            skill.program is None or skill_mining.ran_cleanly(b, skill.item_id)), skill.item_id in used_skills(b))
            for a, b in episodes]
        used = sum(p.used for p in pairs)
        wins, base = sum(p.passed_with for p in pairs), sum(p.passed_without for p in pairs)
        gate = gates.skills_replay_gate(len(pairs), used, wins, base, config=self.config)
        ids = [i for p in pairs for i in (p.without, p.with_skill)]
        regressed = bool(pairs) and (wins - base) / len(pairs) < -self.config.skills_max_regression
        op = UpdateOp.admit if gate.passed else (
            UpdateOp.reject if regressed and used >= self.config.skills_min_pairs else UpdateOp.propose)
        if skill.program is not None and len(pairs) >= self.config.skills_min_pairs:
            gate, op = _program_check(gate, pairs)
        with self._atomic():  # admit and activate: a kill between them would strand it validated
            updates = [self.transition(skill.item_id, op, gate=gate, experience_ids=ids,
                                       evidence_ids=self.hard_evidence(ids), actor=actor)]
            if op is UpdateOp.admit and activate:
                updates += self.activate(skill.item_id, gate, ids, actor)
        return Validation(skill.item_id, pairs, gate, self.get(skill.item_id).state, updates)

    def decided(self, ref: str, experience_ids: Sequence[str]) -> bool:
        """True when an update of the skill already lists these experiences (a resumed run decides once)."""
        wanted = set(experience_ids)
        return any(wanted <= set(u.experience_ids) for u in self._history().get(self.get(ref).item_id, []))

    # --- exchange: descriptors as JSON ----------------------------------------------------------------

    def export(self, ref: str) -> dict[str, Any]:
        """The skill's descriptor as JSON (id, version, slots, pre/postconditions, evidence summary); a revoked
        skill is refused."""
        skill = self.get(ref)
        if skill.state is SkillState.revoked:
            by = denylist(self.store).blocks_item(skill.item)
            raise InvalidInputError(f"skill {skill.name} ({skill.item_id}) is revoked"
                                    f"{'' if by == skill.item_id else f' with {by}'}; it cannot be exported")
        return skill.descriptor.model_copy(update={"id": skill.item_id}).model_dump(mode="json")

    def import_descriptor(self, document: str | Mapping[str, Any], *, actor: str) -> Skill:
        """Add a descriptor from elsewhere as a candidate: it must validate here before it is offered.

        Its description is rebuilt from its calls (imported text never reaches the policy as written)
        and its supporting experiences stay in the summary only: lineage here starts empty.
        """
        try:
            parsed = (SkillDescriptor.model_validate_json(document) if isinstance(document, str)
                      else SkillDescriptor.model_validate(dict(document)))
        except ValidationError as err:
            first = err.errors()[0]
            where = "/".join(str(p) for p in first["loc"]) or "descriptor"
            raise InvalidInputError(f"not a skill descriptor at {where}: {first['msg']}; export one with "
                                    "`lle skills export`") from err
        desc = parsed.model_copy(update={
            "id": None, "version": self.next_version(parsed.family, parsed.name),
            "evidence": parsed.evidence.model_copy(update={"origin": parsed.id or parsed.evidence.origin}),
        }).finished()
        revoked, calls = Meaning(), macro_fields(desc.body())  # a program's body is its source
        for other in self.skills(parsed.family):
            if other.descriptor.key == desc.key and other.state in (
                    SkillState.candidate, SkillState.validated, SkillState.active):
                raise InvalidInputError(f"this skill is already here as {other.item_id} ({other.state}); "
                                        "nothing imported")
            if other.state is SkillState.revoked:
                revoked.add(other.item_id, desc.family, macro_fields(other.descriptor.body()))
        if blocked := revoked.find(desc.family, calls):  # the same macro by meaning, or nearly: any id, any name
            raise InvalidInputError(f"skill {desc.name} repeats revoked skill {blocked}; nothing imported")
        gate = GateResult(name="skills_import", passed=True,
                          reasons=[f"imported from {desc.evidence.origin or 'elsewhere'}: a candidate until "
                                   "it validates here"])
        item = CarrierItem(carrier=CarrierKind.skills, scope=Scope(level=ScopeLevel.family, family=desc.family),
                           content=desc.model_dump(mode="json"))
        admit_item(self.store, item, Update(carrier=CarrierKind.skills, op=UpdateOp.propose, item_id=item.id,
                                            scope=item.scope, gate=gate, actor=actor))
        return self.get(item.id)

    # --- carrier protocol ---------------------------------------------------------------------------------

    def admit(self, item: CarrierItem, update: Update) -> None:
        """Write a candidate whose gate already passed (`observe`/`mine` and `import_descriptor` are the usual ways)."""
        if update.op is not UpdateOp.propose or not update.gate or not update.gate.passed or update.item_id != item.id:
            raise InvalidInputError(f"skill {item.id} enters as a candidate: a propose update whose gate passed")
        SkillDescriptor.model_validate(item.content)
        admit_item(self.store, item, update)

    def revoke(self, item_id: str, revocation: Revocation) -> None:
        revoke(self.store, item_id, revocation.reason, revocation.author)
