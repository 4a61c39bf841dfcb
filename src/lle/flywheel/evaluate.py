"""Held-out results of a run, read back from its stores (nothing here is kept anywhere else).

Success is the share of dev small worlds whose experience has outcome `pass` (verified by the
worlds' own anchors); `unknown` counts as not solved. Intervals are Wilson score intervals (95 %).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lle.config import RunConfig
from lle.core import CarrierKind, Revocation, UpdateOp
from lle.flywheel import extractor
from lle.flywheel.paths import strategy_db
from lle.flywheel.strategies import GOVERNED
from lle.flywheel.verdict import Verdict, paired_verdict, wilson
from lle.governance.lineage import active_items
from lle.store import Store
from lle.store import flywheel as flywheel_store


@dataclass
class Cell:
    """Episodes of one (strategy, round, world, phase)."""

    n: int = 0
    passed: int = 0
    steps_solved: int = 0
    tokens_solved: int = 0
    time_capped: int = 0
    """Episodes stopped by the wall-clock safety cap: not in `n` (no outcome of the agent), counted apart."""

    @property
    def rate(self) -> float:
        return self.passed / self.n if self.n else 0.0


@dataclass
class RunResults:
    config: RunConfig
    eval: dict[tuple[str, int, str], Cell] = field(default_factory=dict)
    train: dict[tuple[str, int, str], Cell] = field(default_factory=dict)
    carriers: dict[str, dict[str, int]] = field(default_factory=dict)
    gates: dict[str, Counter[str]] = field(default_factory=dict)
    revoked: dict[str, int] = field(default_factory=dict)
    revocations: dict[str, list[Revocation]] = field(default_factory=dict)
    growth: dict[str, dict[int, dict[str, int]]] = field(default_factory=dict)
    """Per strategy and round: carrier items admitted (skills: activated) up to the end of that round."""
    poison: dict[str, dict[str, int]] = field(default_factory=dict)
    adapters: list[dict[str, Any]] = field(default_factory=list)
    """`lle` only: per round that trained a LoRA adapter, its gate replay and decision (`weights.adapter_rounds`)."""
    skills: dict[str, list[dict[str, object]]] = field(default_factory=dict)
    """Governed strategies only: each skill that was active, with its measured use (`skill_rows`)."""
    extractor: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    """`lle` and `lle-self`: the extractor's cost per round (`lle.flywheel.extractor`), when it had one."""

    def worlds(self) -> list[str]:
        return sorted({w for (_, _, w) in self.eval})

    def total(self, strategy: str, round_: int) -> Cell:
        out = Cell()
        for (s, r, _), cell in self.eval.items():
            if (s, r) == (strategy, round_):
                out.n += cell.n
                out.passed += cell.passed
                out.steps_solved += cell.steps_solved
                out.tokens_solved += cell.tokens_solved
                out.time_capped += cell.time_capped
        return out

    def last_round(self, strategy: str) -> int:
        """The round `strategy`'s results are read at (`shown_round`; `none` stays at round 0)."""
        if strategy == "none":
            return 0
        finished: Counter[int] = Counter()
        for (s, r, _), cell in self.eval.items():
            if s == strategy and r > 0:
                finished[r] += cell.n + cell.time_capped
        return shown_round(finished, self.config.rounds)

    def curve(self, strategy: str) -> list[tuple[int, Cell]]:
        """Held-out totals per round; round 0 is the shared baseline, `none` stays there."""
        rounds = [0] if strategy == "none" else list(range(0, self.config.rounds + 1))
        return [(r, self.total("none" if r == 0 else strategy, r)) for r in rounds]


def shown_round(finished: Mapping[int, int], rounds: int) -> int:
    """The round a strategy's held-out results are read at, from its finished evaluation episodes per round:
    the run's last round; for a run cut short, the latest round with the most finished (an evaluation stopped
    partway does not replace a whole one before it)."""
    return max(finished, key=lambda r: (finished[r], r)) if finished else rounds


def batch_round(batch: str) -> tuple[int, str]:
    """(round, phase) of a batch label `RUN/STRATEGY/rN/PHASE[/…]` (phase: train, eval, watch, skill, recipe or
    weights; a group's exploring attempts are `rN/train/aK`)."""
    round_text, phase = batch.split("/")[2:4]
    return int(round_text.lstrip("r")), phase


def _cells(db: Store, prefix: str) -> dict[tuple[int, str, str], Cell]:
    cells: dict[tuple[int, str, str], Cell] = defaultdict(Cell)
    for batch, exp_id, world, outcome, n_steps in flywheel_store.batch_results(db, prefix):
        round_, phase = batch_round(batch)
        if phase in ("skill", "recipe", "weights", "watch"):
            continue  # an A/B replay (skill, recipe, adapter), counted by its gate decision; the monitor's watch set
        cell = cells[(round_, phase, world)]
        if outcome != "pass" and time_capped(db, exp_id):
            cell.time_capped += 1  # the machine was slow, not the agent wrong: reported apart, never a failure
            continue
        cell.n += 1
        if outcome == "pass":
            cell.passed += 1
            cell.steps_solved += n_steps
            exp = db.get_experience(exp_id)
            cell.tokens_solved += sum((s.llm.prompt_tokens + s.llm.completion_tokens) for s in exp.steps if s.llm)
    return cells


def _growth(db: Store, config: RunConfig) -> dict[int, dict[str, int]]:
    """Cumulative admissions per round, each update placed in the round of the episodes it came from."""
    round_of = {i: batch_round(b)[0] for i, b in flywheel_store.batches(db, config.id + "/").items()}
    per_round: dict[int, Counter[str]] = defaultdict(Counter)
    for update in db.list_updates(limit=10_000_000):
        counts = update.op is (UpdateOp.activate if update.carrier is CarrierKind.skills else UpdateOp.admit)
        rounds = [round_of[e] for e in update.experience_ids if e in round_of]
        if counts and rounds:
            per_round[max(rounds)][update.carrier.value] += 1
    out: dict[int, dict[str, int]] = {}
    total: Counter[str] = Counter()
    for round_ in range(config.rounds + 1):
        total += per_round.get(round_, Counter())
        out[round_] = dict(total)
    return out


def results(folder: Path, config: RunConfig) -> RunResults:
    out = RunResults(config)
    from lle.flywheel.poison import poisoned_items

    for strategy, db_name in [("none", "baseline"), *[(s, s) for s in config.strategies if s != "none"]]:
        path = strategy_db(folder, db_name)
        if not path.exists():
            continue
        with Store(path, read_only=True) as db:
            for (round_, phase, world), cell in _cells(db, f"{config.id}/{strategy}/").items():
                (out.eval if phase == "eval" else out.train)[(strategy, round_, world)] = cell
            if strategy == "none":
                continue
            active = active_items(db)
            out.carriers[strategy] = dict(Counter(i.carrier.value for i in active))
            decisions: Counter[str] = Counter()
            for update in db.list_updates(limit=10_000_000):
                name = update.gate.name if update.gate else update.carrier.value
                decisions[f"{name}:{update.op.value}"] += 1
            out.gates[strategy] = decisions
            out.growth[strategy] = _growth(db, config)
            out.revocations[strategy] = db.list_revocations()
            out.revoked[strategy] = len(out.revocations[strategy])
            out.poison[strategy] = poisoned_items(db)  # every carrier, the dataset's rows included
            if strategy in GOVERNED:
                out.skills[strategy] = skill_rows(db)
            if costs := extractor.read_costs(folder, strategy):
                out.extractor[strategy] = costs
            if strategy == "lle" and config.weights_min_rows is not None:
                from lle.flywheel.weights import adapter_rounds

                out.adapters = adapter_rounds(folder, db, config.id)
    return out


def skill_rows(db: Store) -> list[dict[str, object]]:
    """Each skill of the store that was ever active: name, version, state, source (`experience`, `import`,
    `extractor:<model>`) and its measured use (`skill_use.usefulness`: both arms, the difference and its 95 %
    interval in points, whether it is judged); `hurts`: judged worse with it, or retired for its use."""
    from lle.carriers import skill_use
    from lle.carriers.skills import SkillLibrary

    library = SkillLibrary(db)
    retired = {u.item_id for u in db.list_updates(limit=10_000_000, carrier=CarrierKind.skills.value,
                                                   op=UpdateOp.retire.value)
               if u.gate is not None and u.gate.name == "skills_usefulness"}
    rows: list[dict[str, object]] = []
    for skill in library.skills():
        use = skill_use.usefulness(library, skill)
        if use.since is None:
            continue  # never offered: nothing to measure
        rows.append({"skill": skill.name, "version": skill.descriptor.version, "id": skill.item_id,
                     "family": skill.descriptor.family, "state": skill.state.value,
                     "source": skill_use.source(library, skill),
                     **use.row(), "retired_for_use": skill.item_id in retired,
                     "hurts": use.hurts or skill.item_id in retired})
    return rows


def learned(folder: Path, config: RunConfig, strategy: str = "lle") -> dict[str, Any]:
    """What a strategy learned, for the end of `lle run`: each skill it ever used (`skill_rows`, with the check that
    admitted it), how many candidates failed their check, and the held-out tasks it turned from fail to pass (and
    from pass to fail) against `none`'s round 0, on its last evaluated round."""
    path = strategy_db(folder, strategy)
    if not path.exists():
        return {"strategy": strategy, "skills": [], "rejected": 0, "fixed": [], "broken": [], "tasks": 0}
    with Store(path, read_only=True) as db:
        rows = skill_rows(db)
        checks = {u.item_id: u.gate.reasons[0] for u in db.list_updates(
            limit=10_000_000, carrier=CarrierKind.skills.value, op=UpdateOp.admit.value)
            if u.gate is not None and u.gate.reasons}
        rejected = {u.item_id for u in db.list_updates(limit=10_000_000, carrier=CarrierKind.skills.value,
                                                       op=UpdateOp.reject.value)}
    outcomes = run_outcomes(folder, config)
    none, mine = outcomes.get("none", {}).get(0, {}), outcomes.get(strategy, {})
    last = mine[max(mine)] if mine else {}
    return {"strategy": strategy, "skills": [{**r, "check": checks.get(str(r["id"]), "")} for r in rows],
            "rejected": len(rejected), "tasks": sum(1 for sw in last if sw in none),
            "fixed": sorted(sw for sw, ok in last.items() if ok and none.get(sw) is False),
            "broken": sorted(sw for sw, ok in last.items() if ok is False and none.get(sw))}


def skills_hurt(rows: Sequence[Mapping[str, object]]) -> tuple[int, int]:
    """(skills that hurt, skills judged) of `skill_rows`: negative transfer among those with enough episodes in
    both arms (or retired for their use)."""
    judged = [r for r in rows if r.get("decided") or r.get("retired_for_use")]
    return sum(bool(r.get("hurts")) for r in judged), len(judged)


def table(res: RunResults) -> list[dict[str, object]]:
    """The summary table: held-out success at round 0 and at the last round, per world and strategy (for a run
    cut short, the last round each strategy was evaluated in, marked `(rN)`)."""
    rows: list[dict[str, object]] = []
    # A --no-baseline arm did not play none (its none comes from another run's outcomes file): no none row and
    # no round-0 count, rather than a "0/0" with a 0–1 interval that reads like a measured zero.
    played_none = res.config.baseline
    strategies = [*(["none"] if played_none else []), *[s for s in res.config.strategies if s != "none"]]
    shown = {s: res.last_round(s) for s in strategies}
    # A run cut short may not have evaluated a strategy at all: it shows "–", not "0/0".
    evaluated = ({"none"} if played_none else set()) | {s for s, r, _ in res.eval if r > 0}
    for world in [*res.worlds(), "all"]:
        for strategy in strategies:
            last = shown[strategy]
            mark = f" (r{last})" if 0 < last < res.config.rounds else ""
            if world == "all":
                first, end = res.total("none", 0), res.total(strategy, last)
            else:
                first = res.eval.get(("none", 0, world), Cell())
                end = first if strategy == "none" else res.eval.get((strategy, last, world), Cell())
            low, high = wilson(end.passed, end.n)
            known = strategy in evaluated
            rows.append({"world": world, "strategy": strategy,
                         "round0": f"{first.passed}/{first.n}" if played_none else "–",
                         "last": f"{end.passed}/{end.n}{mark}" if known else "–", "last_round": last,
                         "last_rate": round(end.rate, 3),
                         "ci95": [round(low, 3), round(high, 3)] if known else None,  # not 0–1 on no tasks
                         "steps_per_solved": round(end.steps_solved / end.passed, 2) if end.passed else None,
                         "tokens_per_solved": round(end.tokens_solved / end.passed) if end.passed else None,
                         "time_capped": end.time_capped})
    return rows


# --- the time cap and the paired verdict --------------------------------------------------------------------


def time_capped(db: Store, experience_id: str) -> bool:
    """Whether the episode was stopped by the wall-clock safety cap (`TimeLimit`), not by its steps or the world."""
    from lle.runtime.harness import TimeLimit, stop_of

    steps = db.steps_of(experience_id)
    return bool(steps) and isinstance(stop_of(steps[-1]), TimeLimit)


def batch_outcomes(db: Store, batch: str) -> dict[str, bool | None]:
    """Small world id -> solved, for the finished episodes of one batch (an evaluation, the monitor's watch set);
    None: stopped by the time cap."""
    from lle.store.episodes import batch_episodes

    world_of = {record.id: record.small_world.id for record in batch_episodes(db, batch).values()}
    out: dict[str, bool | None] = {}
    for found, exp_id, _world, outcome, _steps in flywheel_store.batch_results(db, batch):
        if found != batch or exp_id not in world_of:
            continue  # a batch whose name only starts with this one
        solved = outcome == "pass"
        out[world_of[exp_id]] = None if not solved and time_capped(db, exp_id) else solved
    return out


Outcomes = dict[str, dict[int, dict[str, bool | None]]]
"""Held-out outcomes per strategy and round (`none`: round 0 only): small world id -> solved (None: stopped by the
time cap). What a verdict is computed from; `lle.flywheel.outcomes` keeps it as a file."""


def run_outcomes(folder: Path, config: RunConfig) -> Outcomes:
    """The run's held-out outcomes, every strategy and round it evaluated (an evaluation not started is absent)."""
    out: Outcomes = {}
    for strategy in ["none", *[s for s in config.strategies if s != "none"]]:
        path = strategy_db(folder, "baseline" if strategy == "none" else strategy)
        if not path.exists():
            continue
        with Store(path, read_only=True) as db:
            rounds = [0] if strategy == "none" else list(range(1, config.rounds + 1))
            found = {r: batch_outcomes(db, f"{config.id}/{strategy}/r{r}/eval") for r in rounds}
        if any(found.values()):
            out[strategy] = {r: o for r, o in found.items() if o}
    return out


def paired_verdicts(folder: Path, config: RunConfig, world: str | None = None) -> list[Verdict]:
    """Each learning strategy's last-round held-out outcomes paired task by task with `none` (round 0, the
    same small worlds), and `lle`'s with every other strategy's (`raw`); tasks stopped by the time cap on
    either side are left out. With `world`, only that world's held-out tasks. A run cut short pairs each
    strategy's last evaluated round, on the tasks both sides finished, and its verdicts say which round."""
    return verdicts_of(run_outcomes(folder, config), config.strategies, config.rounds, world)


def verdicts_of(outcomes: Outcomes, strategies: Sequence[str], rounds_planned: int,
                world: str | None = None) -> list[Verdict]:
    """`paired_verdicts` from outcomes however gathered (one run, or several runs' files pooled)."""
    shown: dict[str, dict[str, bool | None]] = {}
    rounds: dict[str, int] = {"none": 0}
    for strategy, per_round in outcomes.items():
        if strategy == "none":
            shown[strategy] = per_round.get(0, {})
            continue
        rounds[strategy] = shown_round({r: len(o) for r, o in per_round.items() if o}, rounds_planned)
        shown[strategy] = per_round.get(rounds[strategy], {})
    learning = [s for s in strategies if s != "none"]
    comparisons = [(s, "none") for s in learning]
    if "lle" in learning:  # governed routing against every other way of keeping experience (raw logs, …)
        comparisons += [("lle", s) for s in learning if s != "lle"]
    out = []
    for strategy, baseline in comparisons:
        mine, theirs = shown.get(strategy, {}), shown.get(baseline, {})
        if not mine or not theirs:
            continue  # a strategy a run cut short has not evaluated yet: no verdict, rather than one on 0 tasks
        shared = sorted(t for t in set(mine) & set(theirs) if world is None or t.split(":", 1)[0] == world)
        pairs = [(bool(mine[t]), bool(theirs[t])) for t in shared if mine[t] is not None and theirs[t] is not None]
        compared = (rounds.get(strategy, rounds_planned), rounds.get(baseline, rounds_planned))
        cut = bool(pairs) and any(0 < r < rounds_planned for r in compared)
        out.append(paired_verdict(strategy, baseline, pairs, time_capped=len(shared) - len(pairs),
                                  rounds=compared if cut else None))
    return out


Cell3 = tuple[str, str, str]
"""(world, project, level) of a small world, as the coverage table shows it (`-` when it has none)."""


def coverage(folder: Path, config: RunConfig) -> dict[str, Any]:
    """Which (world, project, level) cells the run's train draws (every strategy, every attempt and replay)
    and its held-out set covered; held-out cells that no train draw reached are flagged (nothing learned on
    train can have been about them)."""
    from lle.store.episodes import batch_episodes

    train: Counter[Cell3] = Counter()
    held_out: Counter[Cell3] = Counter()
    for db_name in ["baseline", *[s for s in config.strategies if s != "none"]]:
        path = strategy_db(folder, db_name)
        if not path.exists():
            continue
        with Store(path, read_only=True) as db:
            for batch in sorted(set(flywheel_store.batches(db, config.id + "/").values())):
                phase = batch_round(batch)[1]
                if phase == "watch":
                    continue  # the monitor's: played, never trained on
                if phase == "eval" and db_name != "baseline":
                    continue  # every strategy evaluates the same small worlds: count them once
                into = held_out if phase == "eval" else train
                for record in batch_episodes(db, batch).values():
                    sw = record.small_world
                    into[(sw.world, sw.project or "-", "-" if sw.level is None else str(sw.level))] += 1
    cells = sorted(set(train) | set(held_out))
    rows = [{"world": c[0], "project": c[1], "level": c[2], "train": train[c], "held_out": held_out[c],
             "unreached": held_out[c] > 0 and not train[c]} for c in cells]
    return {"run": config.id, "cells": rows, "unreached": sum(1 for r in rows if r["unreached"])}


def verdicts_by_world(folder: Path, config: RunConfig) -> dict[str, list[dict[str, object]]]:
    """The paired verdict rows per world of the held-out set (`all`: every world), as the JSON summary gives them."""
    from lle.flywheel import suite as suites

    worlds = suites.for_run(config, folder).worlds
    out = {"all": [v.row() for v in paired_verdicts(folder, config)]}
    out |= {w: [v.row() for v in paired_verdicts(folder, config, w)] for w in worlds}
    return out
