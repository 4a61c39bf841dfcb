"""U: route each assessed experience to the most revocable carrier that fits, behind its gate.

    experience ─ revoked source? ─ held-out? ─ hygiene ─┬─ writeback? ─ memory gate ─ memory
                                                        ├─ writeback? ─ lessons ─ rules gate ─ project rules
                                                        ├─ writeback? ─ mining ─ skills gate ─ skill candidates
                                                        └─ writeback? ─ dataset gate ─ dataset (for export)

Only the carriers the small world's `writeback` lists are written; each one it leaves out gets a
rejection whose gate (`writeback`) says so. Every decision is an `Update` with its `GateResult` and
reasons, admitted or rejected, so `lle updates list --rejected` explains what did not get in. Carriers
receive the scrubbed copy (PII and secrets redacted, untrusted text quoted); the ledger keeps the
experience as recorded. Skills are mined as candidates through this same router (`SkillLibrary.observe`:
the trace `reproduced` in ≥ 3 small worlds of ≥ 2 projects; activation needs a replay); verifier cases
are proposed when a later, stronger anchor contradicts a pass (`VerifierCases.observe`, run by
`lle verifier-cases scan`; its gate checks `writeback` too).

`route_once` routes and marks the experience routed in one transaction (the flywheel uses it), so a
kill at any point routes it exactly once. `route_group_once` does the same for a group of attempts at
one small world (exploration by groups): the best verified success (else the first, greedy, attempt) is
routed like any experience, each failure of a group that also succeeded becomes a contrast memory
(where, from the same observation, the failing attempt acted differently, with the group-relative
advantages), and the rest are marked routed without teaching anything twice.
"""

from __future__ import annotations

from collections.abc import Callable

from pydantic import JsonValue

from lle.carriers.dataset import Dataset
from lle.carriers.memory import MemoryCarrier, memory_item_from
from lle.carriers.rules import RuleBook, lessons_from
from lle.carriers.skills import SkillLibrary
from lle.core import CarrierItem, CarrierKind, Experience, GateResult, Outcome, Scope, ScopeLevel, Update, UpdateOp
from lle.evidence.credit import first_divergence, group_advantages
from lle.governance import gates, hygiene
from lle.governance.lineage import denylist
from lle.store import Store
from lle.store import flywheel as flywheel_store


class UpdateRouter:
    """Implements the core `Router` protocol over one store."""

    def __init__(self, store: Store, *, config: gates.GateConfig = gates.DEFAULT,
                 memory: MemoryCarrier | None = None, rules: RuleBook | None = None,
                 contamination: hygiene.ContaminationIndex | None = None, actor: str = "router") -> None:
        self.store, self.config, self.actor = store, config, actor
        self.memory = memory or MemoryCarrier(store)
        self.rules = rules or RuleBook(store, config, actor)
        self.contamination = contamination if contamination is not None else hygiene.ContaminationIndex.from_registry()
        self.dataset = Dataset(store, config=config, contamination=self.contamination, actor=actor)
        self.skills = SkillLibrary(store, config, actor)

    def _reject(self, carrier: CarrierKind, exp: Experience, gate: GateResult, scope: Scope) -> Update:
        update = Update(carrier=carrier, op=UpdateOp.reject, scope=scope, experience_ids=[exp.id], gate=gate,
                        actor=self.actor)
        self.store.append_update(update)
        return update

    def route(self, experience: Experience) -> list[Update]:
        task_scope = Scope(level=ScopeLevel.task, family=experience.small_world.family,
                           project=experience.small_world.project, task_id=experience.small_world.id)
        blocked = denylist(self.store).blocks_experience(experience)
        if blocked:
            gate = GateResult(name="revoked", passed=False, reasons=[f"its source {blocked} is revoked"])
            return [self._reject(CarrierKind.memory, experience, gate, task_scope)]
        held = gates.held_out(experience)
        if held:
            return [self._reject(CarrierKind.memory, experience, held, task_scope)]
        clean = hygiene.scrub_experience(experience)
        routes: dict[CarrierKind, Callable[[], list[Update]]] = {
            CarrierKind.memory: lambda: self._to_memory(clean),
            CarrierKind.rules: lambda: self._to_rules(clean),
            CarrierKind.skills: lambda: self.skills.observe(clean),
            # The dataset gate scrubs and checks on its own (it is the strictest, and exports rebuild prompts).
            CarrierKind.dataset: lambda: [self.dataset.admit(experience)],
        }
        updates: list[Update] = []
        for carrier, send in routes.items():
            forbidden = gates.writeback_gate(experience, carrier)
            updates += [self._reject(carrier, experience, forbidden, task_scope)] if forbidden else send()
        return updates

    def route_once(self, experience: Experience, run_id: str) -> list[Update]:
        """Route `experience` and mark it routed in one transaction: exactly once, whatever kills it.

        Every write of `route` (updates, items, vectors, utilities) and the `routed` marker commit
        together or not at all, so a process killed at any point leaves either nothing (the resume
        routes it) or everything with its marker (the resume skips it). Items shown in the episode
        learn its reward (MemRL) in the same transaction, when its small world writes back to memory.
        Returns [] for an experience routed before.
        """
        try:
            with self.store.transaction():
                if flywheel_store.is_routed(self.store, experience.id):
                    return []
                updates = self.route(experience)
                if gates.writeback_gate(experience, CarrierKind.memory) is None:
                    self.memory.credit_episode(experience)
                flywheel_store.mark_routed(self.store, experience.id, run_id)
                return updates
        except BaseException:
            self._forget()  # the rolled-back writes may sit in the carriers' caches
            raise

    def route_group_once(self, group: list[Experience], run_id: str) -> list[Update]:
        """Route a group of attempts at one small world, and mark every attempt routed, in one transaction."""
        if len({exp.small_world.id for exp in group}) != 1:
            raise ValueError("a group holds attempts at one small world")
        try:
            with self.store.transaction():
                if all(flywheel_store.is_routed(self.store, exp.id) for exp in group):
                    return []
                best = best_attempt(group)
                updates = self.route(best)
                if gates.writeback_gate(best, CarrierKind.memory) is None:
                    self.memory.credit_episode(best)
                    if best.outcome is Outcome.passed:
                        advantages = group_advantages(group)
                        for failure in (e for e in group if e.outcome is Outcome.failed):
                            updates += self._contrast(best, failure, advantages)
                for exp in group:
                    flywheel_store.mark_routed(self.store, exp.id, run_id)
                return updates
        except BaseException:
            self._forget()
            raise

    def _contrast(self, success: Experience, failure: Experience, advantages: dict[str, list[float]]) -> list[Update]:
        """A memory of where a failing attempt left the successful one's path, behind the memory gate."""
        if denylist(self.store).blocks_experience(failure):
            return []
        at = first_divergence(success, failure)
        if at is None:
            return []
        ok, bad = hygiene.scrub_experience(success), hygiene.scrub_experience(failure)
        good_step = next(s for s in ok.steps if s.index == at)
        bad_step = next(s for s in bad.steps if s.index == at)
        lesson = (f"From the same state at step {at}, {good_step.request.tool} {good_step.request.args} led to "
                  f"success; {bad_step.request.tool} {bad_step.request.args} led to failure "
                  f"({(bad_step.effect.error or bad_step.effect.observation)[:160]}).")
        base = memory_item_from(ok)

        def advantage(exp: Experience) -> JsonValue:  # at the step where the attempts parted
            where = [i for i, s in enumerate(exp.steps) if s.index == at]
            values = advantages.get(exp.id, [])
            return values[where[0]] if where and where[0] < len(values) else None

        content: dict[str, JsonValue] = {
            "kind": "contrast", "task": base.content.get("task", "") if isinstance(base.content, dict) else "",
            "world": success.small_world.world, "outcome": "contrast", "lesson": lesson, "step": at,
            "advantage": {"success": advantage(success), "failure": advantage(failure)},
        }
        item = CarrierItem(carrier=CarrierKind.memory, scope=base.scope, content=content,
                           experience_ids=[success.id, failure.id], evidence_ids=list(base.evidence_ids))
        hit = self.contamination.check(lesson, source=success.small_world)
        gate = gates.memory_gate(success, contamination_hit=hit, secrets_left=len(hygiene.redact(lesson)[1]),
                                 config=self.config)
        if not gate.passed:
            return [self._reject(CarrierKind.memory, failure, gate, item.scope)]
        update = Update(carrier=CarrierKind.memory, op=UpdateOp.admit, item_id=item.id, scope=item.scope,
                        experience_ids=[success.id, failure.id], evidence_ids=list(item.evidence_ids), gate=gate,
                        actor=self.actor)
        self.memory.admit(item, update)
        return [update]

    def _forget(self) -> None:
        """Drop what the carriers cached from the ledger; they read it again when next asked."""
        self.memory = MemoryCarrier(self.store, embedder=self.memory.embedder)
        self.rules = RuleBook(self.store, self.config, self.actor)
        self.dataset = Dataset(self.store, config=self.config, contamination=self.contamination, actor=self.actor)
        self.skills = SkillLibrary(self.store, self.config, self.actor)

    def _to_memory(self, exp: Experience) -> list[Update]:
        item = memory_item_from(exp)
        text = str(item.content)
        # The small world lets the index tell a reworded held-out task from a train task worded alike.
        gate = gates.memory_gate(exp, contamination_hit=self.contamination.check(text, source=exp.small_world),
                                 secrets_left=len(hygiene.redact(text)[1]), config=self.config)
        if not gate.passed:
            return [self._reject(CarrierKind.memory, exp, gate, item.scope)]
        update = Update(carrier=CarrierKind.memory, op=UpdateOp.admit, item_id=item.id, scope=item.scope,
                        experience_ids=[exp.id], evidence_ids=list(item.evidence_ids), gate=gate, actor=self.actor)
        self.memory.admit(item, update)
        return [update]

    def _to_rules(self, exp: Experience) -> list[Update]:
        lessons = lessons_from(exp)
        untrusted = any(hygiene.carries_untrusted_instruction(t) for t in lessons)
        hits = [hit for t in lessons if (hit := self.contamination.check(t, source=exp.small_world))]
        return self.rules.observe(exp, untrusted_text=untrusted, contamination_hit=hits[0] if hits else None)


def best_attempt(group: list[Experience]) -> Experience:
    """The attempt a group teaches from: its shortest verified success, else its first (greedy) attempt."""
    passed = [e for e in group if e.outcome is Outcome.passed]
    return min(passed, key=lambda e: len(e.steps)) if passed else group[0]
