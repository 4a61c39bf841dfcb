"""Dataset export snapshots (migration m005): one row per exported file, plus the experiences and
dataset items each of its rows was built from. Functions over a `Store`."""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

from lle.store.sqlite import Store


class SnapshotRow(NamedTuple):
    id: str
    format: str
    n_rows: int
    sha256: str
    path: str
    created_at: str
    manifest: str
    """The manifest as stored (JSON)."""


def record_snapshot(store: Store, snapshot: SnapshotRow, sources: Iterable[tuple[int, str, str]]) -> None:
    """Store a snapshot and the (row index, experience id, item id) of its rows, in one transaction."""
    with store.transaction():
        store.conn.execute("INSERT INTO export_snapshots(id, format, n_rows, sha256, path, created_at, body)"
                           " VALUES (?, ?, ?, ?, ?, ?, ?)", tuple(snapshot))
        for index, experience_id, item_id in sources:
            store.conn.execute(
                "INSERT OR IGNORE INTO export_rows(snapshot_id, row_index, experience_id, item_id) VALUES (?, ?, ?, ?)",
                (snapshot.id, index, experience_id, item_id))


def snapshots(store: Store) -> list[SnapshotRow]:
    """Every snapshot, in id order."""
    return [SnapshotRow(str(i), str(f), int(n), str(h), str(p), str(c), str(b)) for i, f, n, h, p, c, b in
            store.conn.execute("SELECT id, format, n_rows, sha256, path, created_at, body FROM export_snapshots"
                               " ORDER BY id")]


def snapshot_sources(store: Store) -> list[tuple[str, str, str]]:
    """(snapshot id, experience id, item id) of every exported row."""
    return [(str(s), str(e), str(i)) for s, e, i in
            store.conn.execute("SELECT snapshot_id, experience_id, item_id FROM export_rows")]
