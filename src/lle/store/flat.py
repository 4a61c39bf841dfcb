"""The store for people (migration m007): flat, typed columns and links for datasette and sqlite-utils.

Most of it is schema only — generated columns computed from each row's own JSON body, and views —
so nothing here runs for them. What needs a write is `experience_steps`: a finished experience's
steps with the columns people facet on, declared to reference the experience (datasette links each
step to it, and counts an experience's steps on its page). It cannot be a key on `steps` itself: a
running episode commits its steps before its experience exists.
"""

from __future__ import annotations

from typing import Any, Protocol


class _Ledger(Protocol):
    """What these functions use of a `Store` (typed structurally: `sqlite.py` calls them, so they cannot
    import it)."""

    dialect: str
    conn: Any

VIEWS = ("episode_runs", "experiences_flat", "steps_flat", "updates_flat")
"""The views m007 makes, one per concept (see docs/07-store.md)."""
STEP_COLUMNS = ("tool", "requested_tool", "status", "allowed", "has_error", "n_changes", "model", "prompt_tokens",
                "completion_tokens", "has_prompt")
"""The generated columns of `steps`, each read from its body."""


def list_steps(store: _Ledger, experience_id: str) -> None:
    """Write the experience's `experience_steps` rows from its stored steps' generated columns (so they are
    the body's values by construction); inside the transaction that writes the experience row."""
    store.conn.execute(
        "INSERT INTO experience_steps(experience_id, idx, tool, status, allowed, has_error)"
        " SELECT experience_id, idx, tool, status, allowed, has_error FROM steps WHERE experience_id = ? ORDER BY idx",
        (experience_id,))


def foreign_key_problems(store: _Ledger) -> list[tuple[str, str]]:
    """(table, parent table) of every row whose declared foreign key does not hold; [] when all hold.

    SQLite's `PRAGMA foreign_key_check`; PostgreSQL checks its keys on every commit, so it has none."""
    if store.dialect != "sqlite":
        return []
    return [(str(r[0]), str(r[2])) for r in store.conn.execute("PRAGMA foreign_key_check")]
