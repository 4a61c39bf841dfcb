"""Episodic-memory rows (migration m003) and the full-text queries memory retrieval runs.

Functions over a `Store`: embeddings (`memory_vectors`, one per item and model), learned utility
(`memory_utility`, one row per update) and the FTS5 `search` table read as memory's BM25 index.
Writes go through `Store.transaction()`, so inside a caller's transaction they join it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any, cast

import apsw

from lle.core import utcnow
from lle.store import pg_text
from lle.store.sqlite import Store

Tokenize = Callable[[bytes], list[tuple[int, int, str]]]
"""Query text (UTF-8) → (start byte, end byte, token) as FTS5 indexes it."""


def query_tokenizer(store: Store) -> Tokenize:
    """The `search` table's own tokenizer (porter over unicode61), in query mode; on PostgreSQL its
    text search configuration's stems, asked of the server."""
    if store.dialect == "postgres":
        conn = cast(pg_text.PgConnection, store.conn)
        return lambda data: pg_text.tokenize(conn, data)
    tokenize = store.conn.fts5_tokenizer("porter", ["unicode61"])
    return lambda data: cast(list[tuple[int, int, str]], tokenize(data, apsw.FTS5_TOKENIZE_QUERY, None))


def add_row_filter(store: Store, name: str, keep: Callable[[int], bool]) -> None:
    """Make `name(rowid)` callable in `matching_rowids`: FTS rows it rejects are never ranked."""
    if store.dialect == "postgres":  # no Python inside the server: matching_rowids calls it per row here
        store.row_filters[name] = keep  # type: ignore[attr-defined]
        return
    store.conn.create_scalar_function(name, cast(Any, keep), 1)  # apsw types its callbacks loosely


def search_rows(store: Store, kind: str, *, after: int) -> list[tuple[int, str]]:
    """(rowid, item id) of `kind`'s `search` rows written after rowid `after`, in writing order."""
    return [(int(r), str(i)) for r, i in store.conn.execute(
        "SELECT rowid, ref_id FROM search WHERE rowid > ? AND kind = ? ORDER BY rowid", (after, kind))]


def doc_freq(store: Store, match: str, *, cap: int) -> int:
    """Rows of `search` matching the FTS5 expression `match`, counted up to `cap`."""
    if store.dialect == "postgres":
        tsquery, args = pg_text.match_query(match)
        row = store.conn.execute(f"SELECT count(*) FROM (SELECT 1 FROM search WHERE tsv @@ ({tsquery}) LIMIT ?) c",
                                 (*args, cap)).fetchone()
        return int(row[0]) if row else 0
    row = store.conn.execute("SELECT count(*) FROM (SELECT 1 FROM search WHERE search MATCH ? LIMIT ?)",
                             (match, cap)).fetchone()
    return int(row[0]) if row else 0


def matching_rowids(store: Store, match: str, row_filter: str, *, limit: int) -> list[int]:
    """`search` rowids matching `match` that `row_filter` keeps, best BM25 rank first."""
    # The filter runs per matching row before bm25() is computed, so rows it rejects never
    # crowd the kept ones out of the LIMIT.
    if store.dialect == "postgres":
        # The filter is Python here, so it runs on the ranked rows as they stream in; the caller
        # bounds how many rows match (its BM25 budget), so reading past rejected ones stays cheap.
        keep = store.row_filters[row_filter]  # type: ignore[attr-defined]
        tsquery, args = pg_text.match_query(match)
        out: list[int] = []
        for (rowid,) in store.conn.execute(
                f"SELECT rowid FROM search, (SELECT {tsquery} AS q) m WHERE tsv @@ m.q"
                " ORDER BY ts_rank(tsv, m.q) DESC, rowid", args):
            if keep(int(rowid)):
                out.append(int(rowid))
                if len(out) >= limit:
                    break
        return out
    return [int(r[0]) for r in store.conn.execute(
        f"SELECT rowid FROM search WHERE search MATCH ? AND {row_filter}(rowid) ORDER BY rank LIMIT ?",
        (match, limit))]


def vectors(store: Store, model: str, ids: list[str]) -> dict[str, bytes]:
    """Stored embeddings (float32 little-endian) of `ids` under `model`."""
    if store.dialect == "postgres":
        return {str(i): bytes(v) for i, v in store.conn.execute(
            "SELECT item_id, vector FROM memory_vectors WHERE model = ? AND item_id = ANY(?)",
            (model, pg_text.in_list(ids)))}
    return {str(i): bytes(v) for i, v in store.conn.execute(
        "SELECT item_id, vector FROM memory_vectors WHERE model = ? AND item_id IN (SELECT value FROM json_each(?))",
        (model, json.dumps(ids)))}


def add_vectors(store: Store, model: str, dim: int, rows: Iterable[tuple[str, bytes]], *,
                ignore: bool = False) -> None:
    """Store embeddings in one transaction; `ignore`: keep a vector already stored for an item."""
    sql = (f"INSERT {'OR IGNORE ' if ignore else ''}INTO memory_vectors(item_id, model, dim, vector, created_at)"
           " VALUES (?, ?, ?, ?, ?)")
    with store.transaction():
        if store.dialect == "postgres":  # one pipelined round trip for the batch, not one per vector
            at = utcnow().isoformat()
            cast(pg_text.PgConnection, store.conn).executemany(sql, [(i, model, dim, v, at) for i, v in rows])
            return
        for item_id, vector in rows:
            store.conn.execute(sql, (item_id, model, dim, vector, utcnow().isoformat()))


def utility_rows(store: Store, *, after: int) -> list[tuple[int, str, float]]:
    """(seq, item id, Q) of utility updates after `after`, in order."""
    return [(int(s), str(i), float(q)) for s, i, q in store.conn.execute(
        "SELECT seq, item_id, q FROM memory_utility WHERE seq > ? ORDER BY seq", (after,))]


def latest_utility(store: Store, item_id: str) -> float | None:
    """An item's current Q, or None before its first update."""
    row = store.conn.execute("SELECT q FROM memory_utility WHERE item_id = ? ORDER BY seq DESC LIMIT 1",
                             (item_id,)).fetchone()
    return float(row[0]) if row else None


def append_utility(store: Store, item_id: str, *, reward: float, alpha: float, q: float,
                   experience_id: str | None) -> None:
    with store.transaction():
        store.conn.execute(
            "INSERT INTO memory_utility(item_id, reward, alpha, q, experience_id, at) VALUES (?, ?, ?, ?, ?, ?)",
            (item_id, reward, alpha, q, experience_id, utcnow().isoformat()))
