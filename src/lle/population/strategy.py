"""The `population` strategy of `lle run --population FILE` (a `lle.flywheel.strategies.StrategyPlugin`).

    round r:  the round's train small worlds (the run's draw, the same as every strategy's)
              each explorer plays them within its model-call budget (`explore`), its sampling and levers,
              each episode a resumable batch `RUN/population/rN/train/AGENT` in the strategy's store,
              retrieving from the pooled carriers
              the explorers' attempts at each small world are one group ─ the update router (like `lle`)
              ─ memories, rules, dataset rows, candidate skills in the pooled store `runs/RUN/population.db`
              ─ each candidate skill A/B replayed by the acting agent (the flywheel's `validate_skills`)
    evaluation: the acting agent (`actor`, else the first explorer), greedy, on the run's held-out tasks,
                with the pooled carriers (the skills the replay gate activated) and its own levers

An agent whose file sets no `[agents.levers]` runs under the run's levers (`--levers`), which every
strategy starts from; one that sets them runs under its own (its context recipe).

The population file gives the agents, the budget and the acting agent; the run decides the tasks (suite,
rounds, train size, step limit), so `population` is paired with `none` on exactly the same held-out
tasks. Its snapshot (`runs/RUN/population.json`) is what a resumed run uses. Validators and skill sharing
between agents' own stores are `lle population run`'s; here the explorers share one pool, and what enters
it passes the router's gates.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from lle.config import Levers, RunConfig
from lle.core import Experience, SmallWorld
from lle.errors import InvalidInputError
from lle.population.config import load_population
from lle.population.explore import SEED_STRIDE, Runner, explore
from lle.population.population import AgentPolicyFactory, Population
from lle.population.types import AgentConfig, PopulationConfig

SNAPSHOT = "population.json"


class PopulationStrategy:
    """A population's explorers as one strategy of a flywheel run."""

    def __init__(self, config: PopulationConfig, root: Path, base: Levers | None = None) -> None:
        self.config, self.root, self.base = config, root, base or Levers()

    def levers(self, agent: AgentConfig) -> Levers:
        """The agent's own levers when its file sets them, else the run's (so `none` and it start alike)."""
        return agent.levers if "levers" in agent.model_fields_set else self.base

    @classmethod
    def for_run(cls, run: RunConfig, folder: Path) -> PopulationStrategy:
        """The run's population: its snapshot when the run started before, else the file (snapshotted now)."""
        snapshot = folder / SNAPSHOT
        if snapshot.exists():
            config = PopulationConfig.model_validate_json(snapshot.read_text(encoding="utf-8"))
        elif run.population is None:
            raise InvalidInputError(f"run {run.id} has the population strategy but no population file; start it "
                                    "with lle run --population FILE")
        else:
            config = load_population(run.population)
            tmp = snapshot.with_suffix(".tmp")
            # Unset keys stay unset in the snapshot: an agent without levers keeps taking the run's on resume.
            tmp.write_text(config.model_dump_json(indent=2, exclude_unset=True), encoding="utf-8")
            tmp.replace(snapshot)
        return cls(config, folder / "population", run.levers)

    @property
    def actor(self) -> AgentConfig:
        return self.config.acting

    def eval_policy(self, flywheel: Any, db_path: Path) -> AgentPolicyFactory:
        # Evaluation is greedy for every strategy: the acting agent's model (and slow model), at temperature 0.
        greedy = self.actor.model_copy(update={"temperature": 0.0})
        threads = max(1, (os.cpu_count() or 2) // max(1, flywheel.config.workers))  # episodes run in the worker pool
        return AgentPolicyFactory(greedy, db_path=str(db_path), cache=flywheel.cache, seed_offset=flywheel.config.seed,
                                  threads=threads)

    def eval_levers(self) -> Levers:
        return self.levers(self.actor)

    def train(self, flywheel: Any, db_path: Path, round_: int, worlds: list[SmallWorld]) -> list[list[Experience]]:
        played: dict[str, Experience] = {}

        def runner(agent: AgentConfig, sw: SmallWorld, _own: AgentPolicyFactory, attempt: int) -> Experience:
            # The explorer's model and sampling, reading the pooled store (the oracle calls its skills), not its own.
            factory = AgentPolicyFactory(agent, db_path=str(db_path), cache=flywheel.cache,
                                         seed_offset=flywheel.config.seed + attempt * SEED_STRIDE)
            label = f"r{round_}/train/{agent.name}" + (f"/a{attempt}" if attempt else "")
            found: list[Experience] = flywheel.phase("population", db_path, label, [sw], policy=factory,
                                                     levers=self.levers(agent), serial=True)
            exp = found[0]
            played[exp.id] = exp
            return exp

        play: Runner = runner
        with Population(self.config, self.root, cache=flywheel.cache) as pop:
            report = explore(pop, worlds, budget=self.config.budget, observe=False, runner=play)
        folder = self.root / "reports"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"r{round_}.json").write_text(json.dumps(report.summary(), indent=2, sort_keys=True))
        by_world: dict[str, list[Experience]] = {sw.id: [] for sw in worlds}
        for attempt in report.attempts:
            by_world[attempt.small_world].append(played[attempt.experience_id])
        # One group per small world: the explorers' attempts at it (a small world past every budget has none).
        return [group for group in by_world.values() if group]
