"""Store ingest and read speed on both backends, side by side: prints JSON.

Appends N experiences of 20 steps each (one transaction each) to a fresh store, then reads random
ones back by id: SQLite in a temp folder (WAL, synchronous=FULL) and PostgreSQL (a throwaway
local server with fsync on, over its unix socket, unless --store-url names one: then a fresh
database is not made, so pass an empty one).

    .venv/bin/python benchmarks/store_ingest.py [--count 500] [--reads 500] [--backends sqlite,postgres]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import statistics
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from lle.core import (
    ActionRequest,
    Change,
    Effect,
    ExecutedAction,
    Experience,
    PolicyInfo,
    SmallWorld,
    Split,
    Step,
)
from lle.store import Store
from lle.store.pg_server import TempServer


def experience(i: int, n_steps: int) -> Experience:
    sw = SmallWorld(id=f"bench/ingest-v1:train:{i}", world="bench/ingest-v1", family="bench", project="p",
                    split=Split.train, seed=i, goal=f"task {i}: fix the failing test in module_{i % 17}.py")
    steps = [
        Step(index=s,
             request=ActionRequest(tool="read_file", args={"path": f"src/m{s}.py"}, thought=f"look at file {s}",
                                   expect="the source"),
             executed=ExecutedAction(tool="read_file", args={"path": f"src/m{s}.py"}, allowed=True, duration_ms=0.4),
             effect=Effect(observation=f"def f{s}(x):\n    return x + {s}\n" * 8,
                           changes=[Change(kind="file", target=f"src/m{s}.py", before="sha256:a", after="sha256:b")]))
        for s in range(n_steps)
    ]
    return Experience(small_world=sw, policy=PolicyInfo(model="bench"), steps=steps)


def percentile(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1]


@contextlib.contextmanager
def locations(backends: list[str], store_url: str | None) -> Iterator[dict[str, str]]:
    """backend -> the location of a fresh store (a temp file; a throwaway server's new database)."""
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
        found = {}
        if "sqlite" in backends:
            found["sqlite"] = str(Path(tmp) / "lle.db")
        if "postgres" in backends:
            found["postgres"] = store_url or stack.enter_context(TempServer(fast=False)).new_database()
        yield found


def run(location: str, batch: list[Experience], reads: int) -> dict[str, Any]:
    with Store(location) as db:
        start = time.perf_counter()
        for exp in batch:
            db.append_experience(exp)
        elapsed = time.perf_counter() - start
        rng = random.Random(0)
        latencies = []
        for _ in range(reads):
            id_ = rng.choice(batch).id
            t0 = time.perf_counter()
            db.get_experience(id_)
            latencies.append((time.perf_counter() - t0) * 1000)
        n_steps = len(batch[0].steps)
        return {
            "durability": db.durability(),
            "append_experiences_per_s": round(len(batch) / elapsed, 1),
            "append_steps_per_s": round(len(batch) * n_steps / elapsed, 1),
            "read_p50_ms": round(percentile(latencies, 50), 3),
            "read_p95_ms": round(percentile(latencies, 95), 3),
            "db_bytes": db.storage_bytes(),
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--count", type=int, default=500)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--reads", type=int, default=500)
    parser.add_argument("--backends", default="sqlite,postgres")
    parser.add_argument("--store-url", help="an empty PostgreSQL database to use instead of a throwaway server")
    args = parser.parse_args()
    batch = [experience(i, args.steps) for i in range(args.count)]
    report: dict[str, Any] = {"benchmark": "store_ingest", "experiences": args.count,
                              "steps_per_experience": args.steps, "backends": {}}
    with locations(args.backends.split(","), args.store_url) as found:
        for backend, location in found.items():
            report["backends"][backend] = run(location, batch, args.reads)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
