"""ThreadBackend: episodes in threads, one writer, the same experiences as a sequential run."""

from __future__ import annotations

import threading

import pytest

from lle.core import Split, Step
from lle.errors import EpisodeError
from lle.runtime.harness import run_episode
from lle.runtime.parallel import run_many
from lle.runtime.threaded import ThreadBackend
from lle.store import Store
from lle.store.episodes import batch_episodes
from lle.worlds.toy import KeysFamily, oracle_policy


def test_threads_store_what_a_sequential_run_records(store: Store) -> None:
    worlds = KeysFamily().small_worlds(Split.dev, 8)
    writers: set[int] = set()

    def on_commit(episode_id: str, step: Step) -> None:
        writers.add(threading.get_ident())

    done = run_many(worlds, oracle_policy, store=store, backend=ThreadBackend(3), record_timings=False,
                    on_commit=on_commit)
    sequential = [run_episode(sw, oracle_policy(sw), record_timings=False) for sw in worlds]
    assert [e.small_world for e in done] == worlds
    assert [e.content_hash for e in done] == [e.content_hash for e in sequential]
    assert writers == {threading.get_ident()}  # every commit in the calling thread: one writer
    assert store.count("steps") == sum(len(e.steps) for e in done)


def test_a_failing_episode_is_reported_and_a_writer_error_stops_the_run(store: Store) -> None:
    worlds = KeysFamily().small_worlds(Split.test, 3)
    broken = worlds[1].model_copy(update={"world": "toy/missing-v1", "id": "toy/missing-v1:x"})
    with pytest.raises(EpisodeError, match="1 of 3 episodes did not finish"):
        run_many([worlds[0], broken, worlds[2]], oracle_policy, store=store, backend=ThreadBackend(2))

    def fail(episode_id: str, step: Step) -> None:
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError, match="disk full"):
        run_many(worlds, oracle_policy, store=store, backend=ThreadBackend(2), on_commit=fail)


def test_episodes_decoded_together_get_a_wall_clock_cap_as_many_times_longer(store: Store) -> None:
    # Episodes in threads share one model: each step waits for the others' tokens, and the wall-clock cap
    # only stops a runaway, so the cap grows with the episodes sharing the model (here 3 jobs, 4 threads).
    worlds = KeysFamily().small_worlds(Split.dev, 3)
    run_many(worlds, oracle_policy, store=store, backend=ThreadBackend(4), batch="shared")
    caps = {record.limits.max_seconds for record in batch_episodes(store, "shared").values()}
    assert caps == {worlds[0].limits.max_seconds * 3}
    run_many(worlds[:1], oracle_policy, store=store, backend=ThreadBackend(1), batch="alone")
    assert {r.limits.max_seconds for r in batch_episodes(store, "alone").values()} == {worlds[0].limits.max_seconds}
