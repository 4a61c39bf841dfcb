"""Revocation by content (migration m006): hashes that outlive ids.

An id names one record; a copy of the same trajectory imported under a new id is another record with
the same content. So each revocation also records the content of every experience it revokes — the
experience's `content_hash` and `trajectory_hash` (its steps' requested and executed actions and
observations in its world, without ids, timestamps, thoughts or timings) — and each stored
experience keeps its trajectory hash, so a copy is found by one indexed join. Functions over a `Store`.
"""

from __future__ import annotations

from collections.abc import Iterable

from lle.store.sqlite import Store
from lle.store.trajectory import CONTENT, TRAJECTORY, hashes_of, trajectory_hash

__all__ = ["CONTENT", "TRAJECTORY", "copies_of", "hashes_of", "record_revoked", "revoked_hashes", "trajectory_hash"]


def record_revoked(store: Store, revocation_id: str, rows: Iterable[tuple[str, str, str]]) -> None:
    """Record (experience id, kind, hash) of the content a revocation revokes (inside its transaction)."""
    with store.transaction():
        for experience_id, kind, digest in rows:
            store.conn.execute("INSERT OR IGNORE INTO revoked_content(revocation_id, experience_id, kind, hash)"
                               " VALUES (?, ?, ?, ?)", (revocation_id, experience_id, kind, digest))


def revoked_hashes(store: Store, revoked_ids: Iterable[str]) -> dict[str, str]:
    """Every revoked content hash → the revoked experience it came from.

    From the hashes revocations recorded, and from the stored experiences among `revoked_ids` (so a
    revocation made before m006, or an experience revoked through the cascade of an item, counts too).
    """
    return store.revoked_hashes(revoked_ids)


def copies_of(store: Store, hashes: dict[str, str]) -> dict[str, str]:
    """Stored experience id → the revoked experience whose content it repeats (the originals included)."""
    return store.copies_of(hashes)
