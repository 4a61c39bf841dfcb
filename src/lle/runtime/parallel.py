"""Many episodes at once: workers run the loop, ONE writer in the parent commits everything.

Workers never open the store. Each sends its episode's start, every step and the final experience
to the parent and waits for the ack before its next step, so "committed before the next step
begins" holds across processes too, and SQLite sees a single writer. With a `batch` name a killed
run is restarted by calling `run_many` again with the same small worlds: finished episodes are
read back, started ones resumed from their last committed step, the rest started.

`backend` is where the loop runs: `"local"` (a process pool of `workers`; `workers=0` runs in this
process) or any object with `run(jobs, writer)`, so a Ray backend can slot in behind the same call.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import traceback
from collections import Counter, deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from multiprocessing.connection import Connection, wait
from typing import Any, Protocol

from pydantic import JsonValue

from lle.config import Levers
from lle.core import ContextBuilder, Experience, Limits, Policy, SmallWorld, Step, new_id
from lle.errors import EpisodeError, InvalidInputError
from lle.runtime.grounding import SkillTool
from lle.runtime.harness import Episode
from lle.runtime.recorder import Assessor, OnCommit
from lle.store import Store
from lle.store.episodes import EpisodeRecord, batch_episodes, begin_episode, is_finished

PolicyFactory = Callable[[SmallWorld], Policy]
BuilderFactory = Callable[[], ContextBuilder]
LeversFor = Levers | Callable[[SmallWorld], Levers]
"""The harness levers of a small world's episode: one set for all, or chosen per small world (in this process)."""
SkillsFactory = Callable[[SmallWorld], Sequence[SkillTool]]
"""The skills offered in a small world's episode, looked up in the worker (e.g. a library's active ones)."""
MAX_ATTEMPTS = 2
"""A job whose worker died is resumed once in a fresh worker before it counts as failed."""


@dataclass(frozen=True)
class EpisodeJob:
    """One episode to run (or resume): everything a worker needs, picklable."""

    index: int
    episode_id: str
    small_world: SmallWorld
    limits: Limits | None = None
    world_options: dict[str, JsonValue] = field(default_factory=dict)
    batch: str | None = None
    batch_key: str | None = None
    resume: bool = False
    history: tuple[Step, ...] = ()
    initial_observation: str | None = None
    record_timings: bool = True
    attempt: int = 1
    levers: Levers | None = None


@dataclass(frozen=True)
class Factories:
    """What a worker builds per episode from the job: picklable callables (module-level functions or classes)."""

    policy: PolicyFactory
    builder: BuilderFactory | None = None
    skills: SkillsFactory | None = None


def run_job(job: EpisodeJob, factories: Factories, recorder: Any) -> Experience:
    """Play one job with `recorder` (the same code path in-process, in a pool worker, or on a Ray actor)."""
    skills = factories.skills(job.small_world) if factories.skills else ()
    return Episode(
        job.small_world, factories.policy(job.small_world), factories.builder() if factories.builder else None,
        job.limits, recorder=recorder, skills=skills, episode_id=job.episode_id, world_options=job.world_options,
        resume=job.resume, history=job.history, expected_initial_observation=job.initial_observation,
        record_timings=job.record_timings, batch=job.batch, batch_key=job.batch_key, levers=job.levers,
    ).run()


class Writer:
    """The single writer: commits what workers send, in the parent process, and collects results."""

    def __init__(self, store: Store | None, n_jobs: int, on_commit: OnCommit | None,
                 assess: Assessor | None = None) -> None:
        self.store = store
        self.on_commit = on_commit
        self.assess = assess
        self.results: list[Experience | None] = [None] * n_jobs
        self.errors: dict[int, str] = {}
        # What this writer committed for episodes in flight, so a job whose worker died can resume
        # from it (also without a store); dropped when the episode finishes.
        self.records: dict[str, EpisodeRecord] = {}
        self.steps: dict[str, list[Step]] = {}

    def begin(self, record: EpisodeRecord) -> None:
        if self.store is not None:
            begin_episode(self.store, record)
        self.records[record.id] = record

    def commit(self, episode_id: str, step: Step) -> None:
        if self.store is not None:
            self.store.append_step(episode_id, step)
        self.steps.setdefault(episode_id, []).append(step)
        if self.on_commit is not None:
            self.on_commit(episode_id, step)

    def finish(self, index: int, experience: Experience) -> Experience:
        self.records.pop(experience.id, None)
        self.steps.pop(experience.id, None)
        if self.store is not None and is_finished(self.store, experience.id):
            done = self.store.get_experience(experience.id)
        else:
            # Assessed here, in the single writer, so the stored record carries its evidence.
            assessed = (self.assess(experience) if self.assess else experience).sealed()
            done = self.store.append_experience(assessed) if self.store is not None else assessed
        self.results[index] = done
        return done

    def fail(self, index: int, message: str) -> None:
        self.errors[index] = message

    def job_recorder(self, index: int) -> _WriterRecorder:
        return _WriterRecorder(self, index)

    def retry(self, job: EpisodeJob) -> EpisodeJob:
        """The job again, resumed from what the writer committed (after its worker died)."""
        committed = tuple(self.steps.pop(job.episode_id, ()))
        record = self.records.pop(job.episode_id, None)
        if job.resume:
            return replace(job, history=job.history + committed, attempt=job.attempt + 1)
        if record is None:  # died before its start was recorded: start it afresh
            return replace(job, attempt=job.attempt + 1)
        return replace(job, limits=record.limits, resume=True, history=committed,
                       initial_observation=record.initial_observation, attempt=job.attempt + 1)


@dataclass
class _WriterRecorder:
    """In-process recorder that goes through the writer (workers=0)."""

    writer: Writer
    index: int

    def begin(self, record: EpisodeRecord) -> None:
        self.writer.begin(record)

    def commit(self, episode_id: str, step: Step) -> None:
        self.writer.commit(episode_id, step)

    def finish(self, experience: Experience) -> Experience:
        return self.writer.finish(self.index, experience)


class Backend(Protocol):
    """Runs jobs (with `run_job`); every start, step and end goes through `writer`, in the caller's process."""

    def run(self, jobs: Sequence[EpisodeJob], writer: Writer, factories: Factories) -> None: ...


# --- the local process pool ------------------------------------------------------------------------------


class _PipeRecorder:
    """Worker side: send to the parent and block until it acks (the step is durable then)."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn

    def _call(self, message: tuple[Any, ...]) -> Any:
        self.conn.send(message)
        return self.conn.recv()

    def begin(self, record: EpisodeRecord) -> None:
        self._call(("begin", record.model_dump_json()))

    def commit(self, episode_id: str, step: Step) -> None:
        self._call(("step", episode_id, step.model_dump_json()))

    def finish(self, experience: Experience) -> Experience:
        self.conn.send(("done", experience.model_dump_json()))
        return experience


def _worker(conn: Connection, factories: Factories) -> None:
    recorder = _PipeRecorder(conn)
    try:
        while (message := conn.recv()) is not None:
            try:
                run_job(message, factories, recorder)
            except Exception:  # reported to the parent; the episode stays resumable
                conn.send(("error", traceback.format_exc(limit=8)))
    except (EOFError, BrokenPipeError, KeyboardInterrupt):
        pass  # the parent is gone: nothing of ours can be committed any more


@dataclass
class _Slot:
    process: Any
    conn: Connection
    job: EpisodeJob | None = None


class LocalBackend:
    """A pool of `workers` processes (`workers=0`: run in this process, one episode after another)."""

    def __init__(self, workers: int = 1, *, start_method: str | None = None) -> None:
        # Never plain fork: the parent holds an open SQLite connection, which must not cross a fork.
        # forkserver forks workers from a clean server process that imported lle once (fast starts);
        # spawn where there is no forkserver.
        self.workers = workers
        self.start_method = start_method or ("forkserver" if "forkserver" in mp.get_all_start_methods() else "spawn")

    def run(self, jobs: Sequence[EpisodeJob], writer: Writer, factories: Factories) -> None:
        if self.workers <= 0:
            for job in jobs:
                try:
                    run_job(job, factories, writer.job_recorder(job.index))
                except Exception as err:
                    writer.fail(job.index, f"{type(err).__name__}: {err}")
            return
        ctx: Any = mp.get_context(self.start_method)
        if self.start_method == "forkserver":
            ctx.set_forkserver_preload(["lle.runtime.parallel"])
        queue = deque(jobs)
        slots: list[_Slot] = []

        def start() -> _Slot:
            parent, child = ctx.Pipe()
            process = ctx.Process(target=_worker, args=(child, factories), daemon=True)
            process.start()
            child.close()
            return _Slot(process, parent)

        def dispatch(slot: _Slot) -> None:
            slot.job = queue.popleft() if queue else None
            slot.conn.send(slot.job)

        try:
            for _ in range(min(self.workers, len(queue))):
                slots.append(start())
                dispatch(slots[-1])
            while any(s.job is not None for s in slots):
                busy = {s.conn: s for s in slots if s.job is not None}
                for conn in wait(list(busy)):
                    slot = busy[conn]  # type: ignore[index]
                    try:
                        message = slot.conn.recv()
                    except (EOFError, OSError):
                        slots.remove(slot)
                        self._lost(slot, queue, writer)
                        if queue:
                            slots.append(start())
                            dispatch(slots[-1])
                        continue
                    if self._handle(slot, message, writer):
                        dispatch(slot)
        except BaseException:
            # Interrupted (Ctrl-C, a store error): stop the workers now; what they committed stays
            # committed and their episodes resumable.
            for slot in slots:
                slot.process.terminate()
            raise
        finally:
            for slot in slots:
                with contextlib.suppress(OSError):
                    slot.conn.send(None)
            for slot in slots:
                slot.process.join(timeout=5)
                if slot.process.is_alive():
                    slot.process.kill()

    @staticmethod
    def _handle(slot: _Slot, message: tuple[Any, ...], writer: Writer) -> bool:
        """Act on one worker message; True when the worker is free for the next job."""
        assert slot.job is not None
        kind = message[0]
        if kind == "begin":
            writer.begin(EpisodeRecord.model_validate_json(message[1]))
            slot.conn.send("ack")
        elif kind == "step":
            writer.commit(message[1], Step.model_validate_json(message[2]))
            slot.conn.send("ack")
        elif kind == "done":
            writer.finish(slot.job.index, Experience.model_validate_json(message[1]))
            return True
        else:
            writer.fail(slot.job.index, str(message[1]))
            return True
        return False

    @staticmethod
    def _lost(slot: _Slot, queue: deque[EpisodeJob], writer: Writer) -> None:
        job = slot.job
        assert job is not None
        slot.process.join(timeout=5)
        code = slot.process.exitcode
        if job.attempt < MAX_ATTEMPTS:
            queue.appendleft(writer.retry(job))
        else:
            writer.fail(job.index, f"its worker died (exit code {code}) in attempt {job.attempt}")


# --- the entry point ---------------------------------------------------------------------------------------


def plan_jobs(small_worlds: Sequence[SmallWorld], store: Store | None, batch: str | None, *,
              limits: Limits | None, world_options: Mapping[str, JsonValue], record_timings: bool,
              writer: Writer, levers: LeversFor | None = None) -> list[EpisodeJob]:
    """Jobs for what is left: with a batch, finished episodes are read back and started ones resumed."""
    known = batch_episodes(store, batch) if store is not None and batch is not None else {}
    seen: Counter[str] = Counter()
    jobs = []
    for index, sw in enumerate(small_worlds):
        key = f"{sw.id}#{seen[sw.id]}"  # the same small world twice in a batch gets two keys
        seen[sw.id] += 1
        record = known.get(key)
        base = EpisodeJob(index=index, episode_id=record.id if record else new_id("exp"), small_world=sw,
                          limits=limits, world_options=dict(world_options), batch=batch,
                          batch_key=key if batch else None, record_timings=record_timings,
                          levers=levers(sw) if callable(levers) else levers)
        if record is None:
            jobs.append(base)
        elif store is not None and is_finished(store, record.id):
            writer.results[index] = store.get_experience(record.id)
        else:
            assert store is not None
            jobs.append(replace(base, limits=record.limits, world_options=dict(record.world_options), resume=True,
                                levers=record.levers,
                                history=tuple(store.steps_of(record.id)),
                                initial_observation=record.initial_observation))
    return jobs


def run_many(
    small_worlds: Sequence[SmallWorld],
    policy_factory: PolicyFactory,
    *,
    store: Store | None = None,
    workers: int = 1,
    context_builder_factory: BuilderFactory | None = None,
    skills_factory: SkillsFactory | None = None,
    limits: Limits | None = None,
    world_options: Mapping[str, JsonValue] | None = None,
    batch: str | None = None,
    backend: str | Backend = "local",
    on_commit: OnCommit | None = None,
    record_timings: bool = True,
    assess: Assessor | None = None,
    levers: LeversFor | None = None,
) -> list[Experience]:
    """Run one episode per small world, `workers` at a time; experiences come back in input order.

    `policy_factory(small_world)`, `context_builder_factory()` and `skills_factory(small_world)` (the
    skills offered) run in the workers, so they must be picklable (module-level functions or classes).
    `on_commit(episode_id, step)` runs in this process after each step is durable. `levers` are the
    harness levers of every episode, or a function of its small world (a resumed one keeps those it
    started with). Episodes that could
    not run (world would not build, replay diverged, worker died twice) raise `EpisodeError` after all
    others finished; they stay resumable.
    """
    if batch is not None and store is None:
        raise InvalidInputError("a batch name only makes sense with a store to find it in again; pass store=")
    writer = Writer(store, len(small_worlds), on_commit, assess)
    jobs = plan_jobs(small_worlds, store, batch, limits=limits, world_options=world_options or {},
                     record_timings=record_timings, writer=writer, levers=levers)
    if isinstance(backend, str):
        if backend != "local":
            raise InvalidInputError(f"unknown backend {backend!r}; use 'local' or pass a backend object")
        backend = LocalBackend(workers)
    backend.run(jobs, writer, Factories(policy_factory, context_builder_factory, skills_factory))
    if writer.errors:
        first = min(writer.errors)
        raise EpisodeError(
            f"{len(writer.errors)} of {len(small_worlds)} episodes did not finish; first, {small_worlds[first].id}: "
            f"{writer.errors[first].strip().splitlines()[-1]}; they stay resumable (run again with the same batch, "
            "or `lle episodes resume ID`)"
        )
    return [r for r in writer.results if r is not None]
