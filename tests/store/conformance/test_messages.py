"""The population's bus and lineage rows (m008) on both backends: appended, read back in order, never changed."""

from __future__ import annotations

from datetime import timedelta

import pytest

from lle.core import utcnow
from lle.population.bus import Bus
from lle.population.types import Intent, Message
from lle.store import Store
from lle.store import messages as rows


def test_messages_and_copies_round_trip_and_stay_append_only(store: Store) -> None:
    bus, t0 = Bus(store), utcnow()
    first = bus.post(Message(sender="a", intent=Intent.share, ttl_s=60, created_at=t0, skill_ids=["itm_1"],
                             payload={"descriptor": {"name": "x", "ünï": [1, 2.5, None]}}))
    second = bus.post(Message(sender="b", recipients=["a"], intent=Intent.declined, reply_to=first.id,
                              created_at=t0, ttl_s=None, payload={"state": "rejected"}))
    assert bus.messages() == [first, second]
    assert bus.messages(sender="b") == [second] and bus.messages(intent=Intent.share) == [first]
    assert bus.inbox("b", now=t0) == [] and bus.inbox("c", now=t0) == [first]
    assert bus.inbox("c", now=t0 + timedelta(seconds=60)) == []
    [row] = rows.list_messages(store, intent="share")
    assert row.expires_at == (t0 + timedelta(seconds=60)).isoformat() and row.priority == 5
    rows.append_copy(store, rows.CopyRow("b", "itm_2", "a", "itm_1", first.id, t0.isoformat()))
    rows.append_copy(store, rows.CopyRow("b", "itm_2", "a", "itm_1", first.id, t0.isoformat()))  # once only
    assert [r.item_id for r in rows.copies(store, source_agent="a", source_item="itm_1")] == ["itm_2"]
    assert rows.copies(store, source_item="itm_9") == []
    for table in ("messages", "shared_copies"):
        with pytest.raises(Exception, match="append-only"), store.transaction():
            store.conn.execute(f"DELETE FROM {table}")
    assert len(bus.messages()) == 2
