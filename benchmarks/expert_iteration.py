"""Expert iteration (or GRPO) on the default model: does a LoRA trained on its own verified experience help?

    .venv/bin/python benchmarks/expert_iteration.py [--model smollm2-135m] [--suite examples/suites/math-easy.toml]
        [--train-tasks 32] [--group 4] [--eval 48] [--steps 40] [--levers all] [--workers 2] [--out FOLDER]
        [--method sft|grpo]

1. Explore (train split only): each train small world of the suite is played `--group` times, greedy once
   and sampled at temperature 0.8 with its own seeds; every episode is verified by the worlds' anchors.
2. The dataset carrier admits the verified successes (its gate: hard evidence, scrubbed, deduplicated,
   uncontaminated); an `sft` snapshot is exported, every row with the prompt the model saw byte for byte.
3. `lle.train.sft` trains a LoRA adapter on it (early stop on a holdout of train tasks); CPU time measured.
   With `--method grpo` the failures are admitted too, an `rl` snapshot holds the groups, and `lle.train.grpo`
   trains on the groups whose attempts both passed and failed. A rerun with the same `--out` reads the
   explored episodes and the base's evaluation back (they are resumable batches) instead of playing them again.
4. Paired held-out verdict: the base and the adapter, both greedy, on the same dev small worlds (the ones the
   flywheel draws for this suite); the weights gate then decides the candidate in the run's store.

Prints JSON. Model-heavy phases take `/tmp/lle-model.lock` (flock) one at a time, so other measurements on
the same machine do not overlap them.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import platform
import resource
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from lle.carriers.dataset import Dataset
from lle.carriers.exports import export
from lle.carriers.weights import HeldOutVerdict, WeightsCarrier
from lle.cli.episodes import parse_levers
from lle.config import RunConfig
from lle.core import Experience, Outcome, SmallWorld, Split
from lle.evidence import assess_experience
from lle.flywheel import suite as suites
from lle.flywheel.loop import model_path
from lle.flywheel.strategies import SpecPolicyFactory, StrategyBuilderFactory
from lle.flywheel.verdict import paired_verdict
from lle.policies.catalog import locate
from lle.runtime.parallel import run_many
from lle.store import Store
from lle.train.grpo import GrpoConfig, train_grpo
from lle.train.sft import SftConfig, train_sft

LOCK = Path("/tmp/lle-model.lock")


@contextlib.contextmanager
def model_lock() -> Iterator[None]:
    with LOCK.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def play(worlds: list[SmallWorld], factory: SpecPolicyFactory, store: Store, config: RunConfig, batch: str,
         workers: int) -> list[Experience]:
    with model_lock():
        return run_many(worlds, factory, store=store, workers=workers, batch=batch, assess=assess_experience,
                        levers=config.levers, record_timings=False,
                        context_builder_factory=StrategyBuilderFactory("none", "", model_path(config)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--suite", default="examples/suites/math-easy.toml")
    parser.add_argument("--train-tasks", type=int, default=32)
    parser.add_argument("--group", type=int, default=4)
    parser.add_argument("--eval", type=int, default=48)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--levers", default="all", help="The harness levers of every episode (as `lle run --levers`).")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--out", type=Path, default=None, help="Keep the store and adapter here.")
    parser.add_argument("--method", choices=("sft", "grpo"), default="sft")
    args = parser.parse_args()
    folder = args.out or Path(tempfile.mkdtemp(prefix="lle-ei-"))
    folder.mkdir(parents=True, exist_ok=True)
    config = RunConfig(model=args.model, suite=args.suite, levers=parse_levers(args.levers))
    suite = suites.load_suite(args.suite)
    threads = max(1, (os.cpu_count() or 2) // args.workers)
    train = suites.draw(suite, Split.train, args.train_tasks, seed=0, round_=0, max_steps=suite.max_steps)
    dev = suites.draw(suite, Split.dev, args.eval, seed=config.seed, round_=0, max_steps=suite.max_steps)
    report: dict[str, Any] = {"benchmark": "expert_iteration", "model": args.model, "suite": args.suite,
                              "machine": {"cpus": os.cpu_count(), "python": sys.version.split()[0],
                                          "platform": platform.platform()}}
    with Store(folder / "lle.db") as store:
        started = time.perf_counter()
        explored: list[Experience] = []
        for attempt in range(args.group):
            factory = SpecPolicyFactory(args.model, threads=threads, seed=1000 * attempt,
                                        temperature=0.8 if attempt else 0.0)
            explored += play(train, factory, store, config, f"explore/{attempt}", args.workers)
        solved = {e.small_world.id for e in explored if e.outcome is Outcome.passed}
        report["explore"] = {"episodes": len(explored), "passed": sum(e.outcome is Outcome.passed for e in explored),
                             "tasks": len(train), "tasks_solved": len(solved),
                             "wall_s": round(time.perf_counter() - started, 1)}
        dataset = Dataset(store, actor="benchmark")
        grpo = args.method == "grpo"
        admitted = sum(dataset.admit(e).op.value == "admit" for e in explored if grpo or e.outcome is Outcome.passed)
        snap = export(dataset, "rl" if grpo else "sft", folder / "exports")
        report["dataset"] = {"admitted": admitted, "snapshot": snap.id, "rows": snap.n_rows, "skipped": snap.skipped}
        if snap.n_rows == 0:
            report["verdict"] = "no verified success to train on"
            print(json.dumps(report, indent=2))
            return
        cpu0 = resource.getrusage(resource.RUSAGE_SELF)
        threads_all = os.cpu_count() or 2
        with model_lock():
            if grpo:
                card = train_grpo(Path(snap.path), store, locate(args.model), folder / "adapter-grpo",
                                  base_model=args.model, snapshot_id=snap.id,
                                  config=GrpoConfig(steps=args.steps, threads=threads_all))
            else:
                card = train_sft(Path(snap.path), locate(args.model), folder / "adapter", base_model=args.model,
                                 snapshot_id=snap.id, config=SftConfig(steps=args.steps, threads=threads_all))
        cpu1 = resource.getrusage(resource.RUSAGE_SELF)
        carrier = WeightsCarrier(store, actor="benchmark")
        adapter = carrier.propose(card, folder / ("adapter-grpo" if grpo else "adapter"))
        report["training"] = {"rows": card.rows, "exact_rows": card.exact_rows, "train_rows": card.train_rows,
                              "holdout_rows": card.holdout_rows, "steps": card.steps, "best_step": card.best_step,
                              "method": card.method, "groups": card.groups, "beta": card.beta,
                              "kl_last": card.kl[-1] if card.kl else None,
                              "first_loss": card.losses[0], "last_loss": card.losses[-1],
                              "holdout_losses": card.holdout_losses, "wall_s": card.wall_seconds,
                              "cpu_s": round(cpu1.ru_utime + cpu1.ru_stime - cpu0.ru_utime - cpu0.ru_stime, 1)}
        base = play(dev, SpecPolicyFactory(args.model, threads=threads), store, config, "eval/base", args.workers)
        tuned = play(dev, SpecPolicyFactory(args.model, threads=threads, adapter=str(adapter.path),
                                            adapter_id=adapter.id), store, config, f"eval/adapter-{args.method}",
                     args.workers)
        pairs = [(t.outcome is Outcome.passed, b.outcome is Outcome.passed) for t, b in zip(tuned, base, strict=True)]
        verdict = paired_verdict("adapter", "base", pairs)
        low, high = verdict.ci95
        update = carrier.decide(adapter.id, HeldOutVerdict(pairs=verdict.n, difference=verdict.difference / 100,
                                                           low=low / 100, high=high / 100))
        report["held_out"] = {**verdict.row(), "gate": update.op.value, "gate_reasons": update.gate.reasons
                              if update.gate else []}
    report["folder"] = str(folder)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
