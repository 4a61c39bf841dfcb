"""Issue 23's figures: a population against its best explorer alone at equal model-call budgets, and the
fast/slow agent against each of its models alone; prints JSON.

    .venv/bin/python benchmarks/population.py explore examples/populations/arith-trio.toml [--baseline best]
    .venv/bin/python benchmarks/population.py fastslow --tasks 4 [--levers] [--fast smollm2-135m] \
        [--slow qwen2.5-coder-0.5b]

`explore`: the population's round (`lle population run FILE --baseline`): each explorer once on the round's train
small worlds within the file's `budget`, then each explorer alone with as many attempts (other seeds) as the
population has explorers and their summed budget. `fastslow`: held-out dev small worlds of math/arith-v1 level 0,
each played greedily by the fast model alone, the slow model alone, and the fast/slow pair; success and wall time.
The dev episodes go to a scratch store that nothing routes: held-out tasks never feed carriers.
Wrap either in `flock /tmp/lle-model.lock` on a shared machine; times depend on what else runs.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from lle.config import Levers
from lle.context.builder import BudgetedContextBuilder
from lle.core import Limits, Outcome, Split
from lle.evidence import assess_experience
from lle.policies.catalog import make_policy
from lle.population.config import load_population
from lle.population.explore import model_calls
from lle.population.fastslow import FastSlowPolicy, HistoryTap
from lle.population.population import Population
from lle.population.run import run_baseline, run_population
from lle.runtime.harness import run_episode
from lle.store import Store
from lle.worlds.base import open_family


def explore(file: str, out: Path, baseline: str) -> dict[str, Any]:
    config = load_population(file)
    root = out / config.name
    started = time.monotonic()
    with Population(config, root) as pop:
        report = run_population(pop)
    population_s = time.monotonic() - started
    started = time.monotonic()
    # `best`: only the explorer that solved the most in the population's round (a third of the model time).
    only = [report["rounds"][0]["best_single"]["agent"]] if baseline == "best" else None
    alone = run_baseline(config, root, only=only)
    return {"population": report, "population_seconds": round(population_s, 1), "baseline": alone,
            "baseline_seconds": round(time.monotonic() - started, 1)}


def fastslow(tasks: int, fast: str, slow: str, max_steps: int, levers: Levers) -> dict[str, Any]:
    family = open_family("math/arith-v1")
    dev = [family.small_world(Split.dev, seed, level=0) for seed in range(tasks)]
    models = {fast: make_policy(fast, temperature=0.0, seed=0), slow: make_policy(slow, temperature=0.0, seed=0)}
    out: dict[str, Any] = {"tasks": [sw.id for sw in dev], "max_steps": max_steps,
                           "levers": levers.model_dump(mode="json", exclude_defaults=True)}
    with tempfile.TemporaryDirectory() as scratch, Store(Path(scratch) / "scratch.db") as store:
        for arm in (fast, slow, f"{fast}+{slow}"):
            solved, calls, slow_calls, seconds = 0, 0, 0, 0.0
            for sw in dev:
                if arm in models:
                    policy: Any = models[arm]
                    builder: Any = BudgetedContextBuilder()
                else:
                    policy = FastSlowPolicy(models[fast], models[slow])
                    builder = HistoryTap(BudgetedContextBuilder(), policy)
                started = time.monotonic()
                exp = run_episode(sw, policy, builder, store=store, assess=assess_experience,
                                  limits=Limits(max_steps=max_steps, max_seconds=120), levers=levers)
                seconds += time.monotonic() - started
                solved += exp.outcome is Outcome.passed
                n, s = model_calls(exp)
                calls, slow_calls = calls + n, slow_calls + s
            out[arm] = {"solved": solved, "of": len(dev), "seconds": round(seconds, 1), "calls": calls,
                        "slow_share": round(slow_calls / calls, 3) if calls and arm not in models else None}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="what", required=True)
    ex = sub.add_parser("explore")
    ex.add_argument("file")
    ex.add_argument("--out", type=Path, default=Path(tempfile.mkdtemp(prefix="lle-population-")))
    ex.add_argument("--baseline", choices=("all", "best"), default="all",
                    help="run every explorer alone at the population's budget, or only its best one")
    fs = sub.add_parser("fastslow")
    fs.add_argument("--tasks", type=int, default=5)
    fs.add_argument("--fast", default="smollm2-135m")
    fs.add_argument("--slow", default="qwen2.5-coder-0.5b")
    fs.add_argument("--max-steps", type=int, default=4)
    fs.add_argument("--levers", action="store_true",
                    help="stuck notes and submit discipline for every arm (a small model loops without them)")
    args = parser.parse_args()
    if args.what == "explore":
        result = explore(args.file, args.out, args.baseline)
    else:
        chosen = Levers(stuck="note", submit_discipline=True) if args.levers else Levers()
        result = fastslow(args.tasks, args.fast, args.slow, args.max_steps, chosen)
    print(json.dumps(result, indent=2, sort_keys=True))


if __name__ == "__main__":
    main()
