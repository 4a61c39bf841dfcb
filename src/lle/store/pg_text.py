"""PostgreSQL's side of the store's SQL: the connection wrapper and full-text search helpers.

The store's modules write SQL once, with `?` placeholders, and run it through `store.conn.execute`;
on PostgreSQL `conn` is a `PgConnection`, which turns the few SQLite spellings they share into
PostgreSQL's (`?` -> `%s`, `INSERT OR IGNORE` -> `ON CONFLICT DO NOTHING`). SQL that differs more
(JSON functions, full-text search) is written per dialect where it is used.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import apsw

from lle.errors import DiskFullError, StoreError

if TYPE_CHECKING:  # psycopg is an extra, imported by lle.store.postgres only when a URL asks for it
    import psycopg

TS_CONFIG = "english"
"""Porter stemming, like FTS5's `porter unicode61` tokenizer."""

_INSERT_OR_IGNORE = re.compile(r"^\s*INSERT\s+OR\s+IGNORE\s+INTO\b", re.IGNORECASE)
_PHRASE = re.compile(r'"((?:[^"]|"")*)"|\b(AND|OR)\b')


def translate(sql: str) -> str:
    """A statement written for SQLite as PostgreSQL reads it (only the spellings the store uses)."""
    out = sql.replace("%", "%%").replace("?", "%s")
    if _INSERT_OR_IGNORE.match(out):
        out = _INSERT_OR_IGNORE.sub("INSERT INTO", out, count=1).rstrip().rstrip(";") + " ON CONFLICT DO NOTHING"
    return out


class ConstraintViolation(apsw.ConstraintError):
    """A duplicate key or an append-only refusal on PostgreSQL, raised as the type SQLite raises for
    both, so callers that catch `apsw.ConstraintError` (the memory carrier's admit) work on either."""


class PgConnection:
    """`execute(sql, args)` like apsw's, on a psycopg connection (autocommit: the store opens its own
    transactions). Rows come back as tuples; the cursor iterates, `fetchone()`s and `fetchall()`s."""

    def __init__(self, raw: psycopg.Connection[Any]) -> None:
        from psycopg import errors

        self.raw = raw
        self.stems: dict[str, str] = {}
        """word -> its stem under TS_CONFIG ('' for a stop word), as `tokenize` asked the server."""
        # Integrity errors, and the P0001 the append-only trigger raises (lle_refuse_change, m001).
        self._refused = (errors.IntegrityError, errors.RaiseException)
        self._lost = (errors.OperationalError,)  # the server went away, or refused mid-session

    def execute(self, sql: str, args: Sequence[Any] | None = None) -> psycopg.Cursor[Any]:
        try:
            if args is None:  # no placeholders to translate: migrations and scripts run as written
                return self.raw.execute(sql)
            return self.raw.execute(translate(sql), list(args))
        except self._refused as err:
            raise ConstraintViolation(" ".join(str(err).split("CONTEXT:")[0].split())) from err
        except self._lost as err:
            raise _lost(err) from err

    @contextmanager
    def pipeline(self) -> Iterator[None]:
        """Statements inside are sent without waiting for each result (psycopg's pipeline mode); an
        error they raise is raised at the end of the block, as the type `execute` raises."""
        try:
            with self.raw.pipeline():
                yield
        except self._refused as err:
            raise ConstraintViolation(" ".join(str(err).split("CONTEXT:")[0].split())) from err
        except self._lost as err:
            raise _lost(err) from err

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        if not rows:
            return
        try:
            with self.raw.cursor() as cursor:
                cursor.executemany(translate(sql), [list(r) for r in rows])
        except self._refused as err:
            raise ConstraintViolation(" ".join(str(err).split("CONTEXT:")[0].split())) from err
        except self._lost as err:
            raise _lost(err) from err

    def close(self) -> None:
        self.raw.close()


def _lost(err: Exception) -> StoreError:
    first = (str(err).strip().splitlines() or [type(err).__name__])[0]
    if type(err).__name__ == "DiskFull":  # psycopg.errors.DiskFull, an OperationalError
        return DiskFullError(f"the PostgreSQL server's disk is full ({first}); nothing of this write was kept: "
                             "free space and run the same command again (resume continues)")
    return StoreError(f"the PostgreSQL store failed ({first}); nothing of the write in progress was kept: check "
                      "the server, then run the same command again (resume continues)")


def words(text: str) -> str:
    """The words FTS5's unicode61 tokenizer would index, space-separated: what `tsv` is built from.

    PostgreSQL's own parser keeps `DD/MM/YYYY` or `a.b@c.d` as one token; splitting on non-word
    characters first makes both backends find the same rows for the same query."""
    return " ".join(re.findall(r"\w+", text))


def match_query(match: str) -> tuple[str, list[str]]:
    """An FTS5 match expression the store builds (`"a" OR "b"`, `"a" AND "b"`, `"a" "b"`) as a
    PostgreSQL tsquery expression (SQL with `?` for each phrase, as the store writes it) and its arguments."""
    parts: list[str] = []
    args: list[str] = []
    op = "&&"
    for m in _PHRASE.finditer(match):
        if m.group(2):
            op = "||" if m.group(2).upper() == "OR" else "&&"
            continue
        if parts:
            parts.append(op)
        parts.append(f"plainto_tsquery('{TS_CONFIG}', ?)")
        args.append(words(m.group(1).replace('""', '"')))
        op = "&&"
    return (" ".join(parts) or f"plainto_tsquery('{TS_CONFIG}', '')"), args


def tokenize(conn: PgConnection, data: bytes) -> list[tuple[int, int, str]]:
    """(start byte, end byte, stem) of each word of `data` as the `search` table indexes it.

    Stop words ('english' drops them) have no stem and are left out, as a search for them finds nothing."""
    text = data.decode(errors="ignore")
    found = [(m.start(), m.end(), m.group()) for m in re.finditer(r"\w+", text)]
    if not found:
        return []
    stems = conn.stems
    unknown = sorted({w for _, _, w in found} - stems.keys())
    if unknown:  # one round trip for the words not seen before (a query repeats an episode's goal)
        if len(stems) > 100_000:
            stems.clear()
        stems.update((str(w), str(s)) for w, s in conn.execute(
            f"SELECT w, coalesce(array_to_string(tsvector_to_array(to_tsvector('{TS_CONFIG}', w)), ' '), '')"
            " FROM unnest(?::text[]) AS w", (unknown,)))
    out = []
    for start, end, word in found:
        stem = str(stems.get(word) or "")
        if stem and " " not in stem:
            out.append((len(text[:start].encode()), len(text[:end].encode()), stem))
    return out


def in_list(ids: Iterable[str]) -> list[str]:
    """The argument for `= ANY(?)`: where SQLite reads a JSON array with json_each, PostgreSQL takes an array."""
    return list(ids)
