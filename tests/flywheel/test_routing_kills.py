"""Routing is exactly once: SIGKILLs at random points while a process routes a batch, each followed by
a resume, leave the carriers exactly as one unkilled routing of the same experiences does.

Routing an experience writes memory, rule, skill and dataset rows and then its `routed` marker; a
kill between them used to leave the writes without the marker, so the resume routed it again (a
duplicate memory item, duplicate updates). Memory runs BM25-only here (no embedding model in the
children): the kills are about transactions, and each child then starts in milliseconds.
"""

from __future__ import annotations

import multiprocessing
import os
import random
import re
import shutil
import signal
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from lle.config import RunConfig
from lle.core import Split, canonical_json
from lle.evidence import assess_experience
from lle.flywheel.loop import Flywheel
from lle.governance.hygiene import ContaminationIndex
from lle.policies.scripted import ScriptedPolicy
from lle.runtime.harness import run_episode
from lle.store import Store
from lle.worlds.toy.keys import KeysFamily, oracle_actions

sys.path.insert(0, str(Path(__file__).resolve().parent))
from routing_child import route_all

KILLS = 50
CHAIN = 8
"""Kills in a row on one copy of the store (each resume killed in turn), then a resume left to finish."""
IDS = re.compile(r"\b(exp|evd|upd|itm|rev)_[0-9A-Z]{26}\b")


def carriers(db_path: Path) -> tuple[Counter[str], Counter[str], int, int]:
    """What routing wrote, without ids and times: items, updates, utility rows, routed marks."""
    with Store(db_path) as db:
        items = Counter(canonical_json([i.carrier.value, i.content, i.experience_ids]) for i in db.carrier_items())
        updates = Counter(canonical_json([u.carrier.value, u.op.value, u.experience_ids, u.gate and u.gate.name,
                                          u.gate and u.gate.passed, IDS.sub(r"\1", " ".join(u.gate.reasons) if u.gate
                                                                             else "")])
                          for u in db.list_updates(limit=1_000_000))
        return items, updates, db.count("updates"), len(db.experiences_decided("memory"))


def fork_route(flywheel: Flywheel, db_path: Path) -> multiprocessing.process.BaseProcess:
    process = multiprocessing.get_context("fork").Process(target=route_all, args=(flywheel, str(db_path)))
    process.start()
    return process


@pytest.fixture(scope="module")
def batch(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Flywheel]]:
    """A store of 6 assessed toy episodes (real world, real verifiers), none routed yet."""
    folder = tmp_path_factory.mktemp("routing")
    base = folder / "base.db"
    family = KeysFamily()
    with Store(base) as db:
        for seed in range(6):
            sw = family.small_world(Split.train, seed)
            run_episode(sw, ScriptedPolicy(oracle_actions(sw)), store=db, assess=assess_experience)
    before = os.environ.get("LLE_EMBEDDING_MODEL")
    os.environ["LLE_EMBEDDING_MODEL"] = str(folder / "no-model.onnx")  # BM25 only, in every child
    ContaminationIndex.from_registry()  # built once here, inherited by every forked child
    config = RunConfig.model_validate({"suite": "toy", "model": "oracle", "strategies": ["lle"], "rounds": 1,
                                       "train_per_round": 6, "eval_tasks": 1, "workers": 1})
    yield base, Flywheel(config, folder / "ws")
    # The tests after this module (the memory carrier's, on both store backends) need the real embeddings.
    if before is None:
        os.environ.pop("LLE_EMBEDDING_MODEL", None)
    else:
        os.environ["LLE_EMBEDDING_MODEL"] = before


@pytest.mark.slow
def test_routing_survives_kills_at_random_points_exactly_once(batch: tuple[Path, Flywheel], tmp_path: Path) -> None:
    base, flywheel = batch
    reference = tmp_path / "reference.db"
    shutil.copy(base, reference)
    started = time.monotonic()
    child = fork_route(flywheel, reference)
    child.join(120)
    full = time.monotonic() - started
    assert child.exitcode == 0
    expected = carriers(reference)
    assert expected[0] and expected[3] == 6, "the batch reached memory (and the other carriers)"

    rng = random.Random(7)
    kills = chains = 0
    while kills < KILLS:
        db_path = tmp_path / f"killed-{chains}.db"
        shutil.copy(base, db_path)
        for _ in range(CHAIN):  # each kill is followed by a resume, itself killed in turn
            child = fork_route(flywheel, db_path)
            time.sleep(rng.uniform(0.0, 0.8 * full))
            if not child.is_alive():
                break  # it finished the batch before its kill
            os.kill(child.pid or 0, signal.SIGKILL)
            child.join(60)
            kills += 1
        resume = fork_route(flywheel, db_path)
        resume.join(120)
        assert resume.exitcode == 0
        found = carriers(db_path)
        assert found[0] == expected[0], f"chain {chains}: carrier items differ from an unkilled routing " \
                                        f"(extra: {list((found[0] - expected[0]).elements())[:2]})"
        assert found[1] == expected[1], f"chain {chains}: updates differ (extra: " \
                                        f"{list((found[1] - expected[1]).elements())[:2]})"
        assert found[2:] == expected[2:]
        chains += 1
    print(f"\n{kills} SIGKILLs in {chains} chains, batch routed in {full:.2f} s unkilled: carriers equal every time")
