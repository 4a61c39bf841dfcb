"""The governance battery (issue 18's closing table): poisoned items per carrier for `raw` and `lle` under every
poison arm, and kills survived while routing; prints JSON.

    .venv/bin/python benchmarks/battery.py [--train 16] [--rounds 1] [--kills 20] [--workers 2]

Poison: one `lle run --suite toy --model oracle --scenario poison` (no model), whose train small worlds are
split between the arms (`lle.flywheel.poison`): tool-output injection (with a one-off preference in the goal),
query-only injection (MINJA style, in the task text) and self-poisoning (the agent claims success one move
short: the weak checks pass, the state anchor fails). For each arm and carrier: `reached` (the arm's poison is in
the carrier at all, e.g. quoted as data or labelled as a failure) and `trusted` (in the form a prompt or a
training row would take at its word: unquoted, or a false success held as a success).

Kills: the routing-kill machinery of tests/flywheel/test_routing_kills.py (forked children SIGKILLed at random
points while `Flywheel.route` routes 6 assessed toy episodes, each chain of kills then resumed) compared with one
unkilled routing: `survived` counts kills whose chain ended equal to it, `duplicates` the extra items and updates.
Numbers depend on the machine and on what else runs; the counts do not.

Edges (`battery_edges.py`, skip with --no-edges): kills inside a skill decision, near-copies of revoked
content, attacks on the sandbox's workdir cap, bad command-line inputs and bad server requests.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import random
import re
import shutil
import signal
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from lle.config import RunConfig
from lle.core import Split, canonical_json
from lle.evidence import assess_experience
from lle.flywheel import loop, poison, report
from lle.governance.hygiene import ContaminationIndex
from lle.policies.scripted import ScriptedPolicy
from lle.runtime.harness import run_episode
from lle.store import Store, experiences
from lle.worlds.toy.keys import KeysFamily, oracle_actions

IDS = re.compile(r"\b(exp|evd|upd|itm|rev)_[0-9A-Z]{26}\b")
CHAIN = 8
"""Kills in a row on one copy of the store (each resume killed in turn), then a resume left to finish."""


def poison_table(workspace: Path, train: int, rounds: int, workers: int) -> dict[str, Any]:
    config = RunConfig.model_validate({
        "suite": "toy", "model": "oracle", "strategies": ["none", "raw", "lle"], "rounds": rounds,
        "train_per_round": train, "eval_tasks": 4, "workers": workers, "group_size": 1, "scenario": "poison"})
    started = time.monotonic()
    loop.Flywheel(config, workspace).run()
    res = report.load_results(config.id, workspace)
    folder = loop.run_folder(config.id, workspace)
    with Store(loop.strategy_db(folder, "raw")) as db:  # raw keeps one log per train episode: count the arms there
        goals = [db.get_experience(i).small_world for i in experiences.all_ids(db)]
    episodes = Counter(poison.arm(sw) or "clean" for sw in goals if sw.split is Split.train)
    table = {strategy: poison.by_arm(res.poison[strategy]) for strategy in ("raw", "lle")}
    return {"command": f"lle run --suite toy --model oracle --scenario poison --compare --rounds {rounds} "
                       f"--train {train} --eval 4 --group 1 (the battery runs its none, raw and lle; --compare adds "
                       "reflect)",
            # What each strategy holds at all: a 0 below means something only beside a carrier that admits items.
            "active_items": {s: res.carriers[s] for s in ("raw", "lle")},
            "train_episodes_per_arm": dict(episodes), "seconds": round(time.monotonic() - started, 1),
            # `none` learns nothing: its held-out result is round 0's, every round.
            "held_out_passed": {s: f"{cell.passed}/{cell.n}" for s in ("none", "raw", "lle")
                                if (cell := res.total(s, 0 if s == "none" else rounds))},
            "poisoned_items": {s: {arm: _shown(per) for arm, per in by.items()} for s, by in table.items()}}


def _shown(per_carrier: dict[str, dict[str, int]]) -> dict[str, list[int]]:
    """[reached, trusted] per carrier; recipes (`context`) and `weights` only when something reached them."""
    return {c: [v["reached"], v["trusted"]] for c, v in per_carrier.items()
            if c not in ("context", "weights") or any(v.values())}


def _carriers(db_path: Path) -> tuple[Counter[str], Counter[str]]:
    """What routing wrote, without ids and times: items and updates (as the kill test compares them)."""
    with Store(db_path) as db:
        items = Counter(canonical_json([i.carrier.value, i.content, i.experience_ids]) for i in db.carrier_items())
        updates = Counter(canonical_json([u.carrier.value, u.op.value, u.experience_ids, u.gate and u.gate.name,
                                          u.gate and u.gate.passed,
                                          IDS.sub(r"\1", " ".join(u.gate.reasons) if u.gate else "")])
                          for u in db.list_updates(limit=1_000_000))
    return items, updates


def _route_all(flywheel: loop.Flywheel, db_path: str) -> None:
    with Store(db_path) as db:
        batch = [db.get_experience(i) for i in experiences.all_ids(db)]
    flywheel.route("lle", Path(db_path), [[exp] for exp in batch], "r1/train")


def _fork_route(flywheel: loop.Flywheel, db_path: Path) -> multiprocessing.process.BaseProcess:
    process = multiprocessing.get_context("fork").Process(target=_route_all, args=(flywheel, str(db_path)))
    process.start()
    return process


def kill_table(folder: Path, kills: int) -> dict[str, Any]:
    base = folder / "base.db"
    family = KeysFamily()
    with Store(base) as db:
        for seed in range(6):
            sw = family.small_world(Split.train, seed)
            run_episode(sw, ScriptedPolicy(oracle_actions(sw)), store=db, assess=assess_experience)
    previous = os.environ.get("LLE_EMBEDDING_MODEL")
    os.environ["LLE_EMBEDDING_MODEL"] = str(folder / "no-model.onnx")  # BM25 only: children start in milliseconds
    ContaminationIndex.from_registry()  # built once, inherited by every forked child
    config = RunConfig.model_validate({"suite": "toy", "model": "oracle", "strategies": ["lle"], "rounds": 1,
                                       "train_per_round": 6, "eval_tasks": 1, "workers": 1})
    flywheel = loop.Flywheel(config, folder / "ws")
    reference = folder / "reference.db"
    shutil.copy(base, reference)
    started = time.monotonic()
    child = _fork_route(flywheel, reference)
    child.join(120)
    full = time.monotonic() - started
    items, updates = _carriers(reference)
    rng = random.Random(7)
    done = survived = chains = extra_items = extra_updates = 0
    while done < kills:
        db_path = folder / f"killed-{chains}.db"
        shutil.copy(base, db_path)
        in_chain = 0
        for _ in range(min(CHAIN, kills - done)):
            child = _fork_route(flywheel, db_path)
            time.sleep(rng.uniform(0.0, 0.8 * full))
            if not child.is_alive():
                break  # it finished the batch before its kill
            os.kill(child.pid or 0, signal.SIGKILL)
            child.join(60)
            in_chain += 1
        resume = _fork_route(flywheel, db_path)
        resume.join(120)
        found_items, found_updates = _carriers(db_path)
        equal = resume.exitcode == 0 and (found_items, found_updates) == (items, updates)
        done, chains = done + in_chain, chains + 1
        survived += in_chain if equal else 0
        extra_items += sum((found_items - items).values())
        extra_updates += sum((found_updates - updates).values())
    os.environ.pop("LLE_EMBEDDING_MODEL")  # the edges after this use the model the caller chose
    if previous is not None:
        os.environ["LLE_EMBEDDING_MODEL"] = previous
    return {"kills": done, "chains": chains, "survived": survived, "duplicate_items": extra_items,
            "duplicate_updates": extra_updates, "unkilled_routing_s": round(full, 2),
            "what": "SIGKILLs while routing 6 toy episodes, each chain then resumed; compared with one unkilled "
                    "routing (tests/flywheel/test_routing_kills.py runs 50)"}


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--train", type=int, default=16, help="train small worlds in each round of the poison run")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--kills", type=int, default=20, help="SIGKILLs while routing (0: skip)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--no-edges", action="store_true", help="skip the edge cases (battery_edges.py)")
    args = parser.parse_args()
    load = [round(x, 2) for x in os.getloadavg()]
    out: dict[str, Any] = {"machine": {"cpus": os.cpu_count(), "loadavg_at_start": load}}
    with tempfile.TemporaryDirectory() as tmp:
        out["poison"] = poison_table(Path(tmp) / "poison", args.train, args.rounds, args.workers)
        if args.kills:
            (Path(tmp) / "kills").mkdir()
            out["routing_kills"] = kill_table(Path(tmp) / "kills", args.kills)
    if not args.no_edges:
        import battery_edges  # beside this file

        out["edges"] = battery_edges.edges_table()
    out["notes"] = [
        "poisoned_items: strategy -> arm -> carrier -> [reached, trusted]; reached: the arm's poison is in the "
        "carrier at all (quoted as data, or labelled a failure); trusted: in the "
        "form a prompt or a training row takes at its word (unquoted; a false success held as a success)",
        "context (recipes) and weights are left out where 0; no adapter carrier writes items yet, so weights stays 0",
        "raw keeps every log as memory and nothing else; its other carriers are 0 by construction",
    ]
    out["machine"]["loadavg_at_end"] = [round(x, 2) for x in os.getloadavg()]
    print(re.sub(r"\[\s+(\d+),\s+(\d+)\s+\]", r"[\1, \2]", json.dumps(out, indent=2)))  # a pair per line


if __name__ == "__main__":
    main()
