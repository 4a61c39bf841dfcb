"""The weights carrier: LoRA adapters trained on verified experience, the last and strictest carrier.

    propose(card, folder) ─ candidate ─ (approve: a person, when required) ─ decide(held-out verdict)
        ─ gate: paired gain whose interval is above 0, no family regressing beyond its interval ─ active
    rollback ─ the active one is retired: the one active before it (still live) or the base runs again
    revoke an experience it was trained on ─ the adapter is revoked with it (lineage) ─ the same switch back

An adapter is a carrier item (`CarrierKind.weights`) whose content is its `TrainingCard`, its file and
sha256; its `experience_ids` are every experience a trained row came from, so revoking one revokes the
adapter (`lle.governance.lineage.cascade`). The item row never changes; its lifecycle is the sequence of
update rows over it. The active adapter is a pure read: the most recent activation of an adapter that is
neither revoked nor retired since. So a revoked or rolled-back adapter stops being served at once, with no
write needed, and `retrain_proposals` says which revocations call for a retrain without the revoked rows.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from pydantic import Field, JsonValue

from lle.core import CarrierItem, CarrierKind, GateResult, Record, Revocation, Scope, ScopeLevel, Update, UpdateOp
from lle.errors import InvalidInputError, UnknownIdError
from lle.governance.lineage import admit_item, denylist, update_history
from lle.store import Store

GLOBAL = Scope(level=ScopeLevel.global_)


class TrainingCard(Record):
    """What an adapter was trained on, how, and what it cost (written by `lle.train`, stored with the adapter)."""

    method: str
    """`sft` (expert iteration on verified successes) or `grpo`."""
    base_model: str
    """Catalog name or file name of the base the adapter applies to."""
    base_sha256: str | None = None
    """sha256 of the base GGUF file: an adapter is only loaded on this base."""
    snapshot_id: str | None = None
    """The dataset snapshot the rows came from (`lle dataset export`), when they came from one."""
    snapshot_sha256: str
    """sha256 of the rows file trained on."""
    rows: int = Field(ge=0)
    """Rows read from the snapshot."""
    exact_rows: int = Field(ge=0)
    """Rows whose prompt is the recorded one, byte for byte (the rest were rendered from their messages)."""
    train_rows: int = Field(ge=0)
    holdout_rows: int = Field(ge=0)
    """Rows kept out of training for early stopping (train-split tasks of their own: never held-out tasks)."""
    experience_ids: list[str] = Field(default_factory=list)
    """Every experience a trained row came from (lineage: revoking one taints the adapter)."""
    steps: int = Field(ge=0)
    """Optimizer steps taken (early stopping may end before the configured number)."""
    best_step: int = Field(ge=0)
    """The step whose adapter was kept (lowest holdout loss)."""
    rank: int = Field(ge=1)
    alpha: float
    learning_rate: float
    target_modules: list[str]
    losses: list[float] = Field(default_factory=list)
    """Training loss per step (completion tokens only)."""
    holdout_losses: list[tuple[int, float]] = Field(default_factory=list)
    """(step, loss) at each holdout evaluation."""
    beta: float | None = None
    """GRPO: the weight of the KL penalty to the base."""
    kl: list[float] = Field(default_factory=list)
    """GRPO: the mean per-token KL to the base at each step."""
    groups: int = Field(default=0, ge=0)
    """GRPO: groups (attempts at one small world) whose rewards differed, the only ones that teach."""
    wall_seconds: float = Field(ge=0)
    threads: int = Field(ge=1)
    device: str = "cpu"
    adapter_file: str
    """File name of the GGUF adapter, next to the card."""
    adapter_sha256: str


@dataclass(frozen=True)
class HeldOutVerdict:
    """The paired held-out comparison of an adapter against what runs now (computed by the flywheel)."""

    pairs: int
    difference: float
    """Adapter success rate minus the current policy's, on the same held-out small worlds."""
    low: float
    high: float
    """The difference's interval."""
    regressed: Sequence[str] = ()
    """Families whose own interval lies wholly below 0."""


@dataclass(frozen=True)
class Adapter:
    item: CarrierItem
    state: str
    """candidate, approved, rejected, active, standby (activated before, live, not the one served), retired,
    revoked."""
    card: TrainingCard
    path: Path

    @property
    def id(self) -> str:
        return self.item.id


@dataclass
class WeightsCarrier:
    store: Store
    require_approval: bool = False
    """When True an adapter needs a person's `approve` before its gate can activate it."""
    actor: str = "router"

    kind = CarrierKind.weights

    # --- reading ---------------------------------------------------------------------------------

    def adapters(self) -> list[Adapter]:
        """Every adapter with its state, oldest first."""
        history = update_history(self.store, CarrierKind.weights.value)
        denied = denylist(self.store)
        served = self._served(history)
        out = []
        for item in self.store.carrier_items(CarrierKind.weights.value):
            ops = [u.op for u in history.get(item.id, [])]
            if denied.blocks_item(item):
                state = "revoked"
            elif item.id == served:
                state = "active"
            elif UpdateOp.activate in ops:
                state = "retired" if ops[-1] is UpdateOp.retire else "standby"
            elif UpdateOp.reject in ops:
                state = "rejected"
            else:
                state = "approved" if UpdateOp.admit in ops else "candidate"
            out.append(_adapter(item, state))
        return out

    def get(self, item_id: str) -> Adapter:
        for adapter in self.adapters():
            if adapter.id == item_id:
                return adapter
        raise UnknownIdError("adapter", item_id, "list adapters with `lle weights list`")

    def active(self) -> Adapter | None:
        """The adapter the policy runs with, or None for the base."""
        return next((a for a in self.adapters() if a.state == "active"), None)

    def _served(self, history: Mapping[str, list[Update]]) -> str | None:
        """The most recent activation (in ledger order) of an adapter neither revoked nor retired after it."""
        denied = denylist(self.store)
        items = {i.id: i for i in self.store.carrier_items(CarrierKind.weights.value)}
        order = [u.item_id for u in self.store.list_updates(limit=10_000_000, carrier=CarrierKind.weights.value)
                 if u.op is UpdateOp.activate]
        for item_id in reversed(order):
            item = items.get(item_id or "")
            if item is None or denied.blocks_item(item):
                continue
            ops = [u.op for u in history[item.id]]
            last_activation = max(i for i, op in enumerate(ops) if op is UpdateOp.activate)
            if UpdateOp.retire not in ops[last_activation:]:
                return item.id
        return None

    # --- writing ---------------------------------------------------------------------------------

    def propose(self, card: TrainingCard, folder: Path, *, actor: str | None = None) -> Adapter:
        """Record a trained adapter (its folder holds `card.adapter_file`) as a candidate."""
        path = folder / card.adapter_file
        if not path.is_file():
            raise InvalidInputError(f"adapter file {path} does not exist; train one with `lle weights train`")
        content: dict[str, JsonValue] = {"card": card.model_dump(mode="json"), "path": str(path.resolve())}
        item = CarrierItem(carrier=CarrierKind.weights, scope=GLOBAL, content=content,
                           experience_ids=list(card.experience_ids))
        gate = GateResult(name="weights_training", passed=True,
                          reasons=[f"{card.method} on {card.train_rows} rows of snapshot {card.snapshot_id or '-'}"])
        update = Update(carrier=CarrierKind.weights, op=UpdateOp.propose, item_id=item.id, scope=GLOBAL,
                        experience_ids=list(card.experience_ids), gate=gate, actor=actor or self.actor)
        with self.store.transaction():
            admit_item(self.store, item, update)
        return _adapter(item, "candidate")

    def approve(self, item_id: str, actor: str) -> Update:
        """A person's approval, required by `require_approval` before the gate can activate."""
        adapter = self.get(item_id)
        if adapter.state != "candidate":
            raise InvalidInputError(f"adapter {item_id} is {adapter.state}; only a candidate can be approved")
        return self._write(adapter, UpdateOp.admit, GateResult(name="weights_approval", passed=True,
                                                               reasons=[f"approved by {actor}"]), actor)

    def decide(self, item_id: str, verdict: HeldOutVerdict, *, actor: str | None = None) -> Update:
        """The gate: activate on a paired held-out gain whose interval is above 0 with no family regressing."""
        adapter = self.get(item_id)
        if adapter.state not in ("candidate", "approved"):
            raise InvalidInputError(f"adapter {item_id} is {adapter.state}; only a candidate can be decided")
        reasons = [f"held-out difference {verdict.difference:+.3f} [{verdict.low:+.3f}, {verdict.high:+.3f}] over "
                   f"{verdict.pairs} pairs"]
        if verdict.low <= 0:
            reasons.append("the interval is not above 0")
        if verdict.regressed:
            reasons.append(f"regressed: {', '.join(verdict.regressed)}")
        if self.require_approval and adapter.state != "approved":
            reasons.append("no person approved it (`lle weights approve`)")
            gate = GateResult(name="weights_heldout", passed=False, reasons=reasons)
            return self._write(adapter, UpdateOp.propose, gate, actor)  # waits: approval may still come
        passed = verdict.low > 0 and not verdict.regressed
        gate = GateResult(name="weights_heldout", passed=passed, reasons=reasons)
        return self._write(adapter, UpdateOp.activate if passed else UpdateOp.reject, gate, actor)

    def activate(self, item_id: str, actor: str, reason: str) -> Update:
        """Serve again an adapter that passed its gate before (standby or retired): one switch."""
        adapter = self.get(item_id)
        if adapter.state not in ("standby", "retired"):
            raise InvalidInputError(f"adapter {item_id} is {adapter.state}; only one that passed its gate before "
                                    "(standby or retired) can be activated by hand")
        return self._write(adapter, UpdateOp.activate, GateResult(name="weights_manual", passed=True,
                                                                  reasons=[reason]), actor)

    def rollback(self, actor: str, reason: str) -> tuple[Update, Adapter | None]:
        """Retire the active adapter; returns the update and what is served now (None: the base)."""
        current = self.active()
        if current is None:
            raise InvalidInputError("no adapter is active; the base model is already served")
        update = self._write(current, UpdateOp.retire, GateResult(name="weights_rollback", passed=True,
                                                                  reasons=[reason]), actor)
        return update, self.active()

    def retrain_proposals(self) -> list[tuple[Adapter, Revocation]]:
        """Adapters that were activated and then revoked with what they were trained on: each calls for a retrain
        on a snapshot without the revoked rows, for the revocation's reason."""
        revocations = self.store.list_revocations()
        out = []
        history = update_history(self.store, CarrierKind.weights.value)
        for adapter in self.adapters():
            if adapter.state != "revoked" or not any(u.op is UpdateOp.activate for u in history.get(adapter.id, [])):
                continue
            rev = next((r for r in revocations if adapter.id in r.cascade or r.target == adapter.id), None)
            if rev is not None:
                out.append((adapter, rev))
        return out

    def _write(self, adapter: Adapter, op: UpdateOp, gate: GateResult, actor: str | None) -> Update:
        update = Update(carrier=CarrierKind.weights, op=op, item_id=adapter.id, scope=adapter.item.scope,
                        experience_ids=list(adapter.item.experience_ids), gate=gate, actor=actor or self.actor)
        self.store.append_update(update)
        return update


def served_name(adapter: Adapter) -> str:
    """The model name an adapter is served under (`lle serve --adapter`) and recorded with: BASE:ADAPTER_ID."""
    return f"{adapter.card.base_model}:{adapter.id}"


def _adapter(item: CarrierItem, state: str) -> Adapter:
    content = item.content if isinstance(item.content, dict) else {}
    return Adapter(item, state, TrainingCard.model_validate(content.get("card")), Path(str(content.get("path"))))
