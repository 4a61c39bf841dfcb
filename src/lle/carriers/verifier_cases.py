"""Verifier cases: a failure the verifiers missed becomes a check that runs with its family's verifiers.

When an experience was recorded as `pass` at `hard_anchor` or better (the world's own visible
anchor said yes) and later, stronger hard evidence says `fail` (a person through `lle evidence
add … --outcome fail`, hidden tests, a replay), the verifiers missed a bug. `VerifierCases.observe`
turns that into a candidate case: a `CarrierItem` of kind `verifier_cases`, scoped to the family,
holding the small world, what was missed, who caught it, and a check that runs on a trajectory:

    submission   the final submit's arguments (an answer, a SQL query), normalized: must fail
    files        the final sha256 of each file the agent wrote (code worlds): must fail
    final_state  the final world state the agent reached (games, toy worlds): must fail

Nothing runs until a person approves the case (`approve`, an `admit` update with actor and
reason); `reject` and `retire` end it. `CaseVerifier` (registered as `verifier/cases-v1`) then
runs every active case of the small world's family: a trajectory that repeats the missed failure
gets hard `fail` evidence (anchor `verifier_case`). A case never says `pass`, and candidate,
rejected, retired or revoked cases never run (the denylist is read on every verify).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from pathlib import Path

from pydantic import JsonValue

from lle.core import (
    CarrierItem,
    CarrierKind,
    Evidence,
    Experience,
    GateResult,
    Outcome,
    Revocation,
    Scope,
    ScopeLevel,
    SmallWorld,
    Step,
    Strength,
    Update,
    UpdateOp,
    canonical_json,
)
from lle.errors import InvalidInputError, UnknownIdError
from lle.evidence import verifiers
from lle.governance import gates
from lle.governance.lineage import admit_item, denylist, item_states, revoke
from lle.governance.pii import redact
from lle.store import Store, experiences

VERIFIER_ID = "verifier/cases-v1"
ANCHOR = "verifier_case"
STATES = {UpdateOp.admit: "active", UpdateOp.activate: "active", UpdateOp.reject: "rejected",
          UpdateOp.retire: "retired", UpdateOp.revoke: "revoked"}


# --- the check --------------------------------------------------------------------------------------


def _normal(value: JsonValue) -> JsonValue:
    """Submissions that differ only in whitespace or a trailing `;` compare equal. Nothing more: the
    missed failure may be the very spelling (`13.0` where `13` was wanted), so values stay as written."""
    if isinstance(value, str):
        return " ".join(value.split()).rstrip(";").strip()
    if isinstance(value, list):
        return [_normal(v) for v in value]
    if isinstance(value, dict):
        return {k: _normal(v) for k, v in sorted(value.items())}
    return value


def _terminal(trajectory: Sequence[Step]) -> Step | None:
    found = verifiers.last_reward(list(trajectory))
    return trajectory[found[0]] if found is not None else None


def _final(trajectory: Sequence[Step], kinds: set[str]) -> dict[str, JsonValue]:
    final: dict[str, JsonValue] = {}
    for step in trajectory:
        for change in step.effect.changes:
            if change.kind in kinds:
                final[change.target] = change.after
    return final


def make_check(trajectory: Sequence[Step]) -> dict[str, JsonValue] | None:
    """The must-fail check that recognises this trajectory's outcome, or None when there is none to take."""
    files = _final(trajectory, {"file"})
    if files:
        return {"type": "files", "files": files}
    last = _terminal(trajectory)
    if last is not None and last.executed.allowed and last.executed.args:
        return {"type": "submission", "tool": last.executed.tool, "args": _normal(dict(last.executed.args))}
    state = _final(trajectory, {"state", "row"})
    if last is not None and state:
        return {"type": "final_state", "state": state}
    return None


def catches(check: JsonValue, trajectory: Sequence[Step]) -> str | None:
    """Why `trajectory` repeats the failure `check` describes, or None when it does not."""
    if not isinstance(check, dict):
        return None
    kind = check.get("type")
    if kind == "files" and isinstance(check.get("files"), dict):
        wanted = check["files"]
        assert isinstance(wanted, dict)
        final = _final(trajectory, {"file"})
        if all(final.get(path) == digest for path, digest in wanted.items()):
            return f"the files {sorted(wanted)} end as in the missed failure"
        return None
    last = _terminal(trajectory)
    if kind == "submission" and last is not None and last.executed.allowed:
        if last.executed.tool == check.get("tool") and _normal(dict(last.executed.args)) == check.get("args"):
            return f"it submits what the missed failure submitted: {canonical_json(check.get('args'))[:200]}"
        return None
    if kind == "final_state" and last is not None and isinstance(check.get("state"), dict):
        wanted_state = check["state"]
        assert isinstance(wanted_state, dict)
        final_state = _final(trajectory, {"state", "row"})
        if all(final_state.get(k) == v for k, v in wanted_state.items()):
            return "it ends in the state the missed failure ended in"
    return None


def case_key(small_world: SmallWorld, check: JsonValue) -> str:
    return hashlib.sha256(canonical_json([small_world.world, small_world.id, check]).encode()).hexdigest()[:16]


# --- the carrier --------------------------------------------------------------------------------------


def family_scope(small_world: SmallWorld) -> Scope:
    return Scope(level=ScopeLevel.family, family=small_world.family)


class VerifierCases:
    """The verifier-cases carrier over the store's ledger: items plus their update history."""

    kind = CarrierKind.verifier_cases

    def __init__(self, store: Store, config: gates.GateConfig = gates.DEFAULT, actor: str = "router") -> None:
        self.store, self.config, self.actor = store, config, actor

    # --- reading ---------------------------------------------------------------------------------

    def items(self) -> dict[str, tuple[CarrierItem, str]]:
        """Every case with its state: candidate, active, rejected, retired or revoked."""
        return item_states(self.store, self.kind.value, STATES)

    def get(self, item_id: str) -> tuple[CarrierItem, str]:
        found = self.items().get(item_id)
        if found is None:
            raise UnknownIdError("verifier case", item_id, "list them with `lle verifier-cases list`")
        return found

    def active(self, family: str | None = None) -> list[CarrierItem]:
        """Approved cases (of `family`) that nothing has ended or revoked: the ones that run."""
        return [item for item, state in self.items().values()
                if state == "active" and (family is None or item.scope.family == family)]

    def retrieve(self, query: str, scope: Scope, k: int = 5) -> list[CarrierItem]:
        """Carrier protocol: the active cases of the scope's family (cases are checks, not prompt text)."""
        return self.active(scope.family)[:k]

    # --- proposing ---------------------------------------------------------------------------------

    def observe(self, experience: Experience, later_evidence: Sequence[Evidence] | None = None) -> list[Update]:
        """Propose a case when later, stronger evidence contradicts a recorded pass.

        `later_evidence` defaults to what the store holds beyond the sealed record (e.g. a verdict
        from `lle evidence add`). Returns [] when nothing contradicts the record or the same case
        already exists; a `reject` update (with reasons) when a contradiction does not qualify;
        else a `propose` update whose item waits for a person's approval.
        """
        sealed = {e.id for e in experience.evidence}
        if later_evidence is None:
            later_evidence = [e for e in self.store.evidence_for(experience.id) if e.id not in sealed]
        contradicting = [e for e in later_evidence if e.outcome is Outcome.failed and e.strength is Strength.hard
                         and e.id not in sealed]
        if not contradicting or self._seen(experience.id, contradicting):
            return []
        scope = family_scope(experience.small_world)
        blocked = denylist(self.store).blocks_experience(experience)
        gate = (GateResult(name="verifier_cases", passed=False, reasons=[f"its source {blocked} is revoked"])
                if blocked else gates.verifier_case_gate(experience, contradicting, config=self.config))
        check = make_check(experience.steps)
        if gate.passed and check is None:
            gate = GateResult(name="verifier_cases", passed=False,
                              reasons=["the trajectory has no submission, file or state to recognise it by"])
        if not gate.passed:
            update = Update(carrier=self.kind, op=UpdateOp.reject, scope=scope, experience_ids=[experience.id],
                            evidence_ids=[e.id for e in contradicting], gate=gate, actor=self.actor)
            self.store.append_update(update)
            return [update]
        assert check is not None
        key = case_key(experience.small_world, check)
        for item, state in self.items().values():
            if isinstance(item.content, dict) and item.content.get("key") == key and state != "revoked":
                return []  # proposed already; a person decides once per case
        item = CarrierItem(carrier=self.kind, scope=scope, content=self._content(experience, contradicting, check, key),
                           experience_ids=[experience.id],
                           evidence_ids=[*[e.id for e in experience.evidence if e.strength is Strength.hard],
                                         *[e.id for e in contradicting]])
        update = Update(carrier=self.kind, op=UpdateOp.propose, item_id=item.id, scope=scope,
                        experience_ids=[experience.id], evidence_ids=list(item.evidence_ids), gate=gate,
                        actor=self.actor)
        admit_item(self.store, item, update)
        return [update]

    def _seen(self, experience_id: str, contradicting: Sequence[Evidence]) -> bool:
        # Observing the same contradiction twice (the router, then `scan`) decides once.
        ids = {e.id for e in contradicting}
        return any(experience_id in u.experience_ids and ids <= set(u.evidence_ids)
                   for u in self.store.list_updates(limit=1_000_000, carrier=self.kind.value))

    @staticmethod
    def _content(exp: Experience, contradicting: Sequence[Evidence], check: dict[str, JsonValue],
                 key: str) -> dict[str, JsonValue]:
        sw = exp.small_world
        passed: list[JsonValue] = [{"anchor": e.anchor, "evidence_id": e.id} for e in exp.evidence
                                   if e.outcome is Outcome.passed and e.strength is Strength.hard
                                   and e.anchor not in verifiers.NON_GOAL_ANCHORS]
        caught: list[JsonValue] = []
        for e in contradicting:
            detail = e.detail if isinstance(e.detail, dict) else {}
            note = redact(str(detail.get("note", "")))[0][:500]  # a reviewer's words are text like any other
            caught.append({"anchor": e.anchor, "evidence_id": e.id, "note": note,
                           "author": str(detail.get("author", ""))})
        return {"key": key, "family": sw.family, "world": sw.world, "small_world_id": sw.id,
                "small_world": sw.model_dump(mode="json"), "check": check,
                "missed": {"experience_id": exp.id, "passed": passed, "caught_by": caught}}

    def scan(self) -> list[Update]:
        """`observe` every stored experience that has evidence appended after it was recorded."""
        out: list[Update] = []
        for exp_id in experiences.with_later_evidence(self.store):
            out += self.observe(self.store.get_experience(exp_id))
        return out

    # --- a person decides --------------------------------------------------------------------------

    def _decide(self, item_id: str, op: UpdateOp, actor: str, reason: str, gate: GateResult) -> Update:
        item, _ = self.get(item_id)
        update = Update(carrier=self.kind, op=op, item_id=item.id, scope=item.scope,
                        experience_ids=list(item.experience_ids), evidence_ids=list(item.evidence_ids), gate=gate,
                        actor=actor)
        self.store.append_update(update)
        return update

    def _check_person(self, item_id: str, actor: str, reason: str, allowed: set[str]) -> CarrierItem:
        if not actor.strip():
            raise InvalidInputError("the actor is empty; say who decides (it is kept with the update)")
        if not reason.strip():
            raise InvalidInputError("the reason is empty; say why (it is kept with the update)")
        item, state = self.get(item_id)
        if state not in allowed:
            raise InvalidInputError(f"verifier case {item_id} is {state}; only a case that is "
                                    f"{' or '.join(sorted(allowed))} can be decided this way")
        return item

    def approve(self, item_id: str, *, actor: str, reason: str) -> Update:
        """A person approves a candidate: it runs from now on. The case must catch its own source first."""
        item = self._check_person(item_id, actor, reason, {"candidate"})
        source = str(item.experience_ids[0])
        content = item.content if isinstance(item.content, dict) else {}
        why = catches(content.get("check"), self.store.get_experience(source).steps)
        if why is None:
            raise InvalidInputError(f"verifier case {item_id} does not catch its own source {source}; reject it")
        gate = GateResult(name="verifier_cases/approval", passed=True,
                          reasons=[f"approved by {actor}: {reason}", f"catches {source}: {why}"])
        return self._decide(item_id, UpdateOp.admit, actor, reason, gate)

    def reject(self, item_id: str, *, actor: str, reason: str) -> Update:
        """A person rejects a candidate: it never runs."""
        self._check_person(item_id, actor, reason, {"candidate"})
        gate = GateResult(name="verifier_cases/approval", passed=False, reasons=[f"rejected by {actor}: {reason}"])
        return self._decide(item_id, UpdateOp.reject, actor, reason, gate)

    def retire(self, item_id: str, *, actor: str, reason: str) -> Update:
        """Stop running an active case (e.g. the world's anchor now catches it on its own)."""
        self._check_person(item_id, actor, reason, {"active"})
        gate = GateResult(name="verifier_cases/approval", passed=False, reasons=[f"retired by {actor}: {reason}"])
        return self._decide(item_id, UpdateOp.retire, actor, reason, gate)

    def admit(self, item: CarrierItem, update: Update) -> None:
        """Carrier protocol: write a case with its update (`observe` is the usual way in)."""
        if update.item_id != item.id or item.carrier is not self.kind:
            raise InvalidInputError(f"verifier case {item.id} needs an update about it on the verifier_cases carrier")
        admit_item(self.store, item, update)

    def revoke(self, item_id: str, revocation: Revocation) -> None:
        revoke(self.store, item_id, revocation.reason, revocation.author)

    def run(self, small_world: SmallWorld, trajectory: Sequence[Step]) -> list[tuple[CarrierItem, str]]:
        """(case, why) for every active case of this small world that `trajectory` repeats."""
        out = []
        for item in self.active(small_world.family):
            content = item.content if isinstance(item.content, dict) else {}
            if content.get("world") == small_world.world and content.get("small_world_id") == small_world.id:
                why = catches(content.get("check"), trajectory)
                if why is not None:
                    out.append((item, why))
        return out


# --- the verifier ----------------------------------------------------------------------------------------

@verifiers.verifier(VERIFIER_ID)
class CaseVerifier:
    """Runs the approved verifier cases of the small world's family on a trajectory: a repeat of a
    missed failure gets hard `fail` evidence. Never `pass`: a case knows one wrong answer, not the right one."""

    def __init__(self, store: Store | None = None) -> None:
        self.store = store

    def verify(self, small_world: SmallWorld, trajectory: list[Step]) -> list[Evidence]:
        if self.store is not None:
            return self._verify(self.store, small_world, trajectory)
        # Built by id without a store (what `assess` does): the workspace's cases, when it has a
        # store (never create one just to find it has no cases). A run over another store passes
        # `CaseVerifier(store)` in assess's `extra`, which replaces this one.
        from lle import workspace

        path = workspace.db_path(os.environ.get(workspace.ENV_VAR))
        if not Path(path).exists():
            return []
        with Store(path) as store:
            return self._verify(store, small_world, trajectory)

    def _verify(self, store: Store, small_world: SmallWorld, trajectory: list[Step]) -> list[Evidence]:
        out = []
        for item, why in VerifierCases(store).run(small_world, trajectory):
            missed = item.content.get("missed") if isinstance(item.content, dict) else None
            out.append(verifiers.evidence(self, small_world, anchor=ANCHOR, outcome=Outcome.failed,
                                          strength=Strength.hard, step=len(trajectory) - 1 if trajectory else None,
                                          detail={"case": item.id, "reason": why, "missed": missed}))
        return out
