"""run_many: worker processes, one writer, the same experiences as a sequential run."""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from pathlib import Path

import pytest

from lle.core import Split, Step
from lle.errors import EpisodeError, InvalidInputError
from lle.runtime.harness import run_episode
from lle.runtime.parallel import (
    EpisodeJob,
    Factories,
    LocalBackend,
    Writer,
    run_job,
    run_many,
)
from lle.runtime.recorder import timing_free_hash
from lle.store import Store
from lle.store.episodes import list_episodes
from lle.worlds.toy import KeysFamily, oracle_policy

FAMILY = KeysFamily()


def test_two_workers_store_what_a_sequential_run_records(store: Store) -> None:
    worlds = FAMILY.small_worlds(Split.dev, 12)
    committed: list[tuple[str, int]] = []
    parallel = run_many(worlds, oracle_policy, store=store, workers=2, record_timings=False,
                        on_commit=lambda eid, step: committed.append((eid, step.index)))
    sequential = [run_episode(sw, oracle_policy(sw), record_timings=False) for sw in worlds]
    assert [e.small_world for e in parallel] == worlds  # input order, whatever order they finished in
    assert [e.content_hash for e in parallel] == [e.content_hash for e in sequential]
    assert {e.id for e in parallel}.isdisjoint({e.id for e in sequential})
    assert [store.get_experience(e.id) for e in parallel] == parallel
    assert len(committed) == len(set(committed)) == sum(len(e.steps) for e in parallel)
    # With timings on, durations differ run to run; everything else still matches.
    timed = run_many(worlds[:3], oracle_policy, workers=2)
    assert [timing_free_hash(e) for e in timed] == [timing_free_hash(e) for e in sequential[:3]]


def test_a_batch_run_again_reads_finished_episodes_back(tmp_path: Path) -> None:
    worlds = FAMILY.small_worlds(Split.train, 5)
    worlds.append(worlds[0])  # the same small world twice is two episodes
    with Store(tmp_path / "lle.db") as db:
        first = run_many(worlds, oracle_policy, store=db, workers=0, batch="nightly")
        again = run_many(worlds, oracle_policy, store=db, workers=2, batch="nightly")
        assert [e.id for e in again] == [e.id for e in first] and again == first
        assert db.count("experiences") == 6 and len(list_episodes(db)) == 6
        assert first[0].id != first[5].id and first[0].small_world == first[5].small_world
        other = run_many(worlds[:2], oracle_policy, store=db, workers=0, batch="another")
        assert {e.id for e in other}.isdisjoint({e.id for e in first})
    with pytest.raises(InvalidInputError, match="pass store="):
        run_many(worlds, oracle_policy, batch="nightly")


def test_an_episode_that_cannot_run_is_reported_after_the_others_finish(store: Store) -> None:
    worlds = FAMILY.small_worlds(Split.test, 3)
    broken = worlds[1].model_copy(update={"world": "toy/missing-v1", "id": "toy/missing-v1:x"})
    with pytest.raises(EpisodeError, match=r"1 of 3 episodes did not finish; first, toy/missing-v1:x: .*toy/missing"):
        run_many([worlds[0], broken, worlds[2]], oracle_policy, store=store, workers=2)
    stored = [store.get_experience(r.id).small_world.id for r in store.list_experiences()]
    assert sorted(stored) == sorted([worlds[0].id, worlds[2].id])
    # The broken one was never begun (its world would not build), so there is nothing half-written.
    assert len(list_episodes(store, unfinished=True)) == 0


class InProcessBackend:
    """A third backend through the same door a Ray backend would use."""

    def __init__(self) -> None:
        self.ran: list[str] = []

    def run(self, jobs: Sequence[EpisodeJob], writer: Writer, factories: Factories) -> None:
        for job in reversed(jobs):  # any order: results still come back in input order
            self.ran.append(job.small_world.id)
            run_job(job, factories, writer.job_recorder(job.index))


def test_a_custom_backend_slots_in_behind_run_many(store: Store) -> None:
    worlds = FAMILY.small_worlds(Split.train, 3)
    backend = InProcessBackend()
    done = run_many(worlds, oracle_policy, store=store, backend=backend, record_timings=False)
    assert backend.ran == [w.id for w in reversed(worlds)]
    assert [e.small_world for e in done] == worlds and store.count("experiences") == 3
    with pytest.raises(InvalidInputError, match="unknown backend 'ray'"):
        run_many(worlds, oracle_policy, backend="ray")


DYING = '''
import os
from pathlib import Path
from lle.policies import ScriptedPolicy
from lle.worlds.toy import oracle_actions

MARK = Path({mark!r})

class DiesOnce(ScriptedPolicy):
    def act(self, context):
        if self.position == 3 and not MARK.exists():
            MARK.write_text("died")
            os._exit(9)  # the worker process dies mid-episode, like a segfault would
        return super().act(context)

def factory(small_world):
    return DiesOnce(oracle_actions(small_world), name="toy-oracle")
'''


def test_a_worker_that_dies_mid_episode_is_replaced_and_the_episode_resumed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, store: Store) -> None:
    (tmp_path / "dying_policy.py").write_text(textwrap.dedent(DYING.format(mark=str(tmp_path / "died"))))
    monkeypatch.syspath_prepend(str(tmp_path))  # spawned workers get this sys.path (a forkserver has its own)
    import dying_policy  # type: ignore[import-not-found]

    worlds = FAMILY.small_worlds(Split.train, 4)
    steps: list[Step] = []
    done = run_many(worlds, dying_policy.factory, store=store, backend=LocalBackend(2, start_method="spawn"),
                    record_timings=False, on_commit=lambda _eid, step: steps.append(step))
    assert (tmp_path / "died").exists()
    straight = [run_episode(sw, oracle_policy(sw), record_timings=False) for sw in worlds]
    assert [e.content_hash for e in done] == [e.content_hash for e in straight]
    assert len(steps) == sum(len(e.steps) for e in done)  # the dead worker's steps were kept, not redone
