"""Issue 23's figures: a population against its best explorer alone at equal model-call budgets, and the
fast/slow agent against each of its models alone; prints JSON.

    .venv/bin/python benchmarks/population.py explore examples/populations/arith-trio.toml [--baseline best]
    .venv/bin/python benchmarks/population.py fastslow --tasks 4 [--levers] [--fast smollm2-135m] \
        [--slow qwen2.5-coder-0.5b]
    .venv/bin/python benchmarks/population.py import examples/populations/math-finder.toml [--tasks 48]

`explore`: the population's round (`lle population run FILE --baseline`): each explorer once on the round's train
small worlds within the file's `budget`, then each explorer alone with as many attempts (other seeds) as the
population has explorers and their summed budget. `fastslow`: held-out dev small worlds of math/arith-v1 level 0,
each played greedily by the fast model alone, the slow model alone, and the fast/slow pair; success and wall time.
`import`: the population's round (`lle population run FILE`), then the acting agent (`actor`) on held-out dev small
worlds of the file's worlds, greedy, under its own levers, once without skills and once offered the skills it
imported from another agent (active in its store after its own replay gate): paired, task by task.
The dev episodes go to a scratch store that nothing routes: held-out tasks never feed carriers.
Wrap either in `flock /tmp/lle-model.lock` on a shared machine; times depend on what else runs.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from lle.carriers.skills import SkillState, used_skills
from lle.config import Levers
from lle.context.builder import BudgetedContextBuilder
from lle.core import Experience, Limits, Outcome, Split
from lle.evidence import assess_experience
from lle.flywheel.strategies import SkillsOffer
from lle.flywheel.verdict import paired_verdict
from lle.policies.catalog import make_policy
from lle.population.config import load_population
from lle.population.explore import model_calls
from lle.population.fastslow import FastSlowPolicy, HistoryTap
from lle.population.population import Population
from lle.population.run import run_baseline, run_population
from lle.runtime.harness import run_episode
from lle.runtime.parallel import run_many
from lle.store import Store
from lle.store import messages as message_rows
from lle.worlds.base import cut, open_family


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


def imported(file: str, out: Path, tasks: int) -> dict[str, Any]:
    config = load_population(file)
    actor = config.acting
    started = time.monotonic()
    with Population(config, out / config.name) as pop:
        report = run_population(pop)
        copies = {r.item_id for r in message_rows.copies(pop.store) if r.agent == actor.name}
        skills = [s for s in pop.library(actor.name).skills() if s.item_id in copies]
        active = tuple(s.item_id for s in skills if s.state is SkillState.active)
        # One llama.cpp thread per worker: the held-out arms run two workers on the machine's cores.
        threads = max(1, (os.cpu_count() or 2) // 2)
        db_path, factory = str(pop.db_path(actor.name)), pop.policy_factory(actor.name, threads=threads)
    population_s = time.monotonic() - started
    families = [open_family(w) for w in config.worlds]
    dev = [cut(families[i % len(families)], Split.dev, i // len(families), level=config.level) for i in range(tasks)]
    dev = [sw.model_copy(update={"limits": sw.limits.model_copy(update={"max_steps": config.max_steps})}) for sw in dev]
    arms: dict[str, list[Experience]] = {}
    seconds: dict[str, float] = {}
    # Held-out episodes go to a scratch store that nothing routes; the skills are read from the actor's store.
    with tempfile.TemporaryDirectory() as scratch, Store(Path(scratch) / "held-out.db") as store:
        for arm, offer in (("without", SkillsOffer(db_path, only=())), ("with_imported", SkillsOffer(db_path, active))):
            started = time.monotonic()
            arms[arm] = run_many(dev, factory, store=store, workers=2, skills_factory=offer, levers=actor.levers,
                                 assess=assess_experience, record_timings=False, batch=f"held-out/{arm}")
            seconds[arm] = round(time.monotonic() - started, 1)
    pairs = [(w.outcome is Outcome.passed, wo.outcome is Outcome.passed)
             for w, wo in zip(arms["with_imported"], arms["without"], strict=True)]
    verdict = paired_verdict(f"{actor.name} with imported skills", f"{actor.name} alone", pairs)
    return {"population": report, "population_seconds": round(population_s, 1), "actor": actor.name,
            "imported": [{"name": s.name, "item_id": s.item_id, "state": s.state.value,
                          "description": s.descriptor.description} for s in skills],
            "held_out": [sw.id for sw in dev], "seconds": seconds,
            "used_imported": sum(bool(set(used_skills(e)) & set(active)) for e in arms["with_imported"]),
            "verdict": verdict.row()}


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
    im = sub.add_parser("import")
    im.add_argument("file")
    im.add_argument("--tasks", type=int, default=48, help="held-out dev small worlds, the file's worlds in turn")
    im.add_argument("--out", type=Path, default=Path(tempfile.mkdtemp(prefix="lle-population-")))
    args = parser.parse_args()
    if args.what == "explore":
        result = explore(args.file, args.out, args.baseline)
    elif args.what == "import":
        result = imported(args.file, args.out, args.tasks)
    else:
        chosen = Levers(stuck="note", submit_discipline=True) if args.levers else Levers()
        result = fastslow(args.tasks, args.fast, args.slow, args.max_steps, chosen)
    print(json.dumps(result, indent=2, sort_keys=True))


if __name__ == "__main__":
    main()
