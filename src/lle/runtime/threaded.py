"""Episodes in threads of this process, for policies that share one in-process model (batched decoding).

`LocalBackend` isolates episodes in processes, each with its own model. A `BatchedDecoder`
(`lle.policies.batched`) needs the opposite: all episodes in one process, so their steps reach one
decoder thread that evaluates them together. `ThreadBackend(threads)` runs that many episodes at once,
each in its own thread; the model's native code releases the GIL, so the threads overlap world steps
and context building with decoding.

The single-writer guarantee holds as in the process pool: episode threads never touch the store. Each
start, step and end is handed to the thread that called `run_many` and the episode waits for the ack,
so every step is committed (by that one thread, on its one connection) before the next begins.
"""

from __future__ import annotations

import queue
import threading
import traceback
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from lle.core import Experience, Step
from lle.errors import EpisodeError
from lle.runtime.parallel import EpisodeJob, Factories, Writer, run_job
from lle.store.episodes import EpisodeRecord


@dataclass
class _Message:
    kind: str  # begin | step | done | error | exit
    index: int
    payload: Any = None
    reply: threading.Event = field(default_factory=threading.Event)
    answer: Any = None
    failure: BaseException | None = None


class _AbortedError(EpisodeError):
    """The run was interrupted (an error in the writer thread); what was committed stays committed."""


class _ThreadRecorder:
    """Episode-thread side: hand each record to the writer thread and block until it is committed."""

    def __init__(self, inbox: queue.Queue[_Message], index: int) -> None:
        self.inbox = inbox
        self.index = index

    def _call(self, kind: str, payload: Any) -> Any:
        message = _Message(kind, self.index, payload)
        self.inbox.put(message)
        message.reply.wait()
        if message.failure is not None:
            raise _AbortedError(f"the run stopped: {message.failure}") from message.failure
        return message.answer

    def begin(self, record: EpisodeRecord) -> None:
        self._call("begin", record)

    def commit(self, episode_id: str, step: Step) -> None:
        self._call("step", (episode_id, step))

    def finish(self, experience: Experience) -> Experience:
        done: Experience = self._call("done", experience)
        return done


class ThreadBackend:
    """`threads` episodes at a time in threads of this process; the calling thread is the one writer.

    The episodes share one model, so each waits for the others' tokens: a step takes about `threads` times
    as long in wall-clock time as it would alone. The wall-clock cap (`Limits.max_seconds`) only stops a
    runaway and must never decide an outcome, so each new episode's cap is multiplied by the episodes
    decoded together (a resumed one keeps the limits it recorded)."""

    def __init__(self, threads: int = 2) -> None:
        self.threads = max(1, threads)

    def run(self, jobs: Sequence[EpisodeJob], writer: Writer, factories: Factories) -> None:
        inbox: queue.Queue[_Message] = queue.Queue()
        sharing = min(self.threads, len(jobs))
        todo = deque(shared_time_cap(job, sharing) for job in jobs)
        lock = threading.Lock()

        def worker() -> None:
            while True:
                with lock:
                    if not todo:
                        break
                    job = todo.popleft()
                try:
                    run_job(job, factories, _ThreadRecorder(inbox, job.index))
                except _AbortedError:
                    break
                except Exception:  # reported to the writer; the episode stays resumable
                    inbox.put(_Message("error", job.index, traceback.format_exc(limit=8)))
            inbox.put(_Message("exit", -1))

        workers = [threading.Thread(target=worker, name=f"lle-episode-{i}", daemon=True)
                   for i in range(min(self.threads, len(jobs)))]
        for thread in workers:
            thread.start()
        running = len(workers)
        failure: BaseException | None = None
        while running:
            message = inbox.get()
            if message.kind == "exit":
                running -= 1
                continue
            if failure is not None:  # interrupted: release the episode threads, commit nothing more
                message.failure = failure
                message.reply.set()
                continue
            try:
                self._handle(message, writer)
            except BaseException as err:  # a store error, Ctrl-C: stop handing out jobs, then re-raise
                failure = err
                with lock:
                    todo.clear()
                message.failure = err
            message.reply.set()
        for thread in workers:
            thread.join()
        if failure is not None:
            raise failure

    @staticmethod
    def _handle(message: _Message, writer: Writer) -> None:
        if message.kind == "begin":
            writer.begin(message.payload)
        elif message.kind == "step":
            writer.commit(*message.payload)
        elif message.kind == "done":
            message.answer = writer.finish(message.index, message.payload)
        else:
            writer.fail(message.index, str(message.payload))


def shared_time_cap(job: EpisodeJob, sharing: int) -> EpisodeJob:
    """`job` with its wall-clock cap multiplied by the `sharing` episodes decoded together with it."""
    if job.resume or sharing <= 1:
        return job
    limits = job.limits or job.small_world.limits
    return replace(job, limits=limits.model_copy(update={"max_seconds": limits.max_seconds * sharing}))
