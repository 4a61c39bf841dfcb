"""What the flywheel keeps in a strategy's store: which experiences were routed (migration m004),
and its batches' episodes read back for the report. Functions over a `Store`."""

from __future__ import annotations

from lle.core import utcnow
from lle.store.sqlite import Store


def is_routed(store: Store, experience_id: str) -> bool:
    return store.conn.execute("SELECT 1 FROM routed WHERE experience_id=?", (experience_id,)).fetchone() is not None


def mark_routed(store: Store, experience_id: str, run_id: str) -> None:
    """Record that the experience was routed (once: marking it again changes nothing)."""
    with store.transaction():
        store.conn.execute("INSERT OR IGNORE INTO routed(experience_id, run_id, at) VALUES (?, ?, ?)",
                           (experience_id, run_id, utcnow().isoformat()))


def batch_results(store: Store, prefix: str) -> list[tuple[str, str, str, str, int]]:
    """(batch, experience id, world, outcome, steps) of every finished episode whose batch starts
    with `prefix`, in start order."""
    return [(str(b), str(i), str(w), str(o), int(n)) for b, i, w, o, n in store.conn.execute(
        "SELECT e.batch, x.id, x.world, x.outcome, x.n_steps FROM episodes e JOIN experiences x ON x.id = e.id "
        "WHERE e.batch LIKE ? ORDER BY e.rowid", (prefix + "%",))]


def batches(store: Store, prefix: str) -> dict[str, str]:
    """Episode id → batch, for every episode (finished or not) whose batch starts with `prefix`."""
    return {str(i): str(b) for i, b in store.conn.execute("SELECT id, batch FROM episodes WHERE batch LIKE ?",
                                                          (prefix + "%",))}


def run_ids(store: Store) -> set[str]:
    """The runs this store's episodes were played for: each batch name up to its first `/` (`RUN/STRATEGY/…`)."""
    head = "split_part(batch, '/', 1)" if store.dialect == "postgres" else "substr(batch, 1, instr(batch, '/') - 1)"
    return {str(r[0]) for r in store.conn.execute(f"SELECT DISTINCT {head} FROM episodes WHERE batch LIKE '%/%'")}
