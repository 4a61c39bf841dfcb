"""Crash consistency and concurrency with real processes and SIGKILL."""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lle.store import Store

APPENDER = Path(__file__).with_name("appender.py")


def _check_store(path: Path, acknowledged: dict[str, str]) -> int:
    """Every acknowledged experience intact, no partial experience visible, integrity ok."""
    with Store(path) as db:
        assert db.integrity_check() == "ok"
        rows = db.list_experiences(limit=100_000)
        for row in rows:
            exp = db.get_experience(row.id)
            assert len(exp.steps) == row.n_steps == 5, f"{row.id}: partial steps"
            assert len(exp.evidence) == row.n_evidence == 1, f"{row.id}: partial evidence"
            assert exp.compute_hash() == exp.content_hash == row.content_hash
        present = {r.id: r.content_hash for r in rows}
        # Steps are only ever written with their experience here, so orphans would be a torn write.
        orphans = db.conn.execute(
            "SELECT count(*) FROM steps WHERE experience_id NOT IN (SELECT id FROM experiences)").fetchone()[0]
        assert orphans == 0
    for id_, content_hash in acknowledged.items():
        assert present.get(id_) == content_hash, f"acknowledged {id_} lost or changed"
    return len(present)


@pytest.mark.slow
def test_sigkill_at_random_points_loses_nothing_acknowledged(tmp_path: Path) -> None:
    db = tmp_path / "lle.db"
    Store(db).close()  # created and migrated before the first kill
    rng = random.Random(20261202)
    acknowledged: dict[str, str] = {}
    kills = 0
    while kills < 50:
        child = subprocess.Popen([sys.executable, str(APPENDER), str(db), "100000"],
                                 stdout=subprocess.PIPE, text=True)
        assert child.stdout is not None
        # Wait for the child to be appending, then kill it at a random moment mid-stream.
        first = child.stdout.readline()
        if first.startswith("ack "):
            _, id_, h = first.split()
            acknowledged[id_] = h
        time.sleep(rng.uniform(0.0, 0.05))
        child.send_signal(signal.SIGKILL)
        out, _ = child.communicate()
        assert child.returncode == -signal.SIGKILL
        for line in out.splitlines():
            if line.startswith("ack "):
                _, id_, h = line.split()
                acknowledged[id_] = h
        kills += 1
    present = _check_store(db, acknowledged)
    assert len(acknowledged) > 50 and present >= len(acknowledged)


@pytest.mark.slow
def test_four_processes_append_250_each_concurrently(tmp_path: Path) -> None:
    db = tmp_path / "lle.db"
    children = [subprocess.Popen([sys.executable, str(APPENDER), str(db), "250"], stdout=subprocess.PIPE, text=True)
                for _ in range(4)]
    acknowledged: dict[str, str] = {}
    for child in children:
        out, _ = child.communicate(timeout=240)
        assert child.returncode == 0
        acknowledged.update(line.split()[1:3] for line in out.splitlines())  # type: ignore[misc]
    assert len(acknowledged) == 1000
    assert _check_store(db, acknowledged) == 1000


def test_processes_opening_a_new_store_at_once_all_open_it(tmp_path: Path) -> None:
    """The first read waits for a process creating the file instead of failing with 'database is locked'
    (it failed about one open in eight before the busy timeout was set ahead of that read)."""
    code = "import sys; from lle.store import Store; Store(sys.argv[1]).close()"
    for round_ in range(4):
        db = tmp_path / f"lle{round_}.db"
        children = [subprocess.Popen([sys.executable, "-c", code, str(db)], stderr=subprocess.PIPE, text=True)
                    for _ in range(6)]
        for child in children:
            _, err = child.communicate(timeout=120)
            assert child.returncode == 0, err.strip().splitlines()[-1]
        with Store(db) as store:
            assert store.integrity_check() == "ok"
            assert store.schema_version == store.latest_version
