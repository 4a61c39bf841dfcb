"""Runtime (Γ) speed: prints JSON.

1. Harness overhead per step, excluding the policy's and the world's own time: context building,
   grounding (schema check, permissions, state diff), step construction and recording. Measured on
   the toy world with its solving script, with no store and with a real store in a temp folder
   (one WAL transaction with synchronous=FULL per step, i.e. one fsync per step).
2. Sandbox start-up: wall time of `Sandbox(...).run(["true"])` (null with the reason when the
   sandbox module or bubblewrap is not there).
3. Parallel speed-up of `run_many` with 1 and 2 workers on a world-bound load (the toy world with
   an artificial CPU cost per step), with a store and one writer.

    .venv/bin/python benchmarks/harness_overhead.py [--episodes 150] [--step-cost-ms 20] [--parallel-episodes 32]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from lle.context import BudgetedContextBuilder
from lle.core import ActionRequest, Context, Experience, LLMCall, SmallWorld, Split, Step, WorldStep, new_id
from lle.core import ContextBuilder as ContextBuilderProtocol
from lle.policies import ScriptedPolicy
from lle.runtime.harness import Episode
from lle.runtime.parallel import run_many
from lle.runtime.recorder import NullRecorder, Recorder, StoreRecorder
from lle.store import Store
from lle.store.episodes import EpisodeRecord
from lle.worlds.toy import KeysFamily, KeysWorld, oracle_actions, oracle_policy


class Clock:
    """Where the time of one episode went."""

    def __init__(self) -> None:
        self.marks: list[float] = []  # end of begin, then end of each commit
        self.policy: list[float] = []
        self.world: list[float] = []


class TimedPolicy:
    def __init__(self, inner: ScriptedPolicy, clock: Clock) -> None:
        self.inner, self.clock, self.info = inner, clock, inner.info

    def act(self, context: Context) -> tuple[ActionRequest, LLMCall | None]:
        started = time.perf_counter()
        try:
            return self.inner.act(context)
        finally:
            self.clock.policy.append(time.perf_counter() - started)


class TimedWorld(KeysWorld):
    clock: Clock

    def step(self, action: ActionRequest) -> WorldStep:
        started = time.perf_counter()
        try:
            return super().step(action)
        finally:
            self.clock.world.append(time.perf_counter() - started)


class TimedRecorder:
    def __init__(self, inner: Recorder, clock: Clock) -> None:
        self.inner, self.clock = inner, clock

    def begin(self, record: EpisodeRecord) -> None:
        self.inner.begin(record)
        self.clock.marks.append(time.perf_counter())

    def commit(self, episode_id: str, step: Step) -> None:
        self.inner.commit(episode_id, step)
        self.clock.marks.append(time.perf_counter())

    def finish(self, experience: Experience) -> Experience:
        return self.inner.finish(experience)


def percentile(values: list[float], q: int) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1]


def overhead(worlds: list[SmallWorld], store: Store | None, builder: type[ContextBuilderProtocol] | None) -> dict[
        str, Any]:
    per_step: list[float] = []
    for sw in worlds:
        clock = Clock()
        world = TimedWorld(sw.project, seed=sw.seed)
        world.clock = clock
        inner: Recorder = StoreRecorder(store) if store is not None else NullRecorder()
        Episode(sw, TimedPolicy(ScriptedPolicy(oracle_actions(sw)), clock), builder() if builder else None,
                recorder=TimedRecorder(inner, clock), world=world).run()
        for k in range(len(clock.policy)):
            interval = clock.marks[k + 1] - clock.marks[k]
            per_step.append((interval - clock.policy[k] - clock.world[k]) * 1000)
    return {"steps": len(per_step), "median_ms": round(statistics.median(per_step), 4),
            "p95_ms": round(percentile(per_step, 95), 4), "mean_ms": round(statistics.fmean(per_step), 4)}


def sandbox_startup(runs: int = 10) -> dict[str, Any]:
    try:
        from lle.sandbox import Sandbox, SandboxLimits
    except ImportError as err:
        return {"median_ms": None, "reason": f"lle.sandbox is not importable: {err}"}
    try:
        sandbox = Sandbox(SandboxLimits())
        times, sandboxed = [], False
        with tempfile.TemporaryDirectory(prefix="lle-bench-sandbox-") as folder:
            for _ in range(runs):
                started = time.perf_counter()
                result = sandbox.run(["true"], workdir=Path(folder))
                times.append((time.perf_counter() - started) * 1000)
                sandboxed = result.sandboxed
                if result.returncode != 0:
                    return {"median_ms": None, "reason": f"`true` exited {result.returncode}: {result.stderr[:200]}"}
    except Exception as err:  # a benchmark reports why it could not measure, it does not crash
        return {"median_ms": None, "reason": f"{type(err).__name__}: {err}"}
    return {"median_ms": round(statistics.median(times), 2), "p95_ms": round(percentile(times, 95), 2),
            "runs": runs, "sandboxed": sandboxed}


def commit_cost(store: Store, n: int = 200) -> dict[str, Any]:
    """`Store.append_step` alone (one fsync'd transaction): the floor under `with_store_commits`."""
    sw = KeysFamily().small_world(Split.train, 0)
    step = Episode(sw, ScriptedPolicy(oracle_actions(sw))).run().steps[1]
    times = []
    for _ in range(n):
        started = time.perf_counter()
        store.append_step(new_id("exp"), step)
        times.append((time.perf_counter() - started) * 1000)
    return {"commits": n, "median_ms": round(statistics.median(times), 4), "p95_ms": round(percentile(times, 95), 4)}


def speedup(n: int, step_cost_ms: float, folder: Path, repeats: int = 2) -> dict[str, Any]:
    worlds = KeysFamily().small_worlds(Split.train, n)
    # Start the worker machinery (the forkserver imports lle once) before any timing.
    run_many(worlds[:2], oracle_policy, workers=2)
    seconds: dict[int, float] = {}
    steps = 0
    for workers in (1, 2):
        for r in range(repeats):  # the best of a few: other load on the machine only ever adds time
            with Store(folder / f"parallel-{workers}-{r}.db") as store:
                started = time.perf_counter()
                done = run_many(worlds, oracle_policy, store=store, workers=workers,
                                world_options={"step_cost_ms": step_cost_ms})
                elapsed = time.perf_counter() - started
            seconds[workers] = min(seconds.get(workers, elapsed), elapsed)
            steps = sum(len(e.steps) for e in done)
    return {"episodes": n, "steps": steps, "step_cost_ms": step_cost_ms, "cpus": os.cpu_count(),
            "seconds_1_worker": round(seconds[1], 3), "seconds_2_workers": round(seconds[2], 3),
            "speedup_2_workers": round(seconds[1] / seconds[2], 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=150)
    parser.add_argument("--step-cost-ms", type=float, default=20.0)
    parser.add_argument("--parallel-episodes", type=int, default=32)
    args = parser.parse_args()
    worlds = KeysFamily().small_worlds(Split.train, args.episodes)
    overhead(worlds[:10], None, None)  # warm-up: imports, schema compilation, caches
    with tempfile.TemporaryDirectory(prefix="lle-bench-harness-") as tmp:
        folder = Path(tmp)
        with Store(folder / "lle.db") as store:
            with_store = overhead(worlds, store, None)
            commits = commit_cost(store)
        report = {
            "harness_overhead_per_step": {
                "without_store": overhead(worlds, None, None),
                "with_store_commits": with_store,
                "store_append_step_alone": commits,
                "without_store_budgeted_context": overhead(worlds, None, BudgetedContextBuilder),
                "note": "excludes policy.act and world.step; includes context building, grounding (schema, "
                        "permissions, state snapshot and diff), recording; with_store adds one fsync'd "
                        "transaction per step",
                "goal_ms": 1.0,
            },
            "sandbox_startup": sandbox_startup(),
            "parallel": speedup(args.parallel_episodes, args.step_cost_ms, folder),
        }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
