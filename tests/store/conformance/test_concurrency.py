"""Many writer processes at once, and a writer killed mid-stream, on both backends."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

from lle.store import Store

APPENDER = Path(__file__).resolve().parents[1] / "appender.py"


def _check(location: str, acknowledged: dict[str, str], n_steps: int) -> int:
    """Every acknowledged experience intact, no torn experience, integrity ok; how many are stored."""
    with Store(location) as db:
        assert db.integrity_check() == "ok"
        rows = db.list_experiences(limit=100_000)
        present = {r.id: r.content_hash for r in rows}
        for row in rows[:: max(1, len(rows) // 50)]:  # a sample read back whole (all are counted below)
            exp = db.get_experience(row.id)
            assert len(exp.steps) == row.n_steps == n_steps and exp.compute_hash() == row.content_hash
        assert db.count("steps") == n_steps * len(rows)  # no partial experience, no orphan step
    for id_, content_hash in acknowledged.items():
        assert present.get(id_) == content_hash, f"acknowledged {id_} lost or changed"
    return len(present)


def test_eight_writers_append_250_each_and_none_is_lost(location: str) -> None:
    with Store(location):
        pass  # created and migrated once, so the writers race on appends, not on the schema
    started = time.monotonic()
    children = [subprocess.Popen([sys.executable, str(APPENDER), location, "250", "2", "50", "200"],
                                 stdout=subprocess.PIPE, text=True) for _ in range(8)]
    acknowledged: dict[str, str] = {}
    for child in children:
        out, _ = child.communicate(timeout=120)
        assert child.returncode == 0
        acknowledged.update(line.split()[1:3] for line in out.splitlines())  # type: ignore[misc]
    assert len(acknowledged) == 2000
    assert _check(location, acknowledged, 2) == 2000
    assert time.monotonic() - started < 60


def test_a_writer_killed_mid_stream_loses_nothing_acknowledged(location: str) -> None:
    with Store(location):
        pass
    acknowledged: dict[str, str] = {}
    for delay in (0.05, 0.2, 0.4):
        child = subprocess.Popen([sys.executable, str(APPENDER), location, "100000", "3", "4", "100"],
                                 stdout=subprocess.PIPE, text=True)
        assert child.stdout is not None
        first = child.stdout.readline()  # appending now: kill it a moment later, mid-transaction or not
        time.sleep(delay)
        child.send_signal(signal.SIGKILL)
        out, _ = child.communicate()
        out = first + out
        assert child.returncode == -signal.SIGKILL
        acknowledged.update(line.split()[1:3] for line in out.splitlines() if line.startswith("ack "))  # type: ignore[misc]
    assert _check(location, acknowledged, 3) >= len(acknowledged) > 0
