"""`lle store copy SRC DST`: a whole ledger from one store into an empty one, on either backend.

Rows are copied as stored (bodies, blobs and hashes byte for byte, nothing re-encoded), table by
table in the order of writing, in one transaction on the destination: all or nothing. Then both
sides are hashed table by table (sha256 over each row's values in writing order, rowids left out:
each backend numbers its own) and every experience read back from the destination must still match
its content hash. A copy back the other way hashes the same again.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from lle.errors import InvalidInputError, StoreError
from lle.store.sqlite import Store

TABLES: dict[str, tuple[str, ...]] = {
    "blobs": ("sha256", "size", "data"),
    "episodes": ("id", "small_world_id", "batch", "batch_key", "small_world", "policy", "runtime", "started_at"),
    "steps": ("experience_id", "idx", "body"),
    "evidence": ("id", "experience_id", "step", "anchor", "outcome", "strength", "body"),
    "experiences": ("id", "small_world_id", "world", "family", "project", "split", "outcome", "verification",
                    "score", "n_steps", "n_evidence", "content_hash", "created_at", "body"),
    "experience_steps": ("experience_id", "idx", "tool", "status", "allowed", "has_error"),
    "carrier_items": ("id", "carrier", "scope_level", "family", "project", "created_at", "body"),
    "updates": ("id", "carrier", "op", "item_id", "at", "body"),
    "revocations": ("id", "target", "at", "body"),
    "search": ("ref_id", "kind", "text"),
    "memory_vectors": ("item_id", "model", "dim", "vector", "created_at"),
    "memory_utility": ("item_id", "reward", "alpha", "q", "experience_id", "at"),
    "routed": ("experience_id", "run_id", "at"),
    "export_snapshots": ("id", "format", "n_rows", "sha256", "path", "created_at", "body"),
    "export_rows": ("snapshot_id", "row_index", "experience_id", "item_id"),
    "trajectory_hashes": ("experience_id", "hash"),
    "revoked_content": ("revocation_id", "experience_id", "kind", "hash"),
    "messages": ("id", "sender", "intent", "priority", "created_at", "expires_at", "body"),
    "shared_copies": ("agent", "item_id", "source_agent", "source_item", "message_id", "at"),
}
"""Every ledger table but `lle_migrations` (each store records its own), with the columns both backends share."""
ORDER = {"memory_utility": "seq"}
"""The column that orders a table by writing, where it is not `rowid`."""


@dataclass
class CopyReport:
    source: str
    destination: str
    tables: dict[str, dict[str, Any]] = field(default_factory=dict)
    """table -> {"rows": n, "sha256": digest} (the same on both sides, or the copy fails)."""
    experiences_verified: int = 0

    def as_json(self) -> dict[str, Any]:
        return {"source": self.source, "destination": self.destination, "tables": self.tables,
                "experiences_verified": self.experiences_verified}


def _rows(store: Store, table: str) -> Any:
    columns = ", ".join(TABLES[table])
    return store.conn.execute(f"SELECT {columns} FROM {table} ORDER BY {ORDER.get(table, 'rowid')}")


def _count(store: Store, table: str) -> int:
    row = store.conn.execute(f"SELECT count(*) FROM {table}").fetchone()
    return int(row[0]) if row else 0


def _plain(value: Any) -> Any:
    # bytes (vectors) as hex, so SQLite's BLOB and PostgreSQL's bytea hash alike.
    return bytes(value).hex() if isinstance(value, bytes | memoryview) else value


def table_digests(store: Store) -> dict[str, dict[str, Any]]:
    """table -> {"rows", "sha256"} over every row's values in writing order."""
    out = {}
    for table in TABLES:
        digest, n = hashlib.sha256(), 0
        for row in _rows(store, table):
            digest.update(json.dumps([_plain(v) for v in row], ensure_ascii=False).encode())
            digest.update(b"\n")
            n += 1
        out[table] = {"rows": n, "sha256": digest.hexdigest()}
    return out


def copy_store(source: Store, destination: Store) -> CopyReport:
    """Copy every ledger row of `source` into the empty `destination`, then verify both ways."""
    if source.schema_version != destination.schema_version:
        raise StoreError(f"{source.location} is at schema {source.schema_version}, {destination.location} at "
                         f"{destination.schema_version}: open both with the same lle (upgrade the older)")
    held = {t: n for t in TABLES if (n := _count(destination, t))}
    if held:
        raise InvalidInputError(f"{destination.location} is not empty ({held}); the ledger is append-only and ids are "
                                "unique: copy into a new, empty store")
    with destination.transaction():
        for table, columns in TABLES.items():
            if table == "search":  # each backend builds its own index from the text
                for ref_id, kind, text in _rows(source, table):
                    destination._index(str(ref_id), str(kind), str(text))
                continue
            insert = f"INSERT INTO {table}({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})"
            for row in _rows(source, table):
                destination.conn.execute(insert, tuple(row))
    report = CopyReport(str(source.location), str(destination.location), table_digests(source))
    copied = table_digests(destination)
    if copied != report.tables:
        wrong = [t for t in TABLES if copied[t] != report.tables[t]]
        raise StoreError(f"the copy in {destination.location} differs from {source.location} in {wrong}; "
                         "do not use it (copy again into a new, empty store)")
    for (exp_id,) in destination.conn.execute("SELECT id FROM experiences ORDER BY rowid"):
        exp = destination.get_experience(str(exp_id))
        if exp.compute_hash() != exp.content_hash:
            raise StoreError(f"{exp_id} in {destination.location} no longer matches its content hash")
        report.experiences_verified += 1
    return report
