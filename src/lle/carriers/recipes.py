"""The context carrier: one versioned recipe per family — which harness levers shape what the model sees.

The most revocable carrier there is. A recipe says, for one family, which levers the runtime applies
(`lle.config.Levers`: stuck notes and masks, the submit discipline, working memory, admissible-command
masks). Failure attribution proposes a change (`propose_from`: episodes that looped or never handed
in an answer); a proposal becomes active only after an A/B replay on train small worlds shows no
regression — the same gate as skills (`decide`, fed by the flywheel, which runs the replays); the
newly active recipe supersedes the one before; revoking it (`lle revoke ITEM`) brings the previous
one back, since the active view is the ledger minus the denylist. Every episode records the levers
it ran under (`EpisodeRecord.levers`), and the recipe's item id is among the step's context refs.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence

from pydantic import JsonValue

from lle.config import Levers
from lle.context.builder import failed_memory
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
)
from lle.errors import InvalidInputError, UnknownIdError
from lle.governance import gates
from lle.governance.lineage import admit_item, item_states
from lle.store import Store

STATES = {UpdateOp.activate: "active", UpdateOp.supersede: "superseded", UpdateOp.reject: "rejected",
          UpdateOp.retire: "retired", UpdateOp.revoke: "revoked"}


def recipe_scope(family: str) -> Scope:
    return Scope(level=ScopeLevel.family, family=family)


Notes = Callable[[Sequence[str]], list[CarrierItem]]
"""The carrier items of these ids (what a step was shown)."""


def failure_levers(exps: Sequence[Experience], current: Levers,
                   notes: Notes | None = None) -> tuple[Levers, list[str]] | None:
    """The levers that failure attribution proposes for episodes of one family, with the reasons.

    A loop (the same action repeated with the same result) is a failure of the runtime, not of the
    model's knowledge: it proposes stuck masks. An episode that ran out of steps without handing in
    an answer proposes the submit discipline. Failures that called a tool with an argument only a note
    showed (copied from another task: `notes` gives the carrier items a step was shown) are a failure of
    the context: copied from memories of failed episodes, they propose showing successes and contrasts
    only; copied from any other note (or once failed memories are already hidden), showing no notes.
    Successes propose nothing.
    """
    failed = [e for e in exps if e.outcome is not Outcome.passed and e.small_world.split is Split.train]
    reasons: list[str] = []
    update: dict[str, JsonValue] = {}
    looped = [e for e in failed if _repeats(e) >= 3]
    if looped and current.stuck != "mask":
        update["stuck"] = "mask"
        reasons.append(f"{len(looped)} failed episodes repeated one action 3+ times in a row")
    unsubmitted = [e for e in failed if _stop_reason(e) == "StepLimit"]
    if unsubmitted and not current.submit_discipline:
        update["submit_discipline"] = True
        reasons.append(f"{len(unsubmitted)} failed episodes ran out of steps without handing in an answer")
    sources = [found for e in failed if notes is not None and (found := copied_notes(e, notes))]
    from_failures = [found for found in sources if all(failed_memory(i) for i in found)]
    if len(from_failures) >= MIN_COPIES and current.failed_notes and current.notes != 0:
        update["failed_notes"] = False  # the narrower change first: the successes' notes may still help
        reasons.append(f"{len(from_failures)} failed episodes called a tool with an argument that only a memory of "
                       "another task's failed episode showed")
    elif len(sources) >= MIN_COPIES and current.notes != 0:
        update["notes"] = 0
        reasons.append(f"{len(sources)} failed episodes called a tool with an argument that only a note of another "
                       "task showed")
    if not update:
        return None
    update["recipe"] = None  # a proposal is its own recipe, not the one in force
    return current.model_copy(update=update), reasons


MIN_COPIES = 2
"""Failed episodes that copied from notes before a change to the notes is proposed (the A/B replay then decides)."""


def copied_notes(exp: Experience, notes: Notes) -> list[CarrierItem]:
    """The notes a step copied from: at the first step that called a tool with a text argument (3+ characters)
    that its own goal and observations so far never showed, the notes it was shown that did. None: no copy."""
    seen = exp.small_world.goal
    shown: dict[tuple[str, ...], list[tuple[CarrierItem, str]]] = {}  # the same notes at every step: read once
    for step in exp.steps:
        expanded = any(f.source == "runtime" and f.kind == "skill" for f in step.feedback)  # the runtime's args
        refs = tuple(step.context_refs)
        if refs and not expanded and refs not in shown:
            shown[refs] = [(i, json.dumps(i.content, ensure_ascii=False)) for i in notes(refs)]
        here = shown.get(refs, []) if not expanded else []
        for value in step.request.args.values():
            text = str(value).strip() if isinstance(value, str | int | float) else ""
            if len(text) < 3 or text in seen:
                continue  # too short to tell, or the episode's own value
            found = [item for item, note in here if text in note]
            if found:
                return found
        seen += "\n" + step.effect.observation
    return []


def _stop_reason(exp: Experience) -> str | None:
    """Why the episode ended, as the runtime recorded it on the last step (`Feedback(kind="stop")`)."""
    for fb in exp.steps[-1].feedback if exp.steps else []:
        if fb.source == "runtime" and fb.kind == "stop" and isinstance(fb.content, dict):
            return str(fb.content.get("reason"))
    return None


def _repeats(exp: Experience) -> int:
    """The longest run of the same action (tool and arguments) in the episode."""
    best = run = 0
    previous: tuple[str, str] | None = None
    for step in exp.steps:
        key = (step.request.tool, repr(sorted(step.request.args.items())))
        run = run + 1 if key == previous else 1
        best, previous = max(best, run), key
    return best


class RecipeBook:
    """The context carrier over the store's ledger."""

    kind = CarrierKind.context

    def __init__(self, store: Store, config: gates.GateConfig = gates.DEFAULT, actor: str = "router",
                 base: Levers | None = None) -> None:
        self.store, self.config, self.actor = store, config, actor
        self.base = base or Levers()
        """The levers in force where a family has no active recipe (the run's own setting)."""

    # --- reading ---------------------------------------------------------------------------------

    def items(self) -> dict[str, tuple[CarrierItem, str]]:
        """Every recipe with its state: candidate, active, superseded, rejected, retired, revoked."""
        return item_states(self.store, CarrierKind.context.value, STATES)

    def get(self, item_id: str) -> tuple[CarrierItem, str]:
        found = self.items().get(item_id)
        if found is None:
            raise UnknownIdError("recipe", item_id, "list recipes with `lle updates list --carrier context`")
        return found

    def active(self, family: str) -> CarrierItem | None:
        """The family's active recipe: the latest activated one that is neither superseded nor revoked.

        Superseding is undone by revocation: when the newest active recipe is revoked, the one it
        superseded is the active one again (its own history has no revocation).
        """
        states = self.items()
        order = [i for i in self._activation_order() if states[i][0].scope.family == family]
        for item_id in reversed(order):
            item, state = states[item_id]
            if state in ("active", "superseded") and not self._superseded_by_live(item_id, states):
                return item
        return None

    def levers_for(self, family: str) -> Levers:
        """The levers of the family's active recipe (no recipe: the base levers)."""
        item = self.active(family)
        return self.base if item is None else levers_of(item).model_copy(update={"recipe": item.id})

    # --- writing ---------------------------------------------------------------------------------

    def propose(self, family: str, levers: Levers, *, reasons: Sequence[str], experience_ids: Sequence[str],
                actor: str | None = None) -> CarrierItem:
        """A candidate recipe for `family` (active only after `decide`)."""
        content: dict[str, JsonValue] = {"family": family, "levers": levers.model_dump(mode="json"),
                                         "reasons": list(reasons)}
        item = CarrierItem(carrier=CarrierKind.context, scope=recipe_scope(family), content=content,
                           experience_ids=list(experience_ids))
        gate = GateResult(name="recipe_proposal", passed=True, reasons=list(reasons))
        admit_item(self.store, item, self._update(item.id, UpdateOp.propose, gate, experience_ids, actor))
        return item

    def propose_from(self, family: str, exps: Sequence[Experience], *, actor: str | None = None) -> CarrierItem | None:
        """Failure attribution over one family's train episodes: a candidate recipe, or None."""
        current = self.levers_for(family)
        mine = [e for e in exps if e.small_world.family == family]
        proposal = failure_levers(mine, current, self._notes)
        if proposal is None or self._pending(family, proposal[0]):
            return None
        levers, reasons = proposal
        # Derived from this family's failures only: revoking another family's episode leaves it standing.
        failed = [e.id for e in mine if e.outcome is not Outcome.passed and e.small_world.split is Split.train]
        return self.propose(family, levers, reasons=reasons, experience_ids=failed, actor=actor)

    def _notes(self, ids: Sequence[str]) -> list[CarrierItem]:
        """The stored carrier items a step was shown (what a copied value is looked up in)."""
        return self.store.items_by_id(list(ids))

    def decided(self, item_id: str, experience_ids: Sequence[str]) -> bool:
        """True when an update of the recipe already lists these experiences (a resumed run decides once)."""
        wanted = set(experience_ids)
        return any(u.item_id == item_id and wanted <= set(u.experience_ids)
                   for u in self.store.list_updates(limit=10_000_000, carrier=CarrierKind.context.value))

    def candidates(self, family: str | None = None) -> list[CarrierItem]:
        """Recipes waiting for their replay, oldest first."""
        return [item for item, state in self.items().values()
                if state == "candidate" and (family is None or item.scope.family == family)]

    def oldest_per_family(self, n: int) -> list[CarrierItem]:
        """Up to `n` waiting recipes of each family, oldest first, families in name order: what a round replays."""
        waiting = self.candidates()
        return [c for family in sorted({c.scope.family or "" for c in waiting})
                for c in [c for c in waiting if (c.scope.family or "") == family][:n]]

    def decide(self, item_id: str, episodes: Sequence[tuple[Experience, Experience]], *,
               actor: str | None = None) -> Update:
        """The replay gate over (under the active recipe, under this one) train episodes of the same small worlds.

        The carrier runs no episodes: the flywheel runs the pairs and calls this. No regression over at
        least `skills_min_pairs` pairs activates the recipe (and supersedes the family's active one); a
        regression rejects it.
        """
        item, state = self.get(item_id)
        if state != "candidate":
            raise InvalidInputError(f"recipe {item_id} is {state}; only a candidate can be decided")
        for before, after in episodes:
            if before.small_world != after.small_world or before.small_world.split is not Split.train:
                raise InvalidInputError(f"pair {before.id}/{after.id}: both arms must play the same train small world")
        wins = sum(b.outcome is Outcome.passed for _, b in episodes)
        base = sum(a.outcome is Outcome.passed for a, _ in episodes)
        gate = gates.skills_replay_gate(len(episodes), len(episodes), wins, base, config=self.config,
                                        name="recipe_replay", arms=("under this recipe", "under the one in force"))
        ids = [e.id for pair in episodes for e in pair]
        regressed = len(episodes) >= self.config.skills_min_pairs
        op = UpdateOp.activate if gate.passed else UpdateOp.reject if regressed else UpdateOp.propose
        with self.store.transaction():  # the superseded recipe and the activation: a kill leaves both or neither
            previous = self.active(item.scope.family or "") if gate.passed else None
            if previous is not None:
                self.store.append_update(self._update(previous.id, UpdateOp.supersede, gate, ids, actor))
            update = self._update(item_id, op, gate, ids, actor)
            self.store.append_update(update)
        return update

    # --- helpers ---------------------------------------------------------------------------------

    def _update(self, item_id: str, op: UpdateOp, gate: GateResult, experience_ids: Sequence[str],
                actor: str | None) -> Update:
        item = next((i for i in self.store.carrier_items(CarrierKind.context.value) if i.id == item_id), None)
        scope = item.scope if item is not None else Scope(level=ScopeLevel.family)
        return Update(carrier=CarrierKind.context, op=op, item_id=item_id, scope=scope,
                      experience_ids=list(experience_ids), gate=gate, actor=actor or self.actor)

    def _activation_order(self) -> list[str]:
        order: list[str] = []
        for update in self.store.list_updates(limit=10_000_000, carrier=CarrierKind.context.value):
            if update.op is UpdateOp.activate and update.item_id:
                order.append(update.item_id)
        return order

    def _superseded_by_live(self, item_id: str, states: dict[str, tuple[CarrierItem, str]]) -> bool:
        """True when a later activation that superseded `item_id` is still live (not revoked)."""
        order = self._activation_order()
        later = order[order.index(item_id) + 1:] if item_id in order else []
        family = states[item_id][0].scope.family
        return any(states[i][1] == "active" and states[i][0].scope.family == family for i in later)

    def _pending(self, family: str, levers: Levers) -> bool:
        """A candidate with these levers already waits for its replay (propose once)."""
        return any(state == "candidate" and item.scope.family == family and levers_of(item) == levers
                   for item, state in self.items().values())


def levers_of(item: CarrierItem) -> Levers:
    """The levers a recipe item holds (its own id not filled in: see `RecipeBook.levers_for`)."""
    content = item.content if isinstance(item.content, dict) else {}
    return Levers.model_validate(content.get("levers") or {})
