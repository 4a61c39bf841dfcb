"""Rollout throughput: episodes/s for the process pool and Ray at 1, 2 and 4 workers; prints JSON.

The toy world (keys family) with the oracle policy (no model), so the figure is the runtime's own
cost per episode: the world, the harness, the recorder and the commits. Each run writes to a fresh
SQLite store (the pool through its single writer in this process, Ray's workers directly); with
--store postgres each run writes to a new database on a throwaway local PostgreSQL server (fsync
on), or on the server --store-url names. Ray runs on a
local cluster started once (num_cpus = the most workers asked for); its start-up is reported apart,
and each executor is warmed up once before the timed runs.

    .venv/bin/python benchmarks/rollouts.py [--episodes 48] [--workers 1,2,4] [--store sqlite|postgres]
        [--store-url postgresql://…]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from lle.core import Split
from lle.runtime.parallel import Backend, LocalBackend, run_many
from lle.runtime.ray_executor import RayBackend, init_local
from lle.store import Store
from lle.store.pg_server import TempServer
from lle.worlds.toy import KeysFamily, oracle_policy


def timed_run(backend: Backend, episodes: int, location: str) -> dict[str, Any]:
    worlds = KeysFamily().small_worlds(Split.train, episodes)
    with Store(location) as store:
        start = time.perf_counter()
        done = run_many(worlds, oracle_policy, store=store, backend=backend, record_timings=False)
        elapsed = time.perf_counter() - start
        steps = store.count("steps")
    assert len(done) == episodes and steps == sum(len(e.steps) for e in done)
    return {"episodes_per_s": round(episodes / elapsed, 1), "steps_per_s": round(steps / elapsed, 1),
            "seconds": round(elapsed, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=48)
    parser.add_argument("--workers", default="1,2,4")
    parser.add_argument("--store", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--store-url", help="a PostgreSQL server: each run writes to a new database on it")
    args = parser.parse_args()
    counts = [int(w) for w in args.workers.split(",")]
    report: dict[str, Any] = {"benchmark": "rollouts", "world": "toy/keys (oracle policy)",
                              "episodes": args.episodes, "cpus": os.cpu_count(),
                              "store": "postgres" if args.store_url else args.store, "executors": {}}
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
        runs = iter(range(1000))
        server_url = args.store_url
        if args.store == "postgres" and not server_url:
            server_url = stack.enter_context(TempServer(fast=False)).url()

        def fresh() -> str:
            if server_url:
                return TempServer.database_on(server_url)
            return str(Path(tmp) / f"r{next(runs)}.db")

        import ray

        start = time.perf_counter()
        init_local(max(counts))
        report["ray_start_s"] = round(time.perf_counter() - start, 2)
        backends: dict[str, Any] = {"process_pool": LocalBackend, "ray": RayBackend}
        for name, make in backends.items():
            timed_run(make(max(counts)), max(counts) * 2, fresh())  # warm-up: imports, Ray's worker pool
            report["executors"][name] = {str(n): timed_run(make(n), args.episodes, fresh()) for n in counts}
        ray.shutdown()
    report["loadavg"] = [round(x, 2) for x in os.getloadavg()]
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
