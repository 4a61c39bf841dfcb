"""The weights step of an `lle` round (`RunConfig.weights_min_rows`): expert iteration behind the weights gate.

After a round's evaluation, when the strategy's dataset holds at least `weights_min_rows` more sft rows than
the last adapter was trained on, a snapshot is exported and a LoRA adapter trained on it (`lle.train`); the
candidate and the policy served now then play the same dev small worlds, *apart from the evaluation's* (the
verdict's tasks never choose the adapter), and the weights gate decides on the paired difference. An active
adapter is served to every later `lle` batch (`Flywheel.served_adapter`). Each step is resumable: the
adapter trained is recorded before its replays (`replays/rN-weights.json`), the replays are batches, and
the gate decides once.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from lle.carriers.dataset import Dataset
from lle.carriers.exports import export
from lle.carriers.weights import HeldOutVerdict, WeightsCarrier
from lle.config import RunConfig
from lle.core import Experience, Outcome, SmallWorld, Split
from lle.errors import InvalidInputError
from lle.flywheel import suite
from lle.flywheel.verdict import paired_verdict
from lle.store import Store
from lle.store import flywheel as flywheel_store


class Flywheel(Protocol):
    """What the weights step uses of `lle.flywheel.loop.Flywheel` (which imports this module)."""

    config: RunConfig
    suite: suite.Suite
    folder: Path
    eval_worlds: list[SmallWorld]

    def chosen(self, name: str, pick: Callable[[], list[str]]) -> list[str]: ...

    def phase(self, strategy: str, db_path: Path, label: str, small_worlds: list[SmallWorld], skills: Any = None,
              levers: Any = None, attempt: int = 0, adapter: tuple[str, str] | None = None) -> list[Experience]: ...


def gate_worlds(fw: Flywheel) -> list[SmallWorld]:
    """Dev small worlds for the gate: the ones drawn right after the evaluation's (disjoint from them)."""
    n = fw.config.eval_tasks
    try:
        drawn = suite.draw(fw.suite, Split.dev, 2 * n, seed=fw.config.seed, round_=0, max_steps=fw.config.max_steps)
    except InvalidInputError:  # a small suite: what is left beyond the evaluation's tasks
        drawn = []
    evaluated = {w.id for w in fw.eval_worlds}
    return [w for w in drawn if w.id not in evaluated]


def train_candidate(fw: Flywheel, db_path: Path) -> list[str]:
    """Export and train when the dataset grew enough; the new candidate's id, or nothing."""
    from lle.policies.catalog import locate
    from lle.train.sft import SftConfig, train_sft

    min_rows = fw.config.weights_min_rows or 0
    with Store(db_path) as db:
        carrier = WeightsCarrier(db, actor=f"flywheel:{fw.config.id}")
        trained_on = max((a.card.rows for a in carrier.adapters()), default=0)
        snap = export(Dataset(db), "sft", fw.folder / "exports")
        if snap.n_rows - trained_on < min_rows:
            return []
        folder = fw.folder / "adapters" / snap.id
        card = train_sft(Path(snap.path), locate(fw.config.model), folder, base_model=fw.config.model,
                         snapshot_id=snap.id, config=SftConfig(steps=fw.config.weights_steps, seed=fw.config.seed))
        return [carrier.propose(card, folder).id]


def validate(fw: Flywheel, db_path: Path, round_: int) -> None:
    """Train a candidate if the dataset grew enough, replay it against the served policy, let the gate decide."""
    ids = fw.chosen(f"r{round_}-weights", lambda: train_candidate(fw, db_path))
    worlds = gate_worlds(fw)
    for item_id in ids:
        with Store(db_path) as db:
            adapter = WeightsCarrier(db).get(item_id)
        if adapter.state not in ("candidate", "approved") or not worlds:
            continue  # decided before a kill, or no dev task is left for a gate apart from the verdict's
        label = f"r{round_}/weights/{item_id[-8:]}"
        current = fw.phase("lle", db_path, f"{label}/served", worlds)
        candidate = fw.phase("lle", db_path, f"{label}/candidate", worlds, adapter=(str(adapter.path), item_id))
        by_family: dict[str, list[tuple[bool, bool]]] = defaultdict(list)
        for c, s in zip(candidate, current, strict=True):
            by_family[c.small_world.family].append((c.outcome is Outcome.passed, s.outcome is Outcome.passed))
        verdict = paired_verdict("adapter", "served", [p for pairs in by_family.values() for p in pairs])
        regressed = [f for f, pairs in sorted(by_family.items()) if paired_verdict(f, "served", pairs).ci95[1] < 0]
        low, high = verdict.ci95
        with Store(db_path) as db:
            WeightsCarrier(db, actor=f"flywheel:{fw.config.id}").decide(
                item_id, HeldOutVerdict(pairs=verdict.n, difference=verdict.difference / 100, low=low / 100,
                                        high=high / 100, regressed=regressed))


def adapter_rounds(folder: Path, db: Store, run_id: str) -> list[dict[str, Any]]:
    """Per round that trained an adapter: the adapter, its state now, its gate replay (candidate against the
    policy served then, solved of paired dev tasks) and the gate's reasons, for the report."""
    carrier = WeightsCarrier(db)
    known = {a.id: a for a in carrier.adapters()}
    decided = {u.item_id: u for u in db.list_updates(limit=10_000_000, carrier="weights")
               if u.gate is not None and u.gate.name == "weights_heldout"}
    out: list[dict[str, Any]] = []
    chosen = {int(p.name[1:].split("-")[0]): p for p in (folder / "replays").glob("r*-weights.json")}
    for round_, path in sorted(chosen.items()):
        for item_id in json.loads(path.read_text(encoding="utf-8")):
            adapter = known.get(str(item_id))
            if adapter is None:
                continue
            solved = {"served": 0, "candidate": 0}
            for batch, _, _, outcome, _ in flywheel_store.batch_results(
                    db, f"{run_id}/lle/r{round_}/weights/{adapter.id[-8:]}/"):
                arm = batch.rsplit("/", 1)[-1]
                solved[arm] = solved.get(arm, 0) + (outcome == "pass")
            gate = decided.get(adapter.id)
            out.append({"round": round_, "adapter": adapter.id, "state": adapter.state,
                        "method": adapter.card.method, "rows": adapter.card.train_rows, "steps": adapter.card.steps,
                        "candidate_solved": solved["candidate"], "served_solved": solved["served"],
                        "gate": "; ".join(gate.gate.reasons) if gate and gate.gate else "not decided"})
    return out
