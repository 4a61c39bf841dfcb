"""SIGKILL a 200-episode parallel batch at random points, resume it, and lose nothing acknowledged."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from lle.core import Split
from lle.policies import ScriptedPolicy
from lle.runtime.harness import Submitted, run_episode, stop_of
from lle.store import Store
from lle.store.episodes import list_episodes
from lle.worlds.toy import KeysFamily, oracle_actions

CHILD = Path(__file__).with_name("episode_crash_child.py")
N = 200


def _acks(log: Path) -> list[tuple[str, int]]:
    if not log.exists():
        return []
    return [(a, int(b)) for a, b in (line.split() for line in log.read_text().splitlines())]


def _start(db: Path, log: Path) -> subprocess.Popen[str]:
    # Its own session, so the kill takes the workers too: the whole machine "crashes".
    return subprocess.Popen([sys.executable, str(CHILD), str(db), str(log), str(N), "2"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_sigkilled_parallel_batch_resumes_with_every_episode_ending_once(tmp_path: Path) -> None:
    db, log = tmp_path / "lle.db", tmp_path / "acks.log"
    rng = random.Random(20261202)
    kills, saw_unfinished = 0, 0
    while kills < 4:
        before = len(_acks(log))
        child = _start(db, log)
        target = before + rng.randint(40, 300)  # a random point in the stream of steps
        deadline = time.monotonic() + 30
        while len(_acks(log)) < target and child.poll() is None and time.monotonic() < deadline:
            time.sleep(0.005)
        time.sleep(rng.uniform(0, 0.05))
        if child.poll() is not None:
            break  # finished before the kill: nothing left to interrupt
        os.killpg(child.pid, signal.SIGKILL)
        child.wait()
        kills += 1
        with Store(db) as store:
            assert store.integrity_check() == "ok"
            saw_unfinished += bool(list_episodes(store, unfinished=True, limit=1000))
    assert kills >= 3 and saw_unfinished >= 1  # episodes really were cut mid-way and had to be resumed
    final = _start(db, log)
    out, err = final.communicate(timeout=90)
    assert final.returncode == 0, err[-2000:]
    assert out.strip() == f"finished {N}"

    acks = _acks(log)
    family = KeysFamily()
    expected = {sw.id: sw for sw in family.small_worlds(Split.train, N)}
    with Store(db) as store:
        assert store.integrity_check() == "ok"
        rows = store.list_experiences(limit=10_000)
        assert len(rows) == N == store.count("experiences")  # every episode ended exactly once
        episodes = list_episodes(store, limit=10_000)
        assert len(episodes) == N and all(done for _, _, done in episodes)  # no episode started twice
        by_id = {}
        for row in rows:
            exp = store.get_experience(row.id)
            by_id[row.id] = exp
            assert [s.index for s in exp.steps] == list(range(row.n_steps))  # none lost, none doubled
            assert exp.content_hash == exp.compute_hash() == row.content_hash
        (total_steps,) = store.conn.execute("SELECT count(*) FROM steps").fetchone() or (None,)
        assert total_steps == sum(r.n_steps for r in rows)
    # Every acknowledged step is stored, and acknowledged once: a step is acked only after its commit.
    assert all(exp_id in by_id and idx < len(by_id[exp_id].steps) for exp_id, idx in acks)
    assert max(Counter(acks).values()) == 1
    # A kill can fall between a commit and its ack line, so a few stored steps may lack an ack: at most
    # one per kill, since the single writer commits one step at a time.
    assert 0 <= sum(len(e.steps) for e in by_id.values()) - len(set(acks)) <= kills
    # Killed, resumed or not, each stored episode is what an uninterrupted sequential run records.
    for exp in by_id.values():
        sw = expected[exp.small_world.id]
        straight = run_episode(sw, ScriptedPolicy(oracle_actions(sw), name="toy-oracle"), record_timings=False)
        assert exp.content_hash == straight.content_hash, sw.id
        assert isinstance(stop_of(exp.steps[-1]), Submitted)
    assert {e.small_world.id for e in by_id.values()} == set(expected)
