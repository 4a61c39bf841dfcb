"""Store ingest and read speed: prints JSON.

Appends N experiences of 20 steps each (one transaction each, WAL, synchronous=FULL) to a fresh
store in a temp folder, then reads random ones back by id.

    .venv/bin/python benchmarks/store_ingest.py [--count 500] [--reads 500]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import tempfile
import time
from pathlib import Path

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--count", type=int, default=500)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--reads", type=int, default=500)
    args = parser.parse_args()
    batch = [experience(i, args.steps) for i in range(args.count)]
    with tempfile.TemporaryDirectory() as tmp, Store(Path(tmp) / "lle.db") as db:
        start = time.perf_counter()
        for exp in batch:
            db.append_experience(exp)
        elapsed = time.perf_counter() - start
        rng = random.Random(0)
        latencies = []
        for _ in range(args.reads):
            id_ = rng.choice(batch).id
            t0 = time.perf_counter()
            db.get_experience(id_)
            latencies.append((time.perf_counter() - t0) * 1000)
        size = sum(p.stat().st_size for p in Path(tmp).glob("lle.db*"))
        synchronous = db.conn.execute("PRAGMA synchronous").fetchone()[0]
    print(json.dumps({
        "benchmark": "store_ingest",
        "experiences": args.count,
        "steps_per_experience": args.steps,
        "synchronous": {2: "FULL"}.get(int(synchronous), synchronous),
        "append_experiences_per_s": round(args.count / elapsed, 1),
        "append_steps_per_s": round(args.count * args.steps / elapsed, 1),
        "read_p50_ms": round(percentile(latencies, 50), 3),
        "read_p95_ms": round(percentile(latencies, 95), 3),
        "db_bytes": size,
    }, indent=2))


if __name__ == "__main__":
    main()
