"""Episodes as Ray tasks on a local cluster: the same experiences as the process pool, and a worker
killed mid-episode is retried and resumed from its last committed step (none lost, none twice).

Ray's start-up takes ~6 s here; the module shares one local cluster (num_cpus=2)."""

from __future__ import annotations

import importlib.util
import os
import signal
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from lle.core import Policy, SmallWorld, Split, Step
from lle.errors import EpisodeError
from lle.policies import ScriptedPolicy
from lle.runtime.harness import run_episode
from lle.runtime.parallel import run_many
from lle.runtime.ray_executor import RayBackend, init_local, run_many_ray
from lle.store import Store
from lle.store.episodes import list_episodes
from lle.store.pg_server import TempServer, find_bin_dir
from lle.worlds.toy import KeysFamily, oracle_actions, oracle_policy

pytestmark = pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="Ray is not installed: "
                                "pip install 'lle[ray]' (make install does)")
FAMILY = KeysFamily()


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[None]:
    import ray
    from ray import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # workers get DiesOnce by value
    init_local(2)
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def pg_url_maker() -> Iterator[TempServer | None]:
    if importlib.util.find_spec("psycopg") is None or find_bin_dir() is None:
        yield None
        return
    with TempServer() as server:
        yield server


@pytest.fixture(params=["sqlite", "postgres"])
def location(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "lle.db")
    server: TempServer | None = request.getfixturevalue("pg_url_maker")
    if server is None:
        pytest.skip("PostgreSQL or psycopg is not installed (apt-get install postgresql; pip install 'lle[postgres]')")
    return server.new_database()


class _DiesOnce(ScriptedPolicy):
    def __init__(self, actions: list[dict[str, object]], mark: Path) -> None:
        super().__init__(actions, name="toy-oracle")
        self.mark = mark

    def act(self, context):  # type: ignore[no-untyped-def]
        if self.position == 3 and not self.mark.exists():
            self.mark.write_text(str(os.getpid()))
            os.kill(os.getpid(), signal.SIGKILL)  # the Ray worker process dies mid-episode
        return super().act(context)


@dataclass(frozen=True)
class DiesOnce:
    """Policy factory: the oracle, whose worker is killed at the 4th step of the first episode to get there."""

    mark: str

    def __call__(self, small_world: SmallWorld) -> Policy:
        return _DiesOnce(oracle_actions(small_world), Path(self.mark))


@pytest.mark.usefixtures("ray_cluster")
def test_a_killed_ray_worker_is_retried_and_resumes_without_losing_or_repeating_a_step(
        location: str, tmp_path: Path) -> None:
    worlds = FAMILY.small_worlds(Split.train, 4)
    mark = tmp_path / "died"
    steps: list[tuple[str, int]] = []
    with Store(location) as store:
        done = run_many(worlds, DiesOnce(str(mark)), store=store, backend=RayBackend(2), record_timings=False,
                        on_commit=lambda eid, step: steps.append((eid, step.index)))
        assert mark.exists() and mark.read_text() != str(os.getpid())  # a worker, not this process, died
        straight = [run_episode(sw, oracle_policy(sw), record_timings=False) for sw in worlds]
        assert [e.content_hash for e in done] == [e.content_hash for e in straight]
        assert [store.get_experience(e.id) for e in done] == done
        n_steps = sum(len(e.steps) for e in done)
        assert store.count("steps") == n_steps and len(steps) == len(set(steps)) == n_steps
        assert store.count("experiences") == 4 and list_episodes(store, unfinished=True) == []
        assert store.integrity_check() == "ok"


@pytest.mark.usefixtures("ray_cluster")
def test_ray_runs_what_the_process_pool_runs_and_a_batch_reads_back(tmp_path: Path) -> None:
    worlds = FAMILY.small_worlds(Split.dev, 6)
    with Store(tmp_path / "lle.db") as store:
        on_ray = run_many_ray(worlds, oracle_policy, store=store, workers=2, record_timings=False, batch="b")
        pooled = run_many(worlds, oracle_policy, workers=2, record_timings=False)
        assert [e.content_hash for e in on_ray] == [e.content_hash for e in pooled]
        assert [e.small_world for e in on_ray] == worlds
        again = run_many_ray(worlds, oracle_policy, store=store, workers=2, batch="b")
        assert again == on_ray and store.count("experiences") == 6
    without_store: list[Step] = []
    free = run_many_ray(worlds[:2], oracle_policy, workers=1, record_timings=False,
                        on_commit=lambda _eid, step: without_store.append(step))
    assert [e.content_hash for e in free] == [e.content_hash for e in pooled[:2]]
    assert len(without_store) == sum(len(e.steps) for e in free)
    broken = worlds[1].model_copy(update={"world": "toy/missing-v1", "id": "toy/missing-v1:x"})
    with pytest.raises(EpisodeError, match=r"1 of 3 episodes did not finish; first, toy/missing-v1:x"):
        run_many_ray([worlds[0], broken, worlds[2]], oracle_policy, workers=2)
