"""The append-only store on PostgreSQL through psycopg 3: `Store("postgresql://…")`.

A subclass of the SQLite `Store` with the same methods and the same guarantees: numbered migrations
(`migrations/postgres/`, numbered and named like SQLite's), triggers refusing UPDATE, DELETE and
TRUNCATE on every ledger table, one transaction per write. What differs is only how:

- Writes take one advisory lock per transaction (`pg_advisory_xact_lock`), as SQLite's
  `BEGIN IMMEDIATE` takes its one write lock. So rowids (identity columns) commit in increasing
  order and the incremental reads by rowid (`item_rows`, `update_rows`, memory's refresh) never
  skip a row committed late; concurrent writers from many machines queue instead of failing.
- Commits are durable once they return (`synchronous_commit` on, PostgreSQL's default).
- Full-text search is a tsvector column under a GIN index ('english': Porter stemming).
- Vectors are bytes written and ranked by the application (no pgvector needed).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, cast
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from lle.core import CarrierItem, Experience, Step, utcnow
from lle.errors import (
    InvalidInputError,
    NewerSchemaError,
    NotAStoreError,
    ReadOnlyStoreError,
    StoreError,
)
from lle.store import pg_text
from lle.store.locations import as_url
from lle.store.sqlite import Store, migrations

WRITE_LOCK = 0x6C6C65_0001
"""The advisory lock every write transaction holds (per database): the one writer at a time."""
LEDGER_TABLES = ("lle_migrations", "experiences", "steps", "evidence", "updates", "revocations", "carrier_items",
                 "blobs", "search", "episodes", "memory_vectors", "memory_utility", "routed", "export_snapshots",
                 "export_rows", "trajectory_hashes", "revoked_content", "experience_steps", "messages",
                 "shared_copies")


def with_schema(url: str, schema: str) -> str:
    """`url` with its store in PostgreSQL schema `schema` (made on first open): several ledgers in one
    database, e.g. one per flywheel strategy (`…/lle?options=-csearch_path%3Drun_x_lle`)."""
    if not re.fullmatch(r"[a-z_][a-z0-9_]{0,62}", schema):
        raise InvalidInputError(f"schema name {schema!r}: use lower-case letters, digits and _ (at most 63)")
    parts = urlsplit(url)
    query = [(k, v) for k, v in parse_qsl(parts.query) if k != "options"]
    return urlunsplit(parts._replace(query=urlencode([*query, ("options", f"-csearch_path={schema}")])))


def redact(url: str) -> str:
    """The URL without its password, for messages and `lle store path`."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.netloc.rsplit("@", 1)[-1]
    return urlunsplit(parts._replace(netloc=f"{parts.username}:***@{host}"))


class PostgresStore(Store):
    """One PostgreSQL database (its current schema) holding the whole ledger."""

    dialect = "postgres"

    def __init__(self, path: str | Path, *, read_only: bool = False) -> None:
        self.url = as_url(path)
        # Never opened as a file: a stable name (lineage caches by it) that `Store(store.path)` reopens.
        # It holds the password when the URL does: show `location` instead.
        self.path = Path(self.url)
        self._writer: int | None = None
        self._lock = threading.RLock()
        self.row_filters: dict[str, Callable[[int], bool]] = {}
        """Python filters memory retrieval names in `matching_rowids` (SQLite registers them as SQL functions)."""
        try:
            import psycopg  # the extra `lle[postgres]`: loaded only when a URL is opened
        except ImportError as err:
            raise StoreError(f"{redact(self.url)} is a PostgreSQL store and psycopg is not installed: "
                             "pip install 'lle[postgres]'") from err
        try:
            raw = psycopg.connect(self.url, autocommit=True, application_name="lle")
        except psycopg.Error as err:
            first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
            raise StoreError(f"cannot connect to the store {redact(self.url)} ({first}); check the URL "
                             "(LLE_STORE_URL or --store-url) and that the server is running") from err
        self.pg = pg_text.PgConnection(raw)
        self.conn = cast(Any, self.pg)  # the store's modules call conn.execute as on apsw (see pg_text)
        try:
            if read_only:  # a reading command: the server refuses any write of this session
                self.conn.execute("SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY")
            self._ensure_schema(read_only)
            self.schema_version = self._applied_version()
            self.latest_version = len(migrations("postgres"))
            row = self.conn.execute("SELECT current_setting('transaction_read_only') = 'on' OR pg_is_in_recovery()"
                                    ).fetchone()
            self.opened_read_only = read_only
            self.read_only = bool(row and row[0])
            self.writable = self.schema_version <= self.latest_version and not self.read_only
            if read_only and self.schema_version < self.latest_version:
                raise StoreError(f"{redact(self.url)} holds no lle store, or one of an older lle (schema "
                                 f"{self.schema_version} < {self.latest_version}), and a reading command neither "
                                 "creates nor migrates one; run a writing command (`lle store migrate`) first")
            if self.writable and self.schema_version < self.latest_version:
                self._migrate()
        except BaseException:
            raw.close()
            raise

    # --- opening and migrating --------------------------------------------------------------------

    def _ensure_schema(self, read_only: bool = False) -> None:
        # A URL naming a schema (`with_schema`) gets it made on first open, as a SQLite file is (not to read).
        row = self.conn.execute("SELECT current_schema()").fetchone()
        if row and row[0] is not None:
            return
        path = self.conn.execute("SELECT current_setting('search_path')").fetchone()
        first = str(path[0]).split(",")[0].strip().strip('"') if path else ""
        if not first or first == "$user" or read_only:
            raise NotAStoreError(f"{redact(self.url)}: its search_path names no schema that exists; "
                                 "name one (lle.store.postgres.with_schema) or use the default")
        self.conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{first}"')

    def _applied_version(self) -> int:
        tables = {str(r[0]) for r in self.conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()")}
        if "lle_migrations" in tables:
            row = self.conn.execute("SELECT max(number) FROM lle_migrations").fetchone()
            return int(row[0] or 0) if row else 0
        if tables:
            raise NotAStoreError(
                f"{redact(self.url)} holds another program's tables ({', '.join(sorted(tables)[:5])}); "
                "lle will not write into it: use an empty database or schema")
        return 0

    def _migrate(self) -> None:
        with self._write():
            # Another process may have migrated between our check and our lock (the lock orders us).
            applied = self._applied_version()
            for number, name, sql in migrations("postgres"):
                if number > applied:
                    self.conn.execute(sql)
                    self.conn.execute("INSERT INTO lle_migrations(number, name, applied_at) VALUES (?, ?, ?)",
                                      (number, name, utcnow().isoformat()))
            if 0 < applied < 6 <= self.latest_version:
                self._backfill_trajectory_hashes()
        self.schema_version = self.latest_version

    @contextmanager
    def _write(self) -> Iterator[None]:
        if self.opened_read_only:
            raise ReadOnlyStoreError(f"{redact(self.url)} was opened for reading only, and this writes; open it with "
                                     "Store(url) to write (a reading command never writes)")
        if self.read_only:
            raise ReadOnlyStoreError(f"{redact(self.url)} is read-only (a standby or a read-only transaction), "
                                     "and this command writes; point LLE_STORE_URL at the primary")
        if not self.writable:
            raise NewerSchemaError(
                f"{redact(self.url)} was written by a newer lle (schema {self.schema_version} > "
                f"{self.latest_version}); this version only reads it: upgrade lle (`pip install -U lle`) to write")
        from psycopg.pq import TransactionStatus

        raw = self.pg.raw
        # One thread writes at a time on this connection; another thread waits for its turn (psycopg
        # would otherwise interleave its statements into the open transaction). Statements go through
        # `self.pg`, so a lost server or a full disk is one StoreError line.
        with self._lock:
            nested = self._writer == threading.get_ident()
            self.pg.execute("SAVEPOINT lle_nested" if nested else "BEGIN")
            self._writer = threading.get_ident()
            try:
                if not nested:
                    self.pg.execute("SELECT pg_advisory_xact_lock(?)", (WRITE_LOCK,))
                yield
                self.pg.execute("RELEASE SAVEPOINT lle_nested" if nested else "COMMIT")
            except BaseException:
                if raw.info.transaction_status in (TransactionStatus.INTRANS, TransactionStatus.INERROR):
                    if nested:
                        raw.execute("ROLLBACK TO SAVEPOINT lle_nested")
                        raw.execute("RELEASE SAVEPOINT lle_nested")
                    else:
                        raw.execute("ROLLBACK")
                raise
            finally:
                self._writer = self._writer if nested else None

    @property
    def location(self) -> str:
        return redact(self.url)

    def close(self) -> None:
        self.conn.close()

    # --- what differs from SQLite's SQL ---------------------------------------------------------------

    def _insert_experience(self, exp: Experience) -> None:
        # Pipelined: the row, its steps, evidence, hashes and search text go to the server without
        # waiting for each answer (a refusal still surfaces here, before the transaction commits).
        with self.pg.pipeline():
            super()._insert_experience(exp)

    def _insert_steps(self, experience_id: str, steps: list[Step]) -> None:
        # One round trip for all of an experience's steps (psycopg pipelines executemany), not one each.
        rows = [(experience_id, step.index, self._dump(step.model_dump(mode="json"))) for step in steps]
        if rows:
            self.pg.executemany("INSERT INTO steps(experience_id, idx, body) VALUES (?, ?, ?)", rows)

    def _index(self, ref_id: str, kind: str, text: str) -> None:
        self.conn.execute(f"INSERT INTO search(ref_id, kind, text, tsv) VALUES (?, ?, ?, to_tsvector("
                          f"'{pg_text.TS_CONFIG}', ?))", (ref_id, kind, text, pg_text.words(text)))

    def experiences_decided(self, carrier: str) -> set[str]:
        return {str(r[0]) for r in self.conn.execute(
            "SELECT DISTINCT j FROM updates u, jsonb_array_elements_text(coalesce(u.body::jsonb -> 'experience_ids',"
            " '[]'::jsonb)) j WHERE u.carrier = ?", (carrier,))}

    def items_by_id(self, ids: list[str], carrier: str | None = None) -> list[CarrierItem]:
        rows = self.conn.execute("SELECT id, body FROM carrier_items WHERE id = ANY(?)"
                                 " AND coalesce(?::text, carrier) = carrier", (pg_text.in_list(ids), carrier))
        found = {str(i): CarrierItem.model_validate(self._load(b)) for i, b in rows}
        return [found[i] for i in ids if i in found]

    def revoked_hashes(self, revoked_ids: Iterable[str]) -> dict[str, str]:
        ids = sorted(i for i in revoked_ids if i.startswith("exp_"))
        rows = self.conn.execute(
            "SELECT hash, experience_id FROM revoked_content"
            " UNION ALL SELECT x.content_hash, x.id FROM experiences x WHERE x.id = ANY(?)"
            " UNION ALL SELECT t.hash, t.experience_id FROM trajectory_hashes t WHERE t.experience_id = ANY(?)",
            (ids, ids))
        out: dict[str, str] = {}
        for digest, experience_id in rows:
            if digest:
                out.setdefault(str(digest), str(experience_id))
        return out

    def copies_of(self, hashes: dict[str, str]) -> dict[str, str]:
        if not hashes:
            return {}
        keys = sorted(hashes)
        rows = self.conn.execute(
            "SELECT id, content_hash FROM experiences WHERE content_hash = ANY(?)"
            " UNION ALL SELECT experience_id, hash FROM trajectory_hashes WHERE hash = ANY(?)", (keys, keys))
        out: dict[str, str] = {}
        for experience_id, digest in rows:
            out.setdefault(str(experience_id), hashes[str(digest)])
        return out

    def search(self, query: str, *, limit: int = 10) -> list[tuple[str, str, str]]:
        """(kind, id, snippet) for rows whose text matches every word of `query` (ts_rank_cd order)."""
        found = pg_text.words(query)
        if not found:
            return []
        rows = self.conn.execute(
            f"SELECT kind, ref_id, ts_headline('{pg_text.TS_CONFIG}', text, q, 'StartSel=[, StopSel=], MaxWords=12,"
            " MinWords=4, MaxFragments=1, FragmentDelimiter=…') FROM search,"
            f" plainto_tsquery('{pg_text.TS_CONFIG}', ?) q WHERE tsv @@ q ORDER BY ts_rank_cd(tsv, q) DESC, rowid"
            " LIMIT ?", (found, limit))
        return [(str(k), str(i), str(s)) for k, i, s in rows]

    def durability(self) -> str:
        row = self.conn.execute("SELECT current_setting('synchronous_commit'), current_setting('fsync')").fetchone()
        return f"synchronous_commit={row[0]} fsync={row[1]}" if row else "?"

    def storage_bytes(self) -> int:
        row = self.conn.execute("SELECT pg_database_size(current_database())").fetchone()
        return int(row[0]) if row else 0

    def integrity_check(self) -> str:
        """'ok', or what is wrong: a ledger table without its refusing triggers, a torn experience."""
        problems = []
        present = [t for t in LEDGER_TABLES if self.conn.execute("SELECT to_regclass(?)", (t,)).fetchone() != (None,)]
        for table in present:
            row = self.conn.execute(
                "SELECT count(*) FROM pg_trigger WHERE tgrelid = to_regclass(?) AND tgname = ANY(?)"
                " AND tgenabled <> 'D'",
                (table, [f"{table}_no_update", f"{table}_no_delete", f"{table}_no_truncate"])).fetchone()
            if not row or int(row[0]) != 3:
                problems.append(f"{table}: append-only triggers missing or disabled")
        if "experiences" in present:
            row = self.conn.execute("SELECT count(*) FROM experiences x WHERE x.n_steps <>"
                                    " (SELECT count(*) FROM steps s WHERE s.experience_id = x.id)").fetchone()
            if row and int(row[0]):
                problems.append(f"{row[0]} experiences whose stored steps do not match n_steps")
        return "ok" if not problems else "; ".join(problems)

    def schema_sql(self) -> str:
        """Tables (columns and types), indexes and triggers of the store's schema, as SQL."""
        out = []
        tables = [str(r[0]) for r in self.conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() ORDER BY 1")]
        for table in tables:
            cols = self.conn.execute(
                "SELECT column_name, data_type, is_nullable FROM information_schema.columns"
                " WHERE table_schema = current_schema() AND table_name = ? ORDER BY ordinal_position", (table,))
            body = ",\n  ".join(f"{c} {t}{'' if n == 'YES' else ' NOT NULL'}" for c, t, n in cols)
            out.append(f"CREATE TABLE {table} (\n  {body}\n);")
        out += [str(r[0]) + ";" for r in self.conn.execute(
            "SELECT indexdef FROM pg_indexes WHERE schemaname = current_schema() ORDER BY tablename, indexname")]
        out += [str(r[0]) + ";" for r in self.conn.execute(
            "SELECT pg_get_triggerdef(t.oid) FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid"
            " JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = current_schema()"
            " AND NOT t.tgisinternal ORDER BY c.relname, t.tgname")]
        return "\n".join(out)


Store.url_backend = PostgresStore
