"""A population's rounds: explore, then share what its own gates activated (`lle population run FILE`).

    round r:  the round's train small worlds (the same for every explorer)
              explore ─ pass@population, best single explorer, diversity
              share:  reconcile revocations ─ ask the validators about each new active skill ─ they judge
                      ─ publish what they allowed ─ every other explorer adopts through its own replay gate
              notes (when `shared` names rules or lessons): each explorer's episodes through its own router,
                      then its new active rules and lessons judged, published and adopted the same way
                      (`lle.population.notes`)

`baseline`: each explorer alone, with as many attempts as the population has explorers and their
summed budget, in a folder of its own (so its episodes never reach the population's stores): the
single agent at the same budget that pass@population is compared with.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from lle.carriers.skills import SkillState
from lle.core import SmallWorld, Split, utcnow
from lle.errors import InvalidInputError
from lle.governance.lineage import active_items
from lle.population import notes, sharing
from lle.population.explore import ExploreReport, explore
from lle.population.population import Population
from lle.population.sharing import verdict_for
from lle.population.types import Intent, Message, PopulationConfig, Role
from lle.population.validation import Validator
from lle.store import messages as rows
from lle.worlds.base import cut, open_family

Progress = Callable[[str], None]


def train_worlds(config: PopulationConfig, n: int, start: int) -> list[SmallWorld]:
    """Draws `start` .. `start + n - 1`: the config's worlds in turn, each at its own next train seed."""
    families, k = [open_family(w) for w in config.worlds], len(config.worlds)
    return [cut(families[i % k], Split.train, i // k, level=config.level) for i in range(start, start + n)]


def share_round(pop: Population, tasks: list[SmallWorld], *, now: datetime | None = None) -> dict[str, Any]:
    """Sharing after a round's exploration; the counts of what happened."""
    now = now or utcnow()
    counts: Counter[str] = Counter()
    counts["revoked_copies"] = len(sharing.reconcile(pop))
    if "skills" not in pop.config.shared:
        return dict(counts)
    copies = {(r.agent, r.item_id) for r in rows.copies(pop.store)}
    for agent in pop.config.explorers:  # each agent's own candidates face its own replay gate first
        for skill in pop.library(agent.name).skills():
            if skill.state is SkillState.candidate and (agent.name, skill.item_id) not in copies:
                own = train_worlds(pop.config, pop.config.replay, agent.train_start)
                result = pop.replay(agent.name, skill.item_id, own)
                counts[f"own_replay_{result.state.value}"] += 1
    shared = {m.skill_ids[0] for m in pop.bus.messages(intent=Intent.share)}
    # Only an agent's own skills are offered: a copy is shared by its source (no echo round the population).
    offers = [(a.name, s.item_id) for a in pop.config.explorers for s in pop.library(a.name).skills()
              if s.state is SkillState.active and (a.name, s.item_id) not in copies and s.item_id not in shared]
    if pop.config.validators:
        for owner, item_id in offers:
            if sharing.verdict_for(pop, item_id) is None:
                sharing.ask_judges(pop, owner, item_id, now=now)
                counts["asked"] += 1
        for agent in pop.config.validators:
            validator = Validator(agent.name, pop.policy_factory(agent.name)(tasks[0]))
            for verdict in sharing.judge_pending(pop, validator, now=now):
                counts[f"verdict_{verdict.payload['decision']}"] += 1
    for owner, item_id in offers:
        try:
            sharing.publish(pop, owner, item_id, now=now)
            counts["shared"] += 1
        except InvalidInputError:
            counts["held_back"] += 1  # blocked, delayed or not judged: it waits for a later round
    for agent in pop.config.explorers:
        for share in sharing.shares_for(pop, agent.name, now=now):
            own = train_worlds(pop.config, pop.config.replay, agent.train_start)
            adoption = sharing.adopt(pop, agent.name, share, own, pop.policy_factory(agent.name), now=now)
            counts["adopted" if adoption.reply.intent is Intent.adopted else "declined"] += 1
    return dict(counts)


MAX_NOTES = 2
"""Rules or lessons each explorer offers per round: each costs every validator a model call."""


def share_notes(pop: Population, tasks: list[SmallWorld], report: ExploreReport, *,
                now: datetime | None = None) -> dict[str, Any]:
    """Rules and lessons after a round: each explorer routes its own episodes (its own gates), then offers its new
    active rules and lessons, judged by the validators and adopted behind each importer's own gate."""
    kinds = [k for k, key in notes.SHARED.items() if key in pop.config.shared]
    if not kinds:
        return {}
    now = now or utcnow()
    counts: Counter[str] = Counter()
    from lle.router.router import UpdateRouter

    for agent in pop.config.explorers:
        router = UpdateRouter(pop.store_of(agent.name), actor=agent.name)
        for attempt in report.attempts:
            if attempt.agent == agent.name:
                router.route_once(pop.store_of(agent.name).get_experience(attempt.experience_id), pop.config.name)
    copies = {(r.agent, r.item_id) for r in rows.copies(pop.store)}
    offered = {i for m in pop.bus.messages(intent=Intent.share) for i in m.item_ids}
    offers = []
    for agent in pop.config.explorers:
        store = pop.store_of(agent.name)
        carriers = [notes.CARRIER[k].value for k in kinds]
        fresh = [i.id for c in carriers for i in active_items(store, c)
                 if (agent.name, i.id) not in copies and i.id not in offered]
        offers += [(agent.name, item_id) for item_id in fresh[:MAX_NOTES]]
    for owner, item_id in offers:
        if pop.config.validators and verdict_for(pop, item_id) is None:
            notes.ask_judges(pop, owner, item_id, now=now)
            counts["notes_asked"] += 1
    for agent in pop.config.validators:
        counts["notes_verdicts"] += len(judge_all(pop, agent.name, tasks[0], now))
    for owner, item_id in offers:
        try:
            notes.publish(pop, owner, item_id, now=now)
            counts["notes_shared"] += 1
        except InvalidInputError:
            counts["notes_held_back"] += 1
    for agent in pop.config.explorers:
        for share in notes.shares_for(pop, agent.name, now=now):
            reply = notes.adopt(pop, agent.name, share, now=now)
            counts[f"notes_{reply.intent.value}"] += 1
    return dict(counts)


def judge_all(pop: Population, name: str, probe: SmallWorld, now: datetime) -> list[Message]:
    """The validator `name` answers every judge message waiting for it (its policy made for `probe`, a train task)."""
    if not pop.bus.inbox(name, now=now, intents=[Intent.judge]):
        return []  # its model is loaded only when there is something to judge
    return sharing.judge_pending(pop, Validator(name, pop.policy_factory(name)(probe)), now=now)


def run_population(pop: Population, *, progress: Progress | None = None) -> dict[str, Any]:
    """Every round of the population's config; the report (also written to `ROOT/reports/`)."""
    config, rounds = pop.config, []
    for r in range(config.rounds):
        tasks = train_worlds(config, config.train, r * config.train)
        if progress:
            progress(f"round {r}: {len(config.explorers)} explorers on {len(tasks)} train small worlds")
        report = explore(pop, tasks, budget=config.budget)
        rounds.append({"round": r, **report.summary(), "sharing": {**share_round(pop, tasks),
                                                                     **share_notes(pop, tasks, report)}})
    out = {"population": config.name, "world": config.world, "level": config.level, "rounds": rounds}
    _write(pop.root, "run", out)
    return out


def run_baseline(config: PopulationConfig, root: Path, *, only: Sequence[str] | None = None,
                 progress: Progress | None = None) -> dict[str, Any]:
    """Each explorer (or those in `only`) alone at the population's budget (n explorers: n attempts, n times the
    budget)."""
    explorers = config.explorers
    budget = None if config.budget is None else config.budget * len(explorers)
    out: dict[str, Any] = {"attempts": len(explorers), "budget": budget, "rounds": []}
    for r in range(config.rounds):
        tasks = train_worlds(config, config.train, r * config.train)
        per_agent = {}
        for agent in explorers:
            if only is not None and agent.name not in only:
                continue
            if progress:
                progress(f"baseline round {r}: {agent.name} alone, {len(explorers)} attempts")
            alone = config.model_copy(update={"agents": [agent.model_copy(update={"role": Role.explorer})]})
            with Population(alone, root / "baseline" / agent.name) as solo:
                per_agent[agent.name] = explore(solo, tasks, attempts=len(explorers), budget=budget).summary()
        best = max(per_agent, key=lambda a: per_agent[a]["pass_at_population"])
        out["rounds"].append({"round": r, "best_alone": {"agent": best,
                                                         "solved": per_agent[best]["pass_at_population"]},
                              "per_agent": per_agent})
    _write(root, "baseline", out)
    return out


def _write(root: Path, kind: str, report: dict[str, Any]) -> Path:
    folder = root / "reports"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{kind}-{utcnow().strftime('%Y%m%dT%H%M%S')}.json"
    path.write_text(json.dumps(report, indent=2, sort_keys=True))
    return path
