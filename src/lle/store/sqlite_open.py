"""Opening a SQLite store (`Store.__init__`): what is checked before the file is touched, how a new store is
made, how one is opened for reading only, and the migrations.

- `check` refuses, untouched, a store that cannot be opened as asked: none there to read, an empty (0-byte)
  file, a file that is not SQLite or is shorter than its header says (`locations.check_file`).
- `create` makes a new store under a temporary name beside it, migrated and checkpointed, and then gives it
  its name in one step: a store is never seen half made, so an empty store file is always damage (a
  truncation, a failed copy), never a store being created.
- `connect` opens for writing (never creating: `create` did), or for reading only (`mode=ro`: SQLite writes
  nothing to the file, and a reading command neither creates nor migrates a store).
"""

from __future__ import annotations

import contextlib
import os
import re
import threading
from importlib import resources
from pathlib import Path
from urllib.parse import quote

import apsw

from lle.core import utcnow
from lle.errors import ReadOnlyStoreError, StoreError
from lle.store.locations import check_file

BUSY_TIMEOUT_MS = 60_000
READ_COPY_MAX_BYTES = 256 << 20
"""An older store opened for reading is read from a migrated copy in memory up to this size (the file itself
is never migrated by a read); a bigger one is refused with the command that migrates it."""


def migrations(dialect: str = "sqlite") -> list[tuple[int, str, str]]:
    """(number, name, sql) of every migration shipped for `dialect`, in order: files named `mNNN_name.sql`
    (SQLite's in `migrations/`, PostgreSQL's, numbered and named alike, in `migrations/postgres/`)."""
    found = []
    folder = resources.files("lle.store.migrations")
    if dialect != "sqlite":
        folder = folder.joinpath(dialect)
    for entry in folder.iterdir():
        m = re.fullmatch(r"m(\d{3})_(\w+)\.sql", entry.name)
        if m:
            found.append((int(m.group(1)), m.group(2), entry.read_text()))
    found.sort()
    if [n for n, _, _ in found] != list(range(1, len(found) + 1)):
        raise StoreError(f"migrations are not numbered 1..N: {[n for n, _, _ in found]}; reinstall lle")
    return found


def apply_migrations(conn: apsw.Connection, applied: int) -> None:
    """Run and record every SQLite migration after `applied`, inside the caller's transaction."""
    shipped = migrations()
    for number, name, sql in shipped:
        if number > applied:
            conn.execute(sql)
            conn.execute("INSERT INTO lle_migrations(number, name, applied_at) VALUES (?, ?, ?)",
                         (number, name, utcnow().isoformat()))
    conn.execute(f"PRAGMA user_version={len(shipped)}")


def check(path: Path, *, read_only: bool) -> None:
    """Refuse, before anything opens it, a store to read that is not there, and a file that is not a store."""
    if not path.exists():
        if read_only:
            raise StoreError(f"there is no store at {path} (nothing was recorded there, and a reading command does "
                             "not create one); pass --workspace DIR, or --run RUN for a run's store")
        return
    check_file(path)


def create(path: Path) -> None:
    """A new, migrated store at `path`: made under a temporary name beside it, checkpointed into one file,
    then linked to its name (a racing first open that links first wins; this one's copy is dropped)."""
    with contextlib.suppress(OSError):  # a folder that cannot be made is named below, as a folder not written
        path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}-{threading.get_ident()}.new")
    if not os.access(path.parent, os.W_OK):
        raise ReadOnlyStoreError(f"cannot create the store {path}: its folder or disk is read-only; "
                                 "pass --workspace DIR on a writable disk")
    try:
        conn = apsw.Connection(str(tmp))
        try:
            conn.execute("PRAGMA journal_mode=WAL")  # a property of the file, set before any transaction
            conn.execute("BEGIN IMMEDIATE")
            apply_migrations(conn, 0)
            conn.execute("COMMIT")
        finally:
            conn.close()  # the last connection: its WAL is checkpointed into the file and removed
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass  # made by a racing first open: that one is the store
        except OSError:  # a file system without hard links
            if not path.exists():
                os.replace(tmp, path)
    finally:
        for leftover in (tmp, tmp.with_name(tmp.name + "-wal"), tmp.with_name(tmp.name + "-shm")):
            leftover.unlink(missing_ok=True)


def connect(path: Path, *, read_only: bool) -> apsw.Connection:
    """Open for writing, or with `read_only` for reading only; on a read-only file, folder or disk, for reading.

    SQLite falls back to read-only by itself for a write-protected file, but a WAL store also needs its `-shm`
    beside it: in a folder nobody can write, that cannot be made, so the file is opened `immutable` — safe
    there, since nothing can write it either."""
    if read_only:
        uri = f"file:{quote(str(path.absolute()))}?mode=ro"
        conn = apsw.Connection(uri, flags=apsw.SQLITE_OPEN_READONLY | apsw.SQLITE_OPEN_URI)
    else:  # never creating: a file that vanished since `create` is not made again, empty
        conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READWRITE)
    # Before the first read: a process writing the file at this moment holds its lock briefly.
    conn.setbusytimeout(BUSY_TIMEOUT_MS)
    try:
        conn.execute("SELECT count(*) FROM sqlite_master").fetchall()  # the first read opens the files
        return conn
    except apsw.CantOpenError:
        conn.close()
        if os.access(path.parent, os.W_OK) or not path.exists():
            raise
    uri = f"file:{quote(str(path.absolute()))}?immutable=1"
    conn = apsw.Connection(uri, flags=apsw.SQLITE_OPEN_READONLY | apsw.SQLITE_OPEN_URI)
    conn.setbusytimeout(BUSY_TIMEOUT_MS)
    return conn


def older_store_error(path: Path, version: int, latest: int) -> StoreError:
    return StoreError(f"{path} was written by an older lle (schema {version} < {latest}) and is too big to read "
                      "without migrating it, which a reading command never does; migrate it once with "
                      "`lle store migrate` (add --run RUN --strategy S for a run's store), then read it")


def memory_copy(conn: apsw.Connection) -> apsw.Connection:
    """The database of `conn` copied into memory (`conn` is closed): an older store is read from a migrated
    copy, never migrated in its file by a read."""
    copy = apsw.Connection(":memory:")
    with copy.backup("main", conn, "main") as backup:
        backup.step(-1)
    conn.close()
    copy.execute("PRAGMA foreign_keys=ON")
    return copy
