"""Running untrusted SQL read-only, with a time limit and a row cap, and comparing results.

Three walls, each enough alone against writes: the file is opened with `mode=ro`; an authorizer
allows only reads (SELECT, table reads, functions, recursive CTEs, a few schema pragmas), so
INSERT, ATTACH, PRAGMA writes and transactions fail at prepare time; and nothing the agent can
reach holds a writable handle. A progress handler interrupts queries past their time limit, and
SQLite limits bound the size of any one value (no `randomblob(1e9)`).
"""

from __future__ import annotations

import math
import sqlite3
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from lle.worlds.sql.generate import Cell

DEFAULT_TIME_LIMIT_S = 2.0
DEFAULT_ROW_CAP = 200
ABS_TOL = 0.005 + 1e-9
"""Dollars rounded to cents on one side and unrounded on the other still match."""
REL_TOL = 1e-6
ALLOWED_PRAGMAS = frozenset({"table_info", "table_xinfo", "table_list", "index_list", "index_info",
                             "foreign_key_list"})
DENIED_FUNCTIONS = frozenset({"load_extension"})
_READS = frozenset({sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, getattr(sqlite3, "SQLITE_RECURSIVE", 33)})

FailureKind = Literal["empty", "denied", "timeout", "error"]


class QueryFailed(Exception):
    """An untrusted query did not run to a result; `kind` says why, the message says how."""

    def __init__(self, kind: FailureKind, message: str) -> None:
        super().__init__(message)
        self.kind: FailureKind = kind


@dataclass(frozen=True)
class QueryResult:
    columns: tuple[str, ...]
    rows: tuple[tuple[Cell, ...], ...]
    capped: bool
    """More rows existed than the cap; `rows` holds only the first `row_cap`."""


def _authorize(action: int, arg1: str | None, arg2: str | None, _db: str | None, _src: str | None) -> int:
    if action in _READS:
        return sqlite3.SQLITE_OK
    if action == sqlite3.SQLITE_FUNCTION:
        return sqlite3.SQLITE_DENY if (arg2 or "").lower() in DENIED_FUNCTIONS else sqlite3.SQLITE_OK
    if action == sqlite3.SQLITE_PRAGMA and (arg1 or "").lower() in ALLOWED_PRAGMAS:
        return sqlite3.SQLITE_OK
    return sqlite3.SQLITE_DENY


def connect_readonly(path: Path) -> sqlite3.Connection:
    """A read-only connection to the database file at `path`, with the authorizer and size limits on."""
    uri = path.resolve().as_uri() + "?mode=ro"
    conn = sqlite3.connect(uri, uri=True, check_same_thread=False, isolation_level=None)
    conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, 1_000_000)
    conn.setlimit(sqlite3.SQLITE_LIMIT_SQL_LENGTH, 20_000)
    conn.setlimit(sqlite3.SQLITE_LIMIT_ATTACHED, 0)
    conn.set_authorizer(_authorize)
    return conn


def run_query(conn: sqlite3.Connection, sql: str, *, time_limit_s: float = DEFAULT_TIME_LIMIT_S,
              row_cap: int = DEFAULT_ROW_CAP) -> QueryResult:
    """Run one statement; raise `QueryFailed` for an empty, denied, timed-out or failing query."""
    text = sql.strip()
    if not text:
        raise QueryFailed("empty", "the query is empty; write one SELECT statement")
    deadline = time.monotonic() + time_limit_s
    conn.set_progress_handler(lambda: int(time.monotonic() > deadline), 1000)
    cursor: sqlite3.Cursor | None = None
    try:
        cursor = conn.execute(text)
        if cursor.description is None:
            raise QueryFailed("error", "the statement returns no rows; write one SELECT statement")
        columns = tuple(str(d[0]) for d in cursor.description)
        rows = [tuple(r) for r in cursor.fetchmany(row_cap + 1)]
    except QueryFailed:
        raise
    except sqlite3.Error as err:
        message = str(err)
        if "interrupted" in message:
            raise QueryFailed("timeout", f"the query ran past the {time_limit_s:g} s limit and was stopped; "
                                         "simplify it (avoid cross joins, unbounded recursion)") from err
        if "not authorized" in message or "readonly" in message:
            raise QueryFailed("denied", "only read-only SELECT queries are allowed here (the database is "
                                        "read-only; no writes, ATTACH, transactions or settings)") from err
        raise QueryFailed("error", f"SQLite error: {message}") from err
    except (sqlite3.Warning, ValueError, OverflowError) as err:
        # e.g. two statements at once, or a NUL byte in the text
        raise QueryFailed("error", f"{err}") from err
    finally:
        if cursor is not None:
            cursor.close()
        conn.set_progress_handler(None, 0)
    return QueryResult(columns, tuple(rows[:row_cap]), len(rows) > row_cap)


def run_on_file(path: Path, sql: str, *, time_limit_s: float = DEFAULT_TIME_LIMIT_S,
                row_cap: int = DEFAULT_ROW_CAP) -> QueryResult:
    conn = connect_readonly(path)
    try:
        return run_query(conn, sql, time_limit_s=time_limit_s, row_cap=row_cap)
    finally:
        conn.close()


# --- comparison -----------------------------------------------------------------------------------------


def cells_equal(a: Cell, b: Cell) -> bool:
    if isinstance(a, int | float) and isinstance(b, int | float):
        return math.isclose(a, b, rel_tol=REL_TOL, abs_tol=ABS_TOL)
    return a == b


def _sort_key(row: Sequence[Cell]) -> tuple[tuple[int, float, str], ...]:
    # Numbers sort on a rounded value so that tolerance-equal rows land in the same place.
    key: list[tuple[int, float, str]] = []
    for v in row:
        if v is None:
            key.append((0, 0.0, ""))
        elif isinstance(v, int | float):
            key.append((1, round(float(v), 2), ""))
        elif isinstance(v, bytes):
            key.append((3, 0.0, v.hex()))
        else:
            key.append((2, 0.0, str(v)))
    return tuple(key)


def _rows_equal(got: Sequence[Sequence[Cell]], want: Sequence[Sequence[Cell]]) -> bool:
    return all(all(cells_equal(x, y) for x, y in zip(g, w, strict=True)) for g, w in zip(got, want, strict=True))


def same_result(got: QueryResult, want: QueryResult, *, ordered: bool) -> tuple[bool, str]:
    """(equal?, why not). Column names are ignored; rows are a multiset unless `ordered`.

    The reason names what differs, never the expected values, so it may be shown to the agent.
    """
    if len(got.columns) != len(want.columns):
        return False, f"wrong number of columns ({len(got.columns)})"
    if len(got.rows) != len(want.rows):
        return False, f"wrong number of rows ({len(got.rows)})"
    if ordered:
        if _rows_equal(got.rows, want.rows):
            return True, "same rows in the same order"
        if _rows_equal(sorted(got.rows, key=_sort_key), sorted(want.rows, key=_sort_key)):
            return False, "right rows in the wrong order"
        return False, "different values"
    if _rows_equal(sorted(got.rows, key=_sort_key), sorted(want.rows, key=_sort_key)):
        return True, "same rows"
    return False, "different values"
