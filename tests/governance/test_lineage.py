"""Revocation with lineage: a stateful property test and the source selectors."""

from __future__ import annotations

import shutil
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, consumes, invariant, rule

from factories import build_experience
from lle.core import CarrierItem, CarrierKind, GateResult, Scope, ScopeLevel, Update, UpdateOp
from lle.errors import InvalidInputError, UnknownIdError
from lle.governance import lineage
from lle.store import Store

SCOPE = Scope(level=ScopeLevel.project, family="sql", project="shop")
FAST_TMP = "/dev/shm" if Path("/dev/shm").is_dir() else None  # the property runs thousands of commits


def _admit(db: Store, item: CarrierItem) -> Update:
    update = Update(carrier=item.carrier, op=UpdateOp.admit, item_id=item.id, scope=item.scope,
                    experience_ids=list(item.experience_ids), gate=GateResult(name="test", passed=True))
    lineage.admit_item(db, item, update)
    return update


class RevocationMachine(RuleBasedStateMachine):
    """Admit items from experiences, derive items from items, revoke anything, try to re-admit.

    The model: an item is live iff neither it nor any ancestor (item or experience) was revoked.
    """

    experiences = Bundle("experiences")
    items = Bundle("items")

    def __init__(self) -> None:
        super().__init__()
        self.dir = tempfile.mkdtemp(dir=FAST_TMP)
        self.db = Store(Path(self.dir) / "lle.db")
        self.parents: dict[str, set[str]] = {}
        self.revoked: set[str] = set()
        self.updates: dict[str, str] = {}
        self.recorded = 0

    def teardown(self) -> None:
        self.db.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def ancestors(self, id_: str) -> set[str]:
        seen, todo = set(), [id_]
        while todo:
            for parent in self.parents.get(todo.pop(), set()):
                if parent not in seen:
                    seen.add(parent)
                    todo.append(parent)
        return seen

    def live(self, id_: str) -> bool:
        return id_ not in self.revoked and not (self.ancestors(id_) & self.revoked)

    @rule(target=experiences)
    def record(self) -> str:
        # Each a different trajectory: revocation is by content too, so identical copies fall together.
        self.recorded += 1
        return self.db.append_experience(build_experience(1, observation=f"row {self.recorded}")).id

    @rule(target=items, exp=experiences)
    def admit(self, exp: str) -> str:
        item = CarrierItem(carrier=CarrierKind.memory, scope=SCOPE, content={"from": exp}, experience_ids=[exp])
        self.parents[item.id] = {exp}
        if exp in self.revoked:
            with pytest.raises(InvalidInputError, match="revoked"):
                _admit(self.db, item)
        else:
            self.updates[item.id] = _admit(self.db, item).id
        return item.id

    @rule(target=items, sources=st.lists(items, min_size=1, max_size=3, unique=True))
    def derive(self, sources: list[str]) -> str:
        item = CarrierItem(carrier=CarrierKind.skills, scope=SCOPE, content={"from": sources}, derived_from=sources)
        self.parents[item.id] = set(sources)
        if any(self.db.kind_of(s) is None for s in sources):
            with pytest.raises(InvalidInputError, match="not stored"):  # its source was refused earlier
                _admit(self.db, item)
        elif not all(self.live(s) for s in sources):
            with pytest.raises(InvalidInputError, match="revoked"):
                _admit(self.db, item)
        else:
            self.updates[item.id] = _admit(self.db, item).id
        return item.id

    @rule(kind=st.sampled_from(["exp", "item", "update"]), data=st.data())
    def revoke(self, kind: str, data: st.DataObject) -> None:
        stored_items = [i for i in self.parents if self.db.kind_of(i)]
        pool = {"exp": sorted({p for ps in self.parents.values() for p in ps if p.startswith("exp_")}),
                "item": sorted(stored_items), "update": sorted(self.updates.values())}[kind]
        if not pool:
            return
        chosen = data.draw(st.sampled_from(pool))
        rev = lineage.revoke(self.db, chosen, reason="property test", author="hypothesis")
        # Revoking an update revokes the item it admitted.
        root = next((i for i, u in self.updates.items() if u == chosen), chosen)
        self.revoked |= {root, chosen}
        derived = {i for i in stored_items if root in self.ancestors(i)}
        assert derived <= set(rev.cascade)

    @rule(item=consumes(items))
    def readmit(self, item: str) -> None:
        if not self.db.kind_of(item) or self.live(item):
            return
        stored = next(i for i in self.db.carrier_items() if i.id == item)
        with pytest.raises(InvalidInputError, match="revoked"):
            _admit(self.db, stored)

    @invariant()
    def reads_never_return_revoked_lineage(self) -> None:
        active = {i.id for i in lineage.active_items(self.db)}
        stored = {i.id for i in self.db.carrier_items()}
        assert active == {i for i in stored if self.live(i)}


RevocationMachine.TestCase.settings = settings(
    max_examples=200, stateful_step_count=30, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
test_revocation_cascades_and_is_never_undone = pytest.mark.slow(RevocationMachine.TestCase)


def test_source_selectors(store: Store, make_experience) -> None:  # type: ignore[no-untyped-def]
    shop = store.append_experience(make_experience(project="shop"))
    library = store.append_experience(make_experience(project="library"))
    roots, _ = lineage.plan(store, "world:sql/shop-v1")
    assert roots == [shop.id]
    assert lineage.plan(store, "model:scripted")[0] == sorted([shop.id, library.id])
    now = datetime.now(UTC)
    window = f"time:{(now - timedelta(hours=1)).isoformat()}..{(now + timedelta(hours=1)).isoformat()}"
    assert sorted(lineage.plan(store, window)[0]) == sorted([shop.id, library.id])
    dry = lineage.revoke(store, "world:sql/shop-v1", "bad world", "test", dry_run=True)
    assert dry.cascade and store.count("revocations") == 0
    lineage.revoke(store, "world:sql/shop-v1", "bad world", "test")
    later = make_experience(project="shop")
    assert lineage.denylist(store).blocks_experience(later) == "world:sql/shop-v1"
    assert lineage.denylist(store).blocks_experience(make_experience(project="library")) is None
    for bad in ("time:yesterday..today", "world:", "exp_missing"):
        with pytest.raises((InvalidInputError, UnknownIdError)):
            lineage.revoke(store, bad, "x", "test")
