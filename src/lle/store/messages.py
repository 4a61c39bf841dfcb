"""A population's message bus and shared-skill lineage (migration m008). Functions over a `Store`.

The store knows rows, not meanings: the typed message (`lle.population.types.Message`) is built and
validated above it; here a message is its indexed columns and its JSON body. Both tables are
append-only: a message is never edited, and a copy's lineage row outlives the copy's revocation.
"""

from __future__ import annotations

from typing import NamedTuple

from lle.store.sqlite import Store


class MessageRow(NamedTuple):
    id: str
    sender: str
    intent: str
    priority: int
    created_at: str
    expires_at: str | None
    body: str
    """The whole message as JSON."""


class CopyRow(NamedTuple):
    agent: str
    item_id: str
    source_agent: str
    source_item: str
    message_id: str
    at: str


def append_message(store: Store, row: MessageRow) -> None:
    """Append one message (its id must be new: a message is never rewritten)."""
    with store.transaction():
        store.conn.execute("INSERT INTO messages(id, sender, intent, priority, created_at, expires_at, body)"
                           " VALUES (?, ?, ?, ?, ?, ?, ?)", tuple(row))


def list_messages(store: Store, *, sender: str | None = None, intent: str | None = None,
                  limit: int = 10_000) -> list[MessageRow]:
    """Messages in the order they were appended, oldest first, optionally of one sender or intent."""
    where, args = [], []
    if sender is not None:
        where.append("sender = ?")
        args.append(sender)
    if intent is not None:
        where.append("intent = ?")
        args.append(intent)
    clause = f" WHERE {' AND '.join(where)}" if where else ""
    rows = store.conn.execute("SELECT id, sender, intent, priority, created_at, expires_at, body FROM messages"
                              f"{clause} ORDER BY rowid LIMIT ?", (*args, limit))
    return [MessageRow(str(i), str(s), str(n), int(p), str(c), None if e is None else str(e), str(b))
            for i, s, n, p, c, e, b in rows]


def append_copy(store: Store, row: CopyRow) -> None:
    """Record that `row.agent` holds `row.item_id`, a copy of `row.source_item` of `row.source_agent`."""
    with store.transaction():
        store.conn.execute("INSERT OR IGNORE INTO shared_copies(agent, item_id, source_agent, source_item, message_id,"
                           " at) VALUES (?, ?, ?, ?, ?, ?)", tuple(row))


def copies(store: Store, *, source_agent: str | None = None, source_item: str | None = None) -> list[CopyRow]:
    """Lineage rows, oldest first; with a source, only the copies made of it."""
    where, args = [], []
    if source_agent is not None:
        where.append("source_agent = ?")
        args.append(source_agent)
    if source_item is not None:
        where.append("source_item = ?")
        args.append(source_item)
    clause = f" WHERE {' AND '.join(where)}" if where else ""
    rows = store.conn.execute("SELECT agent, item_id, source_agent, source_item, message_id, at FROM shared_copies"
                              f"{clause} ORDER BY rowid", tuple(args))
    return [CopyRow(*(str(v) for v in r)) for r in rows]
