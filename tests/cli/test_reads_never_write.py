"""Reads never write, end to end in real processes: a reading command opens its store for reading only, so it
never creates, migrates nor writes one; a damaged store (0 bytes) is named by every command and left as it is;
and a run resumes only in its own folder, with its own stores (issue 43)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import apsw
import pytest

from lle.config import RunConfig
from lle.core import Experience, Limits
from lle.store import Store, migrations
from lle.store.episodes import EpisodeRecord, begin_episode

OLD = 1_600_000_000  # an mtime in 2020: a write would move it


def lle(workspace: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "lle.cli.main", "--workspace", str(workspace), *args],
                          capture_output=True, text=True, timeout=120)


def one_line_error(result: subprocess.CompletedProcess[str], *needles: str) -> str:
    assert "Traceback" not in result.stderr, result.stderr
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def files(folder: Path) -> dict[str, tuple[int, int, bytes]]:
    """Every file under `folder`: its size, mtime and bytes (but SQLite's `-wal` and `-shm` beside a store, which
    any reader of a WAL database may leave, the store itself untouched)."""
    return {str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns, p.read_bytes())
            for p in sorted(folder.rglob("*")) if p.is_file() and not p.name.endswith(("-wal", "-shm"))}


def save_run(workspace: Path, config: RunConfig, folder_name: str | None = None) -> Path:
    folder = workspace / "runs" / (folder_name or config.id)
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(config.model_dump_json(indent=2))
    return folder


def toy() -> RunConfig:
    return RunConfig(suite="toy", model="oracle", strategies=["lle"], rounds=1, train_per_round=1, eval_tasks=1)


@pytest.fixture
def workspace(tmp_path: Path, make_experience: Callable[..., Experience]) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    with Store(ws / "lle.db") as db:
        db.append_experience(make_experience())
    return ws


def test_reads_name_a_zero_byte_run_store_as_damaged_and_leave_it_as_it_is(workspace: Path) -> None:
    folder = save_run(workspace, toy())
    damaged = folder / "lle.db"
    damaged.write_bytes(b"")
    os.utime(damaged, (OLD, OLD))
    before = files(workspace)
    for args in (["episodes", "list", "--run", "latest"], ["experiences", "list", "--run", "latest"],
                 ["updates", "list", "--run", "latest"], ["memory", "list", "--run", "latest"],
                 ["store", "check", "--run", "latest"], ["report", "--no-pages"], ["runs", "show"]):
        one_line_error(lle(workspace, *args), str(damaged), "0 bytes", "damaged")
        assert files(workspace) == before, args
    listed = lle(workspace, "runs", "list", "--json")  # listed (its config reads back), its damage named
    assert listed.returncode == 0 and "Traceback" not in listed.stderr, listed.stderr
    assert [r["id"] for r in json.loads(listed.stdout)] == [folder.name]
    assert str(damaged) in listed.stderr and "damaged" in listed.stderr
    assert damaged.stat().st_size == 0 and damaged.stat().st_mtime == OLD
    one_line_error(lle(workspace, "run", "--resume", folder.name, "--json"), str(damaged), "empty")
    assert files(workspace) == before


def test_every_command_names_a_zero_byte_workspace_store_as_damaged(workspace: Path, tmp_path: Path,
                                                                    make_experience: Callable[..., Experience]
                                                                    ) -> None:
    store = workspace / "lle.db"
    store.write_bytes(b"")
    os.utime(store, (OLD, OLD))
    one = tmp_path / "one.jsonl"
    one.write_text(make_experience(project="clinic").model_dump_json() + "\n")
    before = files(workspace)
    for args in (["experiences", "list"], ["store", "check"], ["episodes", "list"],
                 ["experiences", "import", str(one)]):  # a write too: it would start a new ledger in its place
        one_line_error(lle(workspace, *args), str(store), "0 bytes", "damaged")
    assert files(workspace) == before


def test_a_read_creates_no_store_where_none_was(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    for args in (["experiences", "list"], ["episodes", "list"], ["updates", "list"], ["store", "check"],
                 ["memory", "list"], ["skills", "list"]):
        one_line_error(lle(empty, *args), str(empty / "lle.db"), "no store")
        assert list(empty.iterdir()) == [], args
    absent = tmp_path / "absent"
    one_line_error(lle(absent, "experiences", "list"), "no store")
    assert not absent.exists()
    (empty / "runs" / "run_unfinished").mkdir(parents=True)  # no run (no config): the listings read lle.db
    for args in (["experiences", "list"], ["memory", "list"], ["skills", "list"]):
        one_line_error(lle(empty, *args), str(empty / "lle.db"), "no store")
    assert [p.name for p in empty.rglob("*")] == ["runs", "run_unfinished"]


def test_a_read_leaves_the_store_file_as_it_was(workspace: Path) -> None:
    store = workspace / "lle.db"
    os.utime(store, (OLD, OLD))
    before = store.read_bytes()
    for args in (["experiences", "list"], ["episodes", "list"], ["store", "check"], ["memory", "list"],
                 ["updates", "list"]):
        done = lle(workspace, *args)
        assert done.returncode == 0, (args, done.stderr)
    assert store.read_bytes() == before and store.stat().st_mtime == OLD


def test_a_run_with_another_runs_config_is_not_resumed_nor_listed_twice(workspace: Path) -> None:
    first = save_run(workspace, toy())
    second = save_run(workspace, toy())
    shutil.copy(first / "config.json", second / "config.json")  # the first run's config in the second's folder
    before = files(workspace)
    line = one_line_error(lle(workspace, "run", "--resume", second.name, "--json"), first.name, second.name,
                          "config.json")
    assert "lle runs rm" in line or "backup" in line
    listed = lle(workspace, "runs", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    ids = [r["id"] for r in json.loads(listed.stdout)]
    assert ids == [first.name] and len(ids) == len(set(ids))
    assert second.name in listed.stderr and first.name in listed.stderr
    table = lle(workspace, "runs", "list")
    assert [row.split()[0] for row in table.stdout.splitlines()[1:]] == [first.name], table.stdout
    edited = json.loads((first / "config.json").read_text()) | {"id": "run_edited"}  # an id edited by hand
    (first / "config.json").write_text(json.dumps(edited))
    one_line_error(lle(workspace, "run", "--resume", first.name, "--json"), "run_edited", first.name)
    assert not (workspace / "runs" / "run_edited").exists()
    assert {k: v for k, v in files(workspace).items() if not k.endswith("config.json")} == \
        {k: v for k, v in before.items() if not k.endswith("config.json")}


def test_a_run_with_another_runs_store_is_not_resumed(workspace: Path, make_experience: Callable[..., Experience]
                                                      ) -> None:
    other, mine = toy(), toy()
    folder = save_run(workspace, mine)
    exp = make_experience()
    with Store(folder / "lle.db") as db:  # a store whose episodes belong to another run (copied from it)
        begin_episode(db, EpisodeRecord(id=exp.id, small_world=exp.small_world, policy=exp.policy, limits=Limits(),
                                        initial_observation="", batch=f"{other.id}/lle/r1/train", batch_key="0"))
    before = files(workspace)
    one_line_error(lle(workspace, "run", "--resume", mine.id, "--json"), str(folder / "lle.db"), other.id, mine.id)
    assert files(workspace) == before


def test_an_older_store_is_read_as_it_is_and_migrated_only_on_request(tmp_path: Path) -> None:
    ws = tmp_path / "old"
    ws.mkdir()
    conn = apsw.Connection(str(ws / "lle.db"))  # what an lle at migration 6 left
    conn.execute("PRAGMA journal_mode=WAL")
    with conn:
        for number, name, sql in migrations()[:6]:
            conn.execute(sql)
            conn.execute("INSERT INTO lle_migrations VALUES (?, ?, 'then')", (number, name))
    conn.close()
    os.utime(ws / "lle.db", (OLD, OLD))
    before = files(ws)
    for args in (["experiences", "list", "--json"], ["store", "check", "--json"]):
        done = lle(ws, *args)
        assert done.returncode == 0 and "Traceback" not in done.stderr, (args, done.stderr)
    assert json.loads(lle(ws, "store", "check", "--json").stdout)["schema_version"] == len(migrations())
    assert files(ws) == before  # read from a migrated copy in memory, the file as it was
    migrated = lle(ws, "store", "migrate")
    assert migrated.returncode == 0 and f"schema {len(migrations())}" in migrated.stdout, migrated.stderr
    with Store(ws / "lle.db", read_only=True) as db:
        assert db.conn.execute("SELECT count(*) FROM lle_migrations").fetchone() == (len(migrations()),)
