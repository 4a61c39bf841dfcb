"""Episodes as Ray tasks: `run_many(..., backend=RayBackend(workers))`, or `run_many_ray(...)`.

The process pool (`parallel.LocalBackend`) stays the default; this backend runs the same `run_job`
in Ray workers, on a local cluster it starts (`ray.init(num_cpus=…, include_dashboard=False)`) or an
existing one (`address=`, e.g. `ray://head:10001` or `auto`).

Workers write to the store themselves: each task opens the run's store (a PostgreSQL URL across
machines; a SQLite path works on one machine, its writers queueing on the file lock), commits the
episode row before the first step and each step before the next (`StoreRecorder`'s discipline),
and sends the finished experience back; the caller's single `Writer` assesses it and appends the
experiences row (steps already stored are skipped), so an episode is finished exactly once.

A worker killed mid-episode (OOM, node loss, SIGKILL) is a system failure to Ray, which runs the
task again (`max_retries`). The task first reads the store: an episode whose row exists is resumed
from its committed steps (the world rebuilt, the steps replayed, not re-recorded); a finished one
is read back. So each step is committed exactly once, whichever attempt runs it (the steps'
primary key makes a second commit of the same index fail rather than duplicate). Without a store
nothing is durable and a retried task plays its episode from the start.

`on_commit(episode_id, step)` runs in this process when an episode's result arrives, once per step
in order (the workers commit; the driver is not on the step path).
"""

from __future__ import annotations

import contextlib
import os
import sys
import traceback
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from pydantic import JsonValue

from lle.core import Experience, Limits, SmallWorld, Step
from lle.errors import EpisodeError, InvalidInputError, UnknownIdError
from lle.runtime.parallel import (
    BuilderFactory,
    EpisodeJob,
    Factories,
    LeversFor,
    PolicyFactory,
    SkillsFactory,
    Writer,
    run_job,
    run_many,
)
from lle.runtime.recorder import Assessor, OnCommit
from lle.store import Store
from lle.store.episodes import EpisodeRecord, begin_episode, get_episode, is_finished
from lle.store.sqlite import is_url

MAX_RETRIES = 3
"""Ray re-runs a task whose worker died this many times before the episode counts as failed."""


def store_location(store: Store) -> str:
    """What a worker opens to reach the same store: the PostgreSQL URL, or the SQLite file's absolute path."""
    url = getattr(store, "url", None)
    return str(url) if isinstance(url, str) and is_url(url) else str(store.path.absolute())


def init_local(num_cpus: int) -> None:
    """Start a local Ray cluster whose workers import what this process imports (its sys.path, as
    the process pool's spawned workers do)."""
    import ray

    before = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)  # the raylet and its workers inherit it
    try:
        ray.init(num_cpus=num_cpus, include_dashboard=False, log_to_driver=False, configure_logging=False)
    finally:
        if before is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = before


class _WorkerRecorder:
    """Commits the start and every step to the store from the worker; the end goes back to the driver."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def begin(self, record: EpisodeRecord) -> None:
        begin_episode(self.store, record)

    def commit(self, episode_id: str, step: Step) -> None:
        self.store.append_step(episode_id, step)

    def finish(self, experience: Experience) -> Experience:
        return experience


class _NoStoreRecorder:
    def begin(self, record: EpisodeRecord) -> None:
        pass

    def commit(self, episode_id: str, step: Step) -> None:
        pass

    def finish(self, experience: Experience) -> Experience:
        return experience


def continue_from(job: EpisodeJob, store: Store) -> EpisodeJob | Experience:
    """The job as the store has it now: its stored experience when finished, resumed from its
    committed steps when started (by an earlier attempt whose worker died), else unchanged."""
    if is_finished(store, job.episode_id):
        return store.get_experience(job.episode_id)
    try:
        record = get_episode(store, job.episode_id)
    except UnknownIdError:  # never begun, so nothing was committed: start it
        return job
    return replace(job, limits=record.limits, world_options=dict(record.world_options), levers=record.levers,
                   resume=True, history=tuple(store.steps_of(job.episode_id)),
                   initial_observation=record.initial_observation)


_open_stores: dict[str, Store] = {}
"""Stores this worker process has open, by location: Ray reuses workers across tasks, and opening a
PostgreSQL store (a connection, the schema check) costs more than a short episode."""


def _store_at(location: str) -> Store:
    if location not in _open_stores:
        _open_stores[location] = Store(location)
    return _open_stores[location]


def play(job: EpisodeJob, factories: Factories, location: str | None) -> tuple[str, str]:
    """One episode in a Ray worker: ("done", experience JSON) or ("error", traceback)."""
    try:
        if location is None:
            return "done", run_job(job, factories, _NoStoreRecorder()).model_dump_json()
        store = _store_at(location)
        current = continue_from(job, store)
        if isinstance(current, Experience):
            return "done", current.model_dump_json()
        return "done", run_job(current, factories, _WorkerRecorder(store)).model_dump_json()
    except Exception:  # reported to the driver; the episode stays resumable
        if location is not None and (stale := _open_stores.pop(location, None)) is not None:
            with contextlib.suppress(Exception):  # a broken connection: the next task opens a new one
                stale.close()
        return "error", traceback.format_exc(limit=8)


class RayBackend:
    """Runs jobs as Ray tasks, at most `workers` at a time (the `Backend` protocol of `run_many`)."""

    def __init__(self, workers: int = 2, *, address: str | None = None, max_retries: int = MAX_RETRIES,
                 shutdown: bool = False) -> None:
        """`address`: an existing cluster (None: this process's, started locally with `workers` CPUs when
        Ray is not running yet). `shutdown`: stop the local cluster after the run (a CLI run; tests and
        benchmarks keep it for the next)."""
        self.workers = max(1, workers)
        self.address = address
        self.max_retries = max_retries
        self.shutdown = shutdown

    def run(self, jobs: Sequence[EpisodeJob], writer: Writer, factories: Factories) -> None:
        import ray

        started = False
        if not ray.is_initialized():
            if self.address:
                ray.init(address=self.address, log_to_driver=False)
            else:
                init_local(self.workers)
            started = True
        location = store_location(writer.store) if writer.store is not None else None
        task = ray.remote(max_retries=self.max_retries, retry_exceptions=False, num_cpus=1)(play)
        queue = list(jobs)[::-1]
        pending: dict[Any, EpisodeJob] = {}
        try:
            while queue or pending:
                while queue and len(pending) < self.workers:
                    job = queue.pop()
                    pending[task.remote(job, factories, location)] = job
                done, _ = ray.wait(list(pending), num_returns=1)
                for ref in done:
                    self._collect(ref, pending.pop(ref), writer)
        finally:
            for ref in pending:  # interrupted: stop what runs; what it committed stays committed
                with contextlib.suppress(Exception):
                    ray.cancel(ref, force=True)
            if started and self.shutdown:
                ray.shutdown()

    @staticmethod
    def _collect(ref: Any, job: EpisodeJob, writer: Writer) -> None:
        import ray

        try:
            kind, body = ray.get(ref)
        except Exception as err:  # every retry's worker died, or the task could not run at all
            writer.fail(job.index, f"its Ray task failed after retries: {type(err).__name__}: {err}")
            return
        if kind != "done":
            writer.fail(job.index, body)
            return
        experience = Experience.model_validate_json(body)
        done = writer.finish(job.index, experience)
        if writer.on_commit is not None:
            for step in done.steps:
                writer.on_commit(done.id, step)


def run_many_ray(
    small_worlds: Sequence[SmallWorld],
    policy_factory: PolicyFactory,
    *,
    store: Store | None = None,
    workers: int = 2,
    address: str | None = None,
    context_builder_factory: BuilderFactory | None = None,
    skills_factory: SkillsFactory | None = None,
    limits: Limits | None = None,
    world_options: Mapping[str, JsonValue] | None = None,
    batch: str | None = None,
    on_commit: OnCommit | None = None,
    record_timings: bool = True,
    assess: Assessor | None = None,
    levers: LeversFor | None = None,
) -> list[Experience]:
    """`run_many` with its episodes as Ray tasks: the same arguments and results (see `parallel.run_many`)."""
    if store is None and batch is not None:
        raise InvalidInputError("a batch name only makes sense with a store to find it in again; pass store=")
    try:
        import ray  # noqa: F401
    except ImportError as err:
        raise EpisodeError("Ray is not installed: pip install 'lle[ray]'") from err
    return run_many(small_worlds, policy_factory, store=store, workers=workers,
                    context_builder_factory=context_builder_factory, skills_factory=skills_factory, limits=limits,
                    world_options=world_options, batch=batch, backend=RayBackend(workers, address=address),
                    on_commit=on_commit, record_timings=record_timings, assess=assess, levers=levers)

