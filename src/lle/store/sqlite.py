"""The append-only store on SQLite through apsw.

apsw, not the stdlib `sqlite3`: it bundles a current SQLite (the stdlib's 3.40.1 has the WAL-reset
corruption bug). WAL with `synchronous=FULL`: a commit that returned survives a kill or power cut.
Each write is one `BEGIN IMMEDIATE` transaction, so readers never see half an experience.
"""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import apsw

from lle.core import (
    CarrierItem,
    Evidence,
    Experience,
    Revocation,
    Step,
    Update,
    canonical_json,
)
from lle.errors import (
    DiskFullError,
    InvalidInputError,
    NewerSchemaError,
    NotAStoreError,
    ReadOnlyStoreError,
    StoreError,
    UnknownIdError,
)
from lle.store import blobs, flat, sqlite_open, trajectory
from lle.store.locations import check_location
from lle.store.locations import is_url as is_url  # re-exported: callers import it from here
from lle.store.sqlite_open import migrations as migrations  # re-exported: callers import it from here

OPEN_TRIES = 5  # opens tried when SQLite answers BUSY without waiting (Store.__init__)
ID_TABLES = {"exp": "experiences", "evd": "evidence", "upd": "updates", "rev": "revocations", "itm": "carrier_items"}


@dataclass(frozen=True)
class ExperienceRow:
    """One line of `lle experiences list`: the indexed columns, without the body."""

    id: str
    world: str
    project: str
    split: str
    outcome: str
    verification: str
    score: float | None
    n_steps: int
    n_evidence: int
    content_hash: str
    created_at: str
    revoked: bool


class Store:
    """One SQLite file holding the whole ledger.

    `Store("postgresql://…")` opens the PostgreSQL backend instead (`lle.store.postgres.PostgresStore`,
    a subclass with the same methods and guarantees), so every caller that opens a store by its
    location works with either."""

    dialect = "sqlite"
    constraint_errors: tuple[type[Exception], ...] = (apsw.ConstraintError,)
    """What a duplicate id raises on this backend (the store turns it into `InvalidInputError`)."""

    opened_read_only = False
    """Opened for reading on purpose (`read_only=True`: a reading command), not because it cannot be written."""

    url_backend: type[Store] | None = None
    """The class `Store(url)` opens for a PostgreSQL URL; `lle.store.postgres` sets it on import (the
    package imports it, without psycopg, which it loads only when a URL is opened)."""

    def __new__(cls, path: str | Path, *, read_only: bool = False) -> Store:
        check_location(path)
        if cls is Store and is_url(path) and Store.url_backend is not None:
            return super().__new__(Store.url_backend)
        return super().__new__(cls)

    def __init__(self, path: str | Path, *, read_only: bool = False) -> None:
        """Open the store at `path`, creating and migrating it on first use; with `read_only`, for reading only:
        never created, migrated nor written (a missing or damaged store is refused, the file left as it is)."""
        self.path = Path(path)
        self._writer: int | None = None  # thread holding the open write transaction
        try:
            sqlite_open.check(self.path, read_only=read_only)
            if not read_only and not self.path.exists():
                sqlite_open.create(self.path)
            for attempt in range(OPEN_TRIES):
                try:
                    self._open(read_only)
                    break
                except apsw.BusyError:
                    # Racing first opens: SQLite may answer BUSY without its busy handler; opening is idempotent.
                    if getattr(self, "conn", None) is not None:
                        self.conn.close()
                    if attempt == OPEN_TRIES - 1:
                        raise
                    time.sleep(0.05 * (attempt + 1))
        except (apsw.NotADBError, apsw.CorruptError) as err:
            raise NotAStoreError(
                f"{self.path} is not a readable lle store ({err}); move it aside or use another --workspace"
            ) from err
        except (apsw.FullError, apsw.IOError) as err:
            raise self._disk_error(err) from err

    # --- opening and migrating (how: `sqlite_open`) -----------------------------------------------------

    def _open(self, read_only: bool = False) -> None:
        self.conn = sqlite_open.connect(self.path, read_only=read_only)
        self.conn.execute("PRAGMA synchronous=FULL")
        self.conn.execute("PRAGMA foreign_keys=ON")
        self.schema_version = self._applied_version()
        self.latest_version = len(migrations())
        self.opened_read_only = read_only
        self.read_only = read_only or bool(self.conn.readonly("main"))
        self.writable = self.schema_version <= self.latest_version and not self.read_only
        if self.schema_version < self.latest_version and self.writable:
            self._migrate()
        elif self.schema_version < self.latest_version and read_only:
            # Never migrated by a read: read from a migrated copy in memory (a big one is refused).
            if self.path.stat().st_size > sqlite_open.READ_COPY_MAX_BYTES:
                self.conn.close()
                raise sqlite_open.older_store_error(self.path, self.schema_version, self.latest_version)
            self.conn = sqlite_open.memory_copy(self.conn)
            self.read_only, self.writable = False, True
            try:
                self._migrate()
            finally:
                self.read_only, self.writable = True, False

    def _disk_error(self, err: apsw.Error) -> StoreError:
        """A failed write as one line: a full disk (or an I/O error on a nearly full one) says how to go on."""
        free = shutil.disk_usage(self.path.parent).free if self.path.parent.exists() else 0
        if isinstance(err, apsw.FullError) or free < (1 << 20):
            return DiskFullError(f"the disk is full while writing {self.path} (nothing of this write was kept); "
                                 "free space and run the same command again (resume continues)")
        return StoreError(f"a disk I/O error while writing {self.path} ({err}; nothing of this write was kept); "
                          "check the disk (`dmesg`), then run the same command again (resume continues)")

    def _applied_version(self) -> int:
        tables = {r[0] for r in self.conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if "lle_migrations" in tables:
            row = self.conn.execute("SELECT max(number) FROM lle_migrations").fetchone()
            return int(row[0] or 0) if row else 0
        if tables:
            raise NotAStoreError(
                f"{self.path} is another program's SQLite database (tables: {', '.join(sorted(tables)[:5])}); "
                "lle will not write into it: use another --workspace"
            )
        return 0

    def _migrate(self) -> None:
        # WAL is a property of the file; set it once, before any transaction.
        self.conn.execute("PRAGMA journal_mode=WAL")
        with self._write():
            # Another process may have migrated between our check and our lock.
            applied = self._applied_version()
            sqlite_open.apply_migrations(self.conn, applied)
            if applied < 6 <= self.latest_version:
                self._backfill_trajectory_hashes()
        self.schema_version = self.latest_version

    def _backfill_trajectory_hashes(self) -> None:
        # m006 keeps each experience's trajectory hash; those stored before it get theirs here,
        # inside the migration's transaction (the hash is Python, not SQL).
        for exp_id, world in list(self.conn.execute("SELECT id, world FROM experiences WHERE n_steps > 0")):
            self._insert_trajectory_hash(str(exp_id), str(world), self.steps_of(str(exp_id)))

    @contextmanager
    def _write(self) -> Iterator[None]:
        if self.read_only and self.opened_read_only:
            raise ReadOnlyStoreError(f"{self.path} was opened for reading only, and this writes; open it with "
                                     "Store(path) to write (a reading command never writes)")
        if self.read_only:
            raise ReadOnlyStoreError(
                f"{self.path} is read-only (its file, folder or disk cannot be written), and this command writes; "
                "make it writable or copy the workspace and pass --workspace COPY (reading commands work as is)")
        if not self.writable:
            raise NewerSchemaError(
                f"{self.path} was written by a newer lle (schema {self.schema_version} > {self.latest_version}); "
                "this version only reads it: upgrade lle (`pip install -U lle`) to write"
            )
        # A write inside this thread's open transaction joins it as a savepoint: a carrier that needs
        # several appends atomically wraps them in `transaction()`, and a failed inner write undoes
        # only itself. Another thread's BEGIN on this connection still fails, as it always did.
        nested = self._writer == threading.get_ident()
        self.conn.execute("SAVEPOINT lle_nested" if nested else "BEGIN IMMEDIATE")
        self._writer = threading.get_ident()
        try:
            yield
            # COMMIT too may hit a full disk: it then leaves the transaction open, to be rolled back here.
            self.conn.execute("RELEASE lle_nested" if nested else "COMMIT")
        except BaseException as err:
            if self.conn.in_transaction:  # SQLite rolls back by itself on some errors
                self.conn.execute("ROLLBACK TO lle_nested; RELEASE lle_nested" if nested else "ROLLBACK")
            if isinstance(err, (apsw.FullError, apsw.IOError)) and not nested:
                raise self._disk_error(err) from err
            raise
        finally:
            self._writer = self._writer if nested else None

    @property
    def location(self) -> str:
        """What to show for this store: its file's path (a PostgreSQL store: its URL, password hidden)."""
        return str(self.path)

    def transaction(self) -> AbstractContextManager[None]:
        """One write transaction (`BEGIN IMMEDIATE` … `COMMIT`); the store's writes inside it join it."""
        return self._write()

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- JSON with blobs ----------------------------------------------------------------------------

    def _dump(self, value: Any) -> str:
        def put(digest: str, text: str) -> None:
            self.conn.execute(
                "INSERT OR IGNORE INTO blobs(sha256, size, data) VALUES (?, ?, ?)", (digest, len(text), text)
            )

        return canonical_json(blobs.externalize(value, put))

    def decode(self, text: str) -> Any:
        """A stored JSON body as plain values, with its blobs put back."""
        return self._load(text)

    def _load(self, text: str) -> Any:
        def get(digest: str) -> str:
            row = self.conn.execute("SELECT data FROM blobs WHERE sha256=?", (digest,)).fetchone()
            if row is None:
                raise StoreError(
                    f"{self.path}: blob {digest} is missing; the store is damaged, restore it from a backup"
                )
            return str(row[0])

        return blobs.internalize(json.loads(text), get)

    # --- writing ------------------------------------------------------------------------------------

    def append_step(self, experience_id: str, step: Step) -> None:
        """Commit one step of a running episode (the recorder calls this before the next step)."""
        with self._write():
            self._insert_step(experience_id, step)

    def _insert_step(self, experience_id: str, step: Step) -> None:
        self.conn.execute(
            "INSERT INTO steps(experience_id, idx, body) VALUES (?, ?, ?)",
            (experience_id, step.index, self._dump(step.model_dump(mode="json"))),
        )

    def _insert_steps(self, experience_id: str, steps: list[Step]) -> None:
        for step in steps:
            self._insert_step(experience_id, step)

    def append_experience(self, experience: Experience) -> Experience:
        """Store an experience with its steps and evidence in one transaction; returns it sealed."""
        return self.append_experiences([experience])[0]

    def append_experiences(self, experiences: list[Experience]) -> list[Experience]:
        """Store several experiences in one transaction: all or none."""
        sealed = [e if e.content_hash else e.sealed() for e in experiences]
        for exp in sealed:
            if exp.content_hash != exp.compute_hash():
                raise InvalidInputError(
                    f"experience {exp.id}: content_hash does not match its content; call .sealed() after editing"
                )
        try:
            with self._write():
                for exp in sealed:
                    self._insert_experience(exp)
        except self.constraint_errors as err:
            if "foreign key" in str(err).lower():  # m007: evidence names its experience
                raise InvalidInputError(f"{err}: an evidence row names an experience that is not in this store; "
                                        "set each evidence's experience_id to its experience's id") from err
            raise InvalidInputError(
                f"{err}: an experience with one of these ids is already stored; the ledger is append-only, "
                "give new records new ids"
            ) from err
        return sealed

    def _insert_experience(self, exp: Experience) -> None:
        body = exp.model_dump(mode="json", exclude={"steps", "evidence"})
        sw = exp.small_world
        stored = {r[0] for r in self.conn.execute("SELECT idx FROM steps WHERE experience_id=?", (exp.id,))}
        self._insert_steps(exp.id, [step for step in exp.steps if step.index not in stored])
        for ev in exp.evidence:
            self._insert_evidence(ev)
        self.conn.execute(
            "INSERT INTO experiences(id, small_world_id, world, family, project, split, outcome, verification,"
            " score, n_steps, n_evidence, content_hash, created_at, body)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (exp.id, sw.id, sw.world, sw.family, sw.project, sw.split.value, exp.outcome.value,
             exp.verification.value, exp.score, len(exp.steps), len(exp.evidence), exp.content_hash,
             exp.created_at.isoformat(), self._dump(body)),
        )
        self._insert_trajectory_hash(exp.id, sw.world, exp.steps)
        flat.list_steps(self, exp.id)  # m007: its steps in experience_steps, linked to it, in this transaction
        self._index(exp.id, "experience", _searchable_text(exp))

    def _insert_trajectory_hash(self, experience_id: str, world: str, steps: list[Step]) -> None:
        if (found := trajectory.trajectory_hash(world, steps)) is not None:
            self.conn.execute("INSERT OR IGNORE INTO trajectory_hashes(experience_id, hash) VALUES (?, ?)",
                              (experience_id, found))

    def _insert_evidence(self, ev: Evidence) -> None:
        self.conn.execute(
            "INSERT INTO evidence(id, experience_id, step, anchor, outcome, strength, body)"
            " VALUES (?, ?, ?, ?, ?, ?, ?)",
            (ev.id, ev.experience_id, ev.step, ev.anchor, ev.outcome.value, ev.strength.value,
             self._dump(ev.model_dump(mode="json"))),
        )

    def append_evidence(self, evidence: Evidence) -> None:
        """Evidence that arrives after the experience (a human verdict, a later replay)."""
        self.require(evidence.experience_id)
        with self._write():
            self._insert_evidence(evidence)

    def append_update(self, update: Update) -> None:
        with self._write():
            self.conn.execute(
                "INSERT INTO updates(id, carrier, op, item_id, at, body) VALUES (?, ?, ?, ?, ?, ?)",
                (update.id, update.carrier.value, update.op.value, update.item_id, update.at.isoformat(),
                 self._dump(update.model_dump(mode="json"))),
            )

    def append_item(self, item: CarrierItem) -> None:
        with self._write():
            self.conn.execute(
                "INSERT INTO carrier_items(id, carrier, scope_level, family, project, created_at, body)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                (item.id, item.carrier.value, item.scope.level.value, item.scope.family, item.scope.project,
                 item.created_at.isoformat(), self._dump(item.model_dump(mode="json"))),
            )
            self._index(item.id, item.carrier.value, canonical_json(item.content))

    def append_revocation(self, revocation: Revocation) -> None:
        with self._write():
            self.conn.execute(
                "INSERT INTO revocations(id, target, at, body) VALUES (?, ?, ?, ?)",
                (revocation.id, revocation.target, revocation.at.isoformat(),
                 self._dump(revocation.model_dump(mode="json"))),
            )

    def _index(self, ref_id: str, kind: str, text: str) -> None:
        self.conn.execute("INSERT INTO search(ref_id, kind, text) VALUES (?, ?, ?)", (ref_id, kind, text))

    # --- reading ----------------------------------------------------------------------------------------

    def kind_of(self, id_: str) -> str | None:
        """The ledger table holding `id_`, or None when no row has it."""
        table = ID_TABLES.get(id_.split("_", 1)[0])
        if table and self.conn.execute(f"SELECT 1 FROM {table} WHERE id=?", (id_,)).fetchone():
            return table
        return None

    def require(self, id_: str) -> str:
        table = self.kind_of(id_)
        if table is None:
            raise UnknownIdError("record", id_, "ids look like exp_…, evd_…, upd_…, itm_…; see `lle experiences list`")
        return table

    def get_experience(self, id_: str) -> Experience:
        row = self.conn.execute("SELECT body, n_evidence FROM experiences WHERE id=?", (id_,)).fetchone()
        if row is None:
            raise UnknownIdError("experience", id_)
        body, n_evidence = self._load(row[0]), row[1]
        body["steps"] = [self._load(r[0]) for r in self.conn.execute(
            "SELECT body FROM steps WHERE experience_id=? ORDER BY idx", (id_,))]
        # Evidence appended later (a human verdict, a replay) is not part of the sealed record: it is
        # read with `evidence_for`, so the content hash of what was stored stays checkable.
        body["evidence"] = [self._load(r[0]) for r in self.conn.execute(
            "SELECT body FROM evidence WHERE experience_id=? ORDER BY rowid LIMIT ?", (id_, n_evidence))]
        return Experience.model_validate(body)

    def evidence_for(self, experience_id: str) -> list[Evidence]:
        """All evidence about an experience: what it was stored with, then what came later."""
        return [Evidence.model_validate(self._load(r[0])) for r in self.conn.execute(
            "SELECT body FROM evidence WHERE experience_id=? ORDER BY rowid", (experience_id,))]

    def steps_of(self, experience_id: str) -> list[Step]:
        """Committed steps of an episode, finished or not (for resume)."""
        return [Step.model_validate(self._load(r[0])) for r in self.conn.execute(
            "SELECT body FROM steps WHERE experience_id=? ORDER BY idx", (experience_id,))]

    def list_experiences(self, *, limit: int = 50, offset: int = 0, world: str | None = None,
                         split: str | None = None, outcome: str | None = None) -> list[ExperienceRow]:
        where, args = ["1=1"], []
        for column, value in (("world", world), ("split", split), ("outcome", outcome)):
            if value is not None:
                where.append(f"{column}=?")
                args.append(value)
        revoked = self.revoked_ids()
        rows = self.conn.execute(
            "SELECT id, world, project, split, outcome, verification, score, n_steps, n_evidence, content_hash,"
            f" created_at FROM experiences WHERE {' AND '.join(where)} ORDER BY rowid LIMIT ? OFFSET ?",
            (*args, limit, offset),
        )
        names = [f.name for f in dataclasses.fields(ExperienceRow)][:-1]
        return [ExperienceRow(**dict(zip(names, r, strict=True)), revoked=r[0] in revoked) for r in rows]

    def count(self, table: str) -> int:
        row = self.conn.execute(f"SELECT count(*) FROM {_ledger_table(table)}").fetchone()
        return int(row[0]) if row else 0

    def list_updates(self, *, limit: int = 50, offset: int = 0, carrier: str | None = None,
                     op: str | None = None) -> list[Update]:
        where, args = ["1=1"], []
        for column, value in (("carrier", carrier), ("op", op)):
            if value:
                where.append(f"{column}=?")
                args.append(value)
        # rowid: the order of writing (ids made in the same millisecond do not sort by time).
        rows = self.conn.execute(
            f"SELECT body FROM updates WHERE {' AND '.join(where)} ORDER BY rowid LIMIT ? OFFSET ?",
            (*args, limit, offset))
        return [Update.model_validate(self._load(r[0])) for r in rows]

    def update_item_id(self, update_id: str) -> str | None:
        """The item an update is about (None: unknown update, or one about no item)."""
        row = self.conn.execute("SELECT item_id FROM updates WHERE id=?", (update_id,)).fetchone()
        return str(row[0]) if row and row[0] else None

    def experiences_decided(self, carrier: str) -> set[str]:
        """Every experience id that some update of `carrier` names."""
        return {str(r[0]) for r in self.conn.execute(
            "SELECT DISTINCT j.value FROM updates u, json_each(u.body, '$.experience_ids') j WHERE u.carrier = ?",
            (carrier,))}

    def list_revocations(self) -> list[Revocation]:
        return [Revocation.model_validate(self._load(r[0]))
                for r in self.conn.execute("SELECT body FROM revocations ORDER BY rowid")]

    def carrier_items(self, carrier: str | None = None) -> list[CarrierItem]:
        """Every carrier item ever admitted (revoked ones too: filter with the router's denylist)."""
        return [CarrierItem.model_validate(self._load(body)) for _, _, body in self.item_rows(carrier or None)]

    def item_rows(self, carrier: str | None = None, *, after: int = 0,
                  upto: int | None = None) -> list[tuple[int, str, str]]:
        """(rowid, id, stored JSON body) of carrier items written after rowid `after` (up to `upto`),
        in writing order: carriers that cache the append-only ledger read only what is new."""
        sql, args = "SELECT rowid, id, body FROM carrier_items WHERE rowid > ?", list[int | str]([after])
        clauses: tuple[tuple[str, int | str | None], ...] = ((" AND rowid <= ?", upto), (" AND carrier = ?", carrier))
        for clause, value in clauses:
            if value is not None:
                sql, args = sql + clause, [*args, value]
        return [(int(r), str(i), str(b)) for r, i, b in self.conn.execute(sql + " ORDER BY rowid", args)]

    def items_by_id(self, ids: list[str], carrier: str | None = None) -> list[CarrierItem]:
        """Stored carrier items (of `carrier`) by id, in the order given; unknown ids are left out."""
        rows = self.conn.execute("SELECT id, body FROM carrier_items WHERE id IN (SELECT value FROM json_each(?))"
                                 " AND coalesce(?, carrier) = carrier", (json.dumps(ids), carrier))
        found = {str(i): CarrierItem.model_validate(self._load(b)) for i, b in rows}
        return [found[i] for i in ids if i in found]

    def update_rows(self, carrier: str, *, after: int = 0) -> list[tuple[int, Update]]:
        """(rowid, update) of `carrier`'s updates written after rowid `after`, in writing order."""
        return [(int(r), Update.model_validate(self._load(b))) for r, b in self.conn.execute(
            "SELECT rowid, body FROM updates WHERE carrier=? AND rowid>? ORDER BY rowid", (carrier, after))]

    def last_rowid(self, table: str) -> int:
        """The highest rowid of a ledger table (0 when empty): a high-water mark for incremental reads."""
        # Not through count(): memory retrieval reads this mark on every search, and count(*) scans the
        # whole table (100k memory items: ~1.6 ms, and it evicts the FTS pages the search reads next).
        row = self.conn.execute(f"SELECT coalesce(max(rowid), 0) FROM {_ledger_table(table)}").fetchone()
        return int(row[0]) if row else 0

    def revoked_ids(self) -> set[str]:
        """The denylist: every revoked target and everything revoked with it, and every stored
        experience whose content (or trajectory) repeats a revoked one's, under whatever id."""
        denied: set[str] = set()
        for rev in self.list_revocations():
            denied.add(rev.target)
            denied.update(rev.cascade)
        return denied | set(self.copies_of(self.revoked_hashes(denied)))

    def revoked_hashes(self, revoked_ids: Iterable[str]) -> dict[str, str]:
        """Every revoked content hash → the revoked experience it came from.

        From the hashes revocations recorded, and from the stored experiences among `revoked_ids` (so a
        revocation made before m006, or an experience revoked through the cascade of an item, counts too).
        """
        ids = json.dumps(sorted(i for i in revoked_ids if i.startswith("exp_")))
        rows = self.conn.execute(
            "SELECT hash, experience_id FROM revoked_content"
            " UNION ALL SELECT x.content_hash, x.id FROM experiences x WHERE x.id IN (SELECT value FROM json_each(?))"
            " UNION ALL SELECT t.hash, t.experience_id FROM trajectory_hashes t"
            " WHERE t.experience_id IN (SELECT value FROM json_each(?))", (ids, ids))
        out: dict[str, str] = {}
        for digest, experience_id in rows:
            if digest:
                out.setdefault(str(digest), str(experience_id))
        return out

    def copies_of(self, hashes: dict[str, str]) -> dict[str, str]:
        """Stored experience id → the revoked experience whose content it repeats (the originals included)."""
        if not hashes:
            return {}
        keys = json.dumps(sorted(hashes))
        rows = self.conn.execute(
            "SELECT id, content_hash FROM experiences WHERE content_hash IN (SELECT value FROM json_each(?))"
            " UNION ALL SELECT experience_id, hash FROM trajectory_hashes"
            " WHERE hash IN (SELECT value FROM json_each(?))",
            (keys, keys))
        out: dict[str, str] = {}
        for experience_id, digest in rows:
            out.setdefault(str(experience_id), hashes[str(digest)])
        return out

    def search(self, query: str, *, limit: int = 10) -> list[tuple[str, str, str]]:
        """(kind, id, snippet) for rows whose text matches every word of `query` (BM25 order)."""
        words = re.findall(r"\w+", query)
        if not words:
            return []
        match = " ".join('"' + w.replace('"', '""') + '"' for w in words)
        rows = self.conn.execute(
            "SELECT kind, ref_id, snippet(search, 2, '[', ']', '…', 12) FROM search WHERE search MATCH ?"
            " ORDER BY bm25(search) LIMIT ?", (match, limit))
        return [(str(k), str(i), str(s)) for k, i, s in rows]

    def durability(self) -> str:
        """How a returned commit is kept (for benchmarks and `lle store check`)."""
        mode = self.conn.execute("PRAGMA journal_mode").fetchone()
        sync = self.conn.execute("PRAGMA synchronous").fetchone()
        level = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}.get(int(sync[0]) if sync else -1, "?")
        return f"journal_mode={mode[0] if mode else '?'} synchronous={level}"

    def storage_bytes(self) -> int:
        """Bytes the store takes on disk (the file, its WAL and shared memory)."""
        return sum(p.stat().st_size for p in self.path.parent.glob(self.path.name + "*") if p.is_file())

    def integrity_check(self) -> str:
        row = self.conn.execute("PRAGMA integrity_check").fetchone()
        return str(row[0]) if row else "no result"

    def schema_sql(self) -> str:
        return "\n".join(str(r[0]) + ";" for r in self.conn.execute(
            "SELECT sql FROM sqlite_master WHERE sql IS NOT NULL ORDER BY rowid"))


def _ledger_table(table: str) -> str:
    """`table`, checked: the name is put into SQL, so only the ledger's own tables pass."""
    if table not in {*ID_TABLES.values(), "steps", "blobs", "episodes"}:
        raise StoreError(f"unknown ledger table {table!r}")
    return table


def _searchable_text(exp: Experience) -> str:
    parts = [exp.small_world.goal]
    for step in exp.steps:
        parts += [step.request.thought, step.request.tool, step.effect.observation[:2000]]
    return "\n".join(p for p in parts if p)
