"""Opening a SQLite store for reading never creates, migrates nor writes it; an empty (0-byte) store is damage to
every open; a new store is made whole before it has its name, so racing first opens never see it empty."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path

import apsw
import pytest

from lle.core import Experience
from lle.errors import NotAStoreError, StoreError
from lle.store import Store, migrations, sqlite_open

OLD = 1_600_000_000


def snapshot(path: Path) -> tuple[int, int, bytes]:
    return path.stat().st_size, path.stat().st_mtime_ns, path.read_bytes()


def test_reading_a_missing_store_creates_nothing(tmp_path: Path) -> None:
    path = tmp_path / "absent" / "lle.db"
    with pytest.raises(StoreError, match=r"no store at .*reading command does not create one"):
        Store(path, read_only=True)
    assert not path.parent.exists()


def test_an_empty_store_is_damaged_to_every_open_and_left_as_it_is(tmp_path: Path) -> None:
    path = tmp_path / "lle.db"
    path.write_bytes(b"")
    os.utime(path, (OLD, OLD))
    for read_only in (True, False):
        with pytest.raises(NotAStoreError, match=r"is empty \(0 bytes\): the store is damaged.*mv "):
            Store(path, read_only=read_only)
        assert snapshot(path) == (0, OLD * 10**9, b"")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["lle.db"]


def test_a_read_leaves_the_store_file_as_it_was(tmp_path: Path, make_experience: Callable[..., Experience]) -> None:
    path = tmp_path / "lle.db"
    with Store(path) as db:
        exp = db.append_experience(make_experience())
    os.utime(path, (OLD, OLD))
    before = snapshot(path)
    with Store(path, read_only=True) as db:
        assert db.get_experience(exp.id) == exp
    assert snapshot(path) == before


def _store_at(path: Path, applied: int) -> None:
    """What an older lle left: its migrations only."""
    conn = apsw.Connection(str(path))
    conn.execute("PRAGMA journal_mode=WAL")
    with conn:
        for number, name, sql in migrations()[:applied]:
            conn.execute(sql)
            conn.execute("INSERT INTO lle_migrations VALUES (?, ?, 'then')", (number, name))
        conn.execute(f"PRAGMA user_version={applied}")
    conn.close()


def test_an_older_store_is_read_from_a_migrated_copy_never_migrated_in_its_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, make_experience: Callable[..., Experience]) -> None:
    path = tmp_path / "old.db"
    _store_at(path, 6)
    os.utime(path, (OLD, OLD))
    before = snapshot(path)
    with Store(path, read_only=True) as db:
        assert db.schema_version == db.latest_version and not db.writable
        assert db.list_experiences() == [] and db.count("experiences") == 0
        assert db.conn.execute("SELECT count(*) FROM experience_steps").fetchone() == (0,)  # m007's, in the copy
    assert snapshot(path) == before
    monkeypatch.setattr(sqlite_open, "READ_COPY_MAX_BYTES", 0)  # too big to copy: refused, saying how to migrate
    with pytest.raises(StoreError, match=r"older lle \(schema 6 < \d+\).*lle store migrate"):
        Store(path, read_only=True)
    assert snapshot(path) == before
    with Store(path) as db:  # a writing open migrates it
        assert db.schema_version == len(migrations())
        db.append_experience(make_experience())


def test_racing_first_opens_make_one_whole_store_and_leave_no_temporary_file(tmp_path: Path) -> None:
    path = tmp_path / "ws" / "lle.db"
    seen: list[int] = []
    errors: list[BaseException] = []

    def open_it() -> None:
        try:
            with Store(path) as db:
                seen.append(db.schema_version)
        except BaseException as err:  # reported below
            errors.append(err)

    threads = [threading.Thread(target=open_it) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and seen == [len(migrations())] * 6
    assert [p.name for p in path.parent.iterdir() if p.name.endswith(".new")] == []
    with Store(path) as db:
        assert db.conn.execute("SELECT count(*) FROM lle_migrations").fetchone() == (len(migrations()),)
