"""Project rules: short lessons that hold inside one project, admitted only through the rules gate.

A lesson comes from the evidence — for built-in worlds, from the verifier's own diagnosis (the
world's anchor detail carries `lesson`, e.g. "amounts are stored in cents") — never from what a
tool output told the agent to do. The first lesson with a given text in a project becomes a
candidate item (`propose`); each further experience that supports it is another `propose` row on
that item; when the gate passes, an `admit` row makes it active. A rule that a later experience
contradicts (it was shown, followed, and the step failed) is superseded, never deleted.
The lifecycle is the sequence of update rows; the item row itself never changes.
"""

from __future__ import annotations

import hashlib
import re

from pydantic import JsonValue

from lle.core import (
    CarrierItem,
    CarrierKind,
    Experience,
    GateResult,
    Outcome,
    Revocation,
    Scope,
    ScopeLevel,
    Update,
    UpdateOp,
)
from lle.errors import InvalidInputError
from lle.governance import gates
from lle.governance.lineage import admit_item, denylist, item_states, revoke, update_history
from lle.store import Store

STATES = {UpdateOp.admit: "active", UpdateOp.activate: "active", UpdateOp.supersede: "superseded",
          UpdateOp.retire: "retired", UpdateOp.revoke: "revoked"}


def rule_key(text: str) -> str:
    """Texts that differ only in case, spacing or punctuation are the same rule."""
    normal = " ".join(re.findall(r"\w+", text.lower()))
    return hashlib.sha256(normal.encode()).hexdigest()[:16]


def lessons_from(exp: Experience) -> list[str]:
    """Lessons the verifiers diagnosed for this experience (`lesson`/`lessons` in an anchor's detail)."""
    found: list[str] = []
    for ev in exp.evidence:
        detail = ev.detail if isinstance(ev.detail, dict) else {}
        inner = detail.get("anchor_detail")
        for source in (detail, inner if isinstance(inner, dict) else {}):
            lesson, lessons = source.get("lesson"), source.get("lessons")
            if isinstance(lesson, str) and lesson.strip():
                found.append(lesson.strip())
            if isinstance(lessons, list):
                found.extend(str(x).strip() for x in lessons if str(x).strip())
    return list(dict.fromkeys(found))


def project_scope(exp: Experience) -> Scope:
    sw = exp.small_world
    return Scope(level=ScopeLevel.project, family=sw.family, project=sw.project)


class RuleBook:
    """The rules carrier over the store's ledger."""

    kind = CarrierKind.rules

    def __init__(self, store: Store, config: gates.GateConfig = gates.DEFAULT, actor: str = "router") -> None:
        self.store, self.config, self.actor = store, config, actor

    # --- reading ---------------------------------------------------------------------------------

    def _history(self) -> dict[str, list[Update]]:
        return update_history(self.store, CarrierKind.rules.value)

    def items(self) -> dict[str, tuple[CarrierItem, str]]:
        """Every rule item with its state: candidate, active, superseded, retired, revoked."""
        return item_states(self.store, CarrierKind.rules.value, STATES)

    def retrieve(self, query: str, scope: Scope, k: int = 5) -> list[CarrierItem]:
        """Active rules of the scope's project (rules are few per project: all of them, up to k)."""
        return [item for item, state in self.items().values()
                if state == "active" and item.scope.family == scope.family and item.scope.project == scope.project][:k]

    # --- writing ---------------------------------------------------------------------------------

    def _update(self, op: UpdateOp, item: CarrierItem, exp: Experience, gate: GateResult | None) -> Update:
        update = Update(carrier=CarrierKind.rules, op=op, item_id=item.id, scope=item.scope,
                        experience_ids=[exp.id], gate=gate, actor=self.actor,
                        evidence_ids=[e.id for e in exp.evidence if e.strength.value == "hard"])
        self.store.append_update(update)
        return update

    def observe(self, exp: Experience, *, untrusted_text: bool = False,
                contamination_hit: str | None = None) -> list[Update]:
        """Record what `exp` says about rules: contradictions of rules it was shown, support for its lessons."""
        updates = self._contradictions(exp)
        if exp.outcome is Outcome.unknown:
            return updates
        items = self.items()
        by_key = {(i.scope.family, i.scope.project, str(i.content.get("key"))): (i, s)
                  for i, s in items.values() if isinstance(i.content, dict)}
        scope = project_scope(exp)
        for text in lessons_from(exp):
            found = by_key.get((scope.family, scope.project, rule_key(text)))
            if found is None:
                content: dict[str, JsonValue] = {"text": text, "key": rule_key(text)}
                item = CarrierItem(carrier=CarrierKind.rules, scope=scope, content=content, experience_ids=[exp.id],
                                   evidence_ids=[e.id for e in exp.evidence if e.strength.value == "hard"])
                self.store.append_item(item)
                state = "candidate"
            else:
                item, state = found
            if state != "candidate":
                continue  # already active, or ended: a superseded rule is not revived by support alone
            updates.append(self._update(UpdateOp.propose, item, exp, None))
            gate = self._gate(item, untrusted_text, contamination_hit)
            if gate.passed:
                updates.append(self._update(UpdateOp.admit, item, exp, gate))
        return updates

    def _supporters(self, item_id: str) -> list[Experience]:
        denied = denylist(self.store)
        ids = dict.fromkeys(e for u in self._history().get(item_id, []) if u.op is UpdateOp.propose
                            for e in u.experience_ids if e not in denied.ids)
        return [self.store.get_experience(i) for i in ids]

    def _gate(self, item: CarrierItem, untrusted: bool, contamination_hit: str | None) -> GateResult:
        contradictions = [e for u in self._history().get(item.id, []) if u.gate and u.gate.name == "contradiction"
                          for e in u.experience_ids]
        return gates.rules_gate(str(item.content.get("text", "")) if isinstance(item.content, dict) else "",
                                self._supporters(item.id), contradictions, untrusted=untrusted,
                                contamination_hit=contamination_hit, config=self.config)

    def _contradictions(self, exp: Experience) -> list[Update]:
        if exp.outcome is not Outcome.failed or not exp.attribution or exp.attribution.get("kind") != "context":
            return []
        blamed = exp.attribution.get("items")
        blamed_ids = {str(i) for i in blamed} if isinstance(blamed, list) else set()
        updates = []
        for item_id, (item, state) in self.items().items():
            if item_id not in blamed_ids or state not in ("candidate", "active"):
                continue
            gate = GateResult(name="contradiction", passed=False,
                              reasons=[f"{exp.id} followed this rule and failed ({exp.attribution.get('reason')})"])
            op = UpdateOp.supersede if state == "active" else UpdateOp.reject
            updates.append(self._update(op, item, exp, gate))
        return updates

    def admit(self, item: CarrierItem, update: Update) -> None:
        """Carrier protocol: write a rule whose gate already passed (`observe` is the usual way in)."""
        if not update.gate or not update.gate.passed or update.item_id != item.id:
            raise InvalidInputError(f"rule {item.id} needs an admit update whose rules gate passed")
        admit_item(self.store, item, update)

    def revoke(self, item_id: str, revocation: Revocation) -> None:
        revoke(self.store, item_id, revocation.reason, revocation.author)
