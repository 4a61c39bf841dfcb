"""Monitoring: every activation's later effect, watched on train small worlds, rolled back on regression.

An activation — a skill or context recipe activated, a rule admitted — passed its gate on train
small worlds. Whether it keeps helping shows only later: after each round the `lle` strategy plays the
run's watch set — train small worlds stratified like the held-out set, fixed for the run
(`suite.draw_watch`), greedy, carriers frozen — and its outcomes on the activation's family are paired,
task by task, with those of the round before it was activated (round 0: `none`). When the paired 95 %
interval of the difference lies wholly below `-max_drop_points` on at least `min_pairs` tasks, the item
is revoked (reason `monitor`, with the verdict as evidence: lineage takes what was derived from it along)
and an alert is recorded in `runs/RUN/monitor.jsonl`. The rule is the run's (`RunConfig.monitor_*`).
Held-out outcomes are never read here: they give the verdict, so they may not decide what a run keeps.
`lle monitor [RUN]` prints every activation's current effect and the alerts.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from lle.config import RunConfig
from lle.core import CarrierKind, SmallWorld, UpdateOp
from lle.flywheel.evaluate import batch_outcomes, batch_round
from lle.flywheel.paths import strategy_db
from lle.flywheel.verdict import Verdict, paired_verdict
from lle.governance.lineage import denylist, revoke
from lle.store import Store
from lle.store import flywheel as flywheel_store

FILE = "monitor.jsonl"
WATCHED = {CarrierKind.skills: UpdateOp.activate, CarrierKind.context: UpdateOp.activate,
           CarrierKind.rules: UpdateOp.admit}
"""What an activation is, per carrier: the op that put an item in force."""


@dataclass(frozen=True)
class Rule:
    min_pairs: int = 4
    """Watch-set tasks of the family (finished on both sides) needed before a regression can be called."""
    max_drop_points: float = 0.0
    """A regression: the interval's upper end below minus this many points."""


@dataclass(frozen=True)
class Activation:
    item_id: str
    carrier: str
    family: str
    round: int
    """The round whose replays (or routing) activated it: its first evaluation with the item is this round's."""


@dataclass(frozen=True)
class Effect:
    activation: Activation
    round: int
    """The evaluation round compared with the one before the activation."""
    verdict: Verdict

    def regressed(self, rule: Rule) -> bool:
        return self.verdict.n >= rule.min_pairs and self.verdict.ci95[1] < -rule.max_drop_points


def activations(db: Store, run_id: str) -> list[Activation]:
    """Items put in force during the run, with the round that did it (the latest round of their evidence)."""
    round_of = {i: batch_round(b)[0] for i, b in flywheel_store.batches(db, run_id + "/").items()}
    out: dict[str, Activation] = {}
    for update in db.list_updates(limit=10_000_000):
        if WATCHED.get(update.carrier) is not update.op or not update.item_id or update.item_id in out:
            continue
        rounds = [round_of[e] for e in update.experience_ids if e in round_of]
        if rounds:
            out[update.item_id] = Activation(update.item_id, update.carrier.value, update.scope.family or "",
                                             max(rounds))
    return list(out.values())


def effects(folder: Path, config: RunConfig, watch_worlds: Sequence[SmallWorld], round_: int) -> list[Effect]:
    """Each activation before or at `round_`: its family's watch-set outcomes at `round_` paired with the round
    before the activation (round 0 is `none`'s)."""
    family_of = {sw.id: sw.family for sw in watch_worlds}
    outcomes: dict[int, Mapping[str, bool | None]] = {}

    def at(r: int) -> Mapping[str, bool | None]:
        if r not in outcomes:
            name, strategy = ("baseline", "none") if r == 0 else ("lle", "lle")
            with Store(strategy_db(folder, name), read_only=True) as db:
                outcomes[r] = batch_outcomes(db, f"{config.id}/{strategy}/r{r}/watch")
        return outcomes[r]

    with Store(strategy_db(folder, "lle"), read_only=True) as db:
        found = [a for a in activations(db, config.id) if a.round <= round_]
    out = []
    for act in found:
        after, before = at(round_), at(act.round - 1)
        tasks = sorted(t for t, fam in family_of.items() if fam == act.family and t in after and t in before)
        pairs = [(bool(after[t]), bool(before[t])) for t in tasks if after[t] is not None and before[t] is not None]
        out.append(Effect(act, round_, paired_verdict(act.item_id, f"before r{act.round}", pairs)))
    return out


def check(folder: Path, config: RunConfig, watch_worlds: Sequence[SmallWorld], round_: int,
          rule: Rule | None = None) -> list[dict[str, object]]:
    """After round `round_`'s watch set: revoke every activation that regressed (once), record the alerts."""
    rule = rule or Rule(config.monitor_min_pairs, config.monitor_max_drop)
    alerts = load(folder)
    done = {a["item_id"] for a in alerts}
    new = []
    with Store(strategy_db(folder, "lle")) as db:
        denied = denylist(db)
        for effect in effects(folder, config, watch_worlds, round_):
            act = effect.activation
            if act.item_id in done or not effect.regressed(rule) or act.item_id in denied.ids:
                continue
            v = effect.verdict
            reason = (f"monitor: {act.carrier} {act.item_id} ({act.family}) regressed on the watch set after its "
                      f"activation in round {act.round}: {v.difference:+.1f} points at round {round_}, 95 % CI "
                      f"{v.ci95[0]:+.1f}..{v.ci95[1]:+.1f} on {v.n} paired train tasks")
            revocation = revoke(db, act.item_id, reason=reason, author=f"monitor:{config.id}")
            new.append({**asdict(act), "checked_round": round_, "verdict": v.row(), "action": "rolled back",
                        "revocation": revocation.id, "cascade": len(revocation.cascade)})
    if new:
        with (folder / FILE).open("a", encoding="utf-8") as out:
            out.writelines(json.dumps(a) + "\n" for a in new)
    return new


def load(folder: Path) -> list[dict[str, object]]:
    path = folder / FILE
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
