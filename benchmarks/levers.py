"""Harness levers on train small worlds: success, tokens and seconds per step, each lever off and on; prints JSON.

    .venv/bin/python benchmarks/levers.py [--models smollm2-135m,qwen2.5-coder-0.5b] [--per-family 40]
        [--configs off,stuck,submit,memory,masks,all] [--steps 6] [--workers 2] [--slots N] [--suite starter]
        [--store FILE.db]

Every configuration runs the same train small worlds of every world of the suite (train split only:
this is a tuning measurement, never a verdict), greedy, with the budgeted context builder and the
model's own tokenizer, as the flywheel does. Success is the world's own verdict on the terminal step.
Configurations: `off` (no lever), one lever at a time (`stuck` = note then mask, `submit` = budget
shown and the last step submit-only, `memory` = working memory, `masks` = admissible-command enums),
and `all` together. Numbers depend on the machine and on what else runs.

Every step is committed to `--store` (default `.lle/benchmarks/levers.db`), each configuration a batch of its own,
so a killed measurement run again with the same arguments reads back its finished episodes, resumes started ones
and plays only the rest: the full table (some 2,000 episodes) can span several sittings. Seconds per step are the
recorded model and world time of the steps (`seconds_per_step`), so resumed parts count alike; `wall_s` is this
sitting's. `--slots N` decodes N episodes together in one model (docs/32; greedy actions equal the pool's, about
twice the episodes an hour here); its batches are named apart, since its seconds per step are not the pool's.

A store does not outlive its machine, so each finished (model, configuration) is also written to `--results`
(default `benchmarks/results/levers/`, kept with the code): a later sitting, on this machine or another, skips
what is there and prints the whole table, those measured before included (each says when and at which commit).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from lle.config import Levers, RunConfig
from lle.core import Experience, Split
from lle.flywheel import suite as suites
from lle.flywheel.loop import model_path
from lle.flywheel.strategies import BatchedPolicyFactory, SpecPolicyFactory, StrategyBuilderFactory
from lle.runtime.parallel import Backend, PolicyFactory, run_many
from lle.runtime.threaded import ThreadBackend
from lle.store import Store

CONFIGS = {
    "off": Levers(),
    "stuck": Levers(stuck="mask"),
    "submit": Levers(submit_discipline=True),
    "memory": Levers(working_memory=True),
    "masks": Levers(admissible_masks=True),
    "all": Levers(stuck="mask", submit_discipline=True, working_memory=True, admissible_masks=True, skills_first=True),
}


def solved(exp: Experience) -> bool:
    for step in exp.steps:
        for fb in step.feedback:
            info = fb.content.get("info") if fb.kind == "reward" and isinstance(fb.content, dict) else None
            if isinstance(info, dict) and info.get("success") is True:
                return True
    return False


def stopped_by(exp: Experience) -> str:
    for fb in exp.steps[-1].feedback if exp.steps else []:
        if fb.kind == "stop" and isinstance(fb.content, dict):
            return str(fb.content.get("reason"))
    return "?"


def measure(model: str, levers: Levers, worlds: list[Any], workers: int, store: Store, batch: str,
            decoder: Any = None) -> dict[str, Any]:
    """One configuration on `worlds`: a process pool of `workers`, or threads around `decoder` (batched)."""
    path = model_path(RunConfig(model=model))
    factory: PolicyFactory = SpecPolicyFactory(model, threads=max(1, (os.cpu_count() or 2) // workers))
    backend: Backend | str = "local"
    if decoder is not None:
        factory, backend = BatchedPolicyFactory(decoder), ThreadBackend(decoder.slots)
    started = time.perf_counter()
    exps = run_many(worlds, factory, workers=workers, context_builder_factory=StrategyBuilderFactory("none", "", path),
                    levers=levers, store=store, batch=batch, backend=backend)
    seconds = time.perf_counter() - started
    steps = [s for e in exps for s in e.steps]
    step_ms = [(s.llm.latency_ms if s.llm else 0.0) + s.executed.duration_ms for s in steps]
    calls = [s.llm for s in steps if s.llm is not None]
    by_world: dict[str, list[bool]] = {}
    for exp in exps:
        by_world.setdefault(exp.small_world.world, []).append(solved(exp))
    stops: dict[str, int] = {}
    for exp in exps:
        stops[stopped_by(exp)] = stops.get(stopped_by(exp), 0) + 1
    return {
        "solved": sum(solved(e) for e in exps), "episodes": len(exps),
        "by_world": {w: f"{sum(v)}/{len(v)}" for w, v in sorted(by_world.items())},
        "stops": dict(sorted(stops.items())),
        "steps": len(steps),
        "prompt_tokens_per_step": round(statistics.fmean(c.prompt_tokens for c in calls), 1) if calls else None,
        "completion_tokens_per_step": round(statistics.fmean(c.completion_tokens for c in calls), 1) if calls else None,
        "seconds_per_step": round(statistics.fmean(step_ms) / 1000, 2) if step_ms else None,
        "wall_s": round(seconds, 1),
    }


def commit() -> str | None:
    """The code's commit, so a saved result says what it measured."""
    found = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False)
    return found.stdout.strip() or None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default="smollm2-135m,qwen2.5-coder-0.5b")
    parser.add_argument("--per-family", type=int, default=40,
                        help="train small worlds per task family of the suite, spread over its worlds in turn")
    parser.add_argument("--configs", default=",".join(CONFIGS))
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--slots", type=int, default=0,
                        help="decode N episodes together in one model (batched); 0: a process pool of --workers")
    parser.add_argument("--suite", default="starter")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--store", default=".lle/benchmarks/levers.db",
                        help="where every step is committed; run again with the same arguments to continue")
    parser.add_argument("--results", default="benchmarks/results/levers",
                        help="a folder of finished (model, configuration) results: those there are not measured again")
    args = parser.parse_args()
    unknown = sorted(set(args.configs.split(",")) - set(CONFIGS))
    if unknown:
        parser.error(f"--configs: unknown {', '.join(unknown)}; choose from {','.join(CONFIGS)}")
    suite = suites.get_suite(args.suite)
    n = args.per_family * len({suites.family(world).family for world in suite.worlds})
    worlds = suites.draw(suite, Split.train, n, seed=args.seed, round_=0, max_steps=args.steps)
    out: dict[str, Any] = {"suite": suite.name, "per_family": args.per_family, "steps": args.steps,
                           "machine": f"{platform.machine()} {os.cpu_count()} cpus", "load_avg": os.getloadavg()[0],
                           "results": {}}
    Path(args.store).parent.mkdir(parents=True, exist_ok=True)
    store = Store(args.store)
    for model in args.models.split(","):
        with contextlib.ExitStack() as stack:
            decoder = None  # loaded on the first configuration to measure: none may be left
            for name in args.configs.split(","):
                batch = f"levers/{model}/{name}/{args.suite}/s{args.steps}/n{args.per_family}/seed{args.seed}"
                batch += f"/slots{args.slots}" if args.slots else ""
                saved = Path(args.results) / (batch.removeprefix("levers/").replace("/", "-") + ".json")
                if saved.exists():  # measured in an earlier sitting (perhaps on another machine)
                    out["results"].setdefault(model, {})[name] = json.loads(saved.read_text(encoding="utf-8"))
                    continue
                if decoder is None and args.slots:
                    from lle.policies.batched import BatchedDecoder

                    decoder = stack.enter_context(BatchedDecoder.from_spec(model, slots=args.slots))
                result = measure(model, CONFIGS[name], worlds, args.workers, store, batch, decoder)
                result |= {"measured": time.strftime("%Y-%m-%d", time.gmtime()), "commit": commit(),
                           "machine": out["machine"]}
                saved.parent.mkdir(parents=True, exist_ok=True)
                saved.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
                out["results"].setdefault(model, {})[name] = result
                print(f"{model} {name}: {result['solved']}/{result['episodes']} {result['by_world']}",
                      file=sys.stderr, flush=True)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
