"""A population on disk: the bus, one store per agent, and how each agent's policy is made.

    .lle/populations/NAME/
        population.db      the bus (messages) and shared-skill lineage, in an lle store (m008)
        agents/AGENT.db    the agent's own ledger and carriers: its experiences, skills, memory

Each agent learns in its own store, so nothing one agent admits reaches another by accident; what
crosses is explicit (`PopulationConfig.shared`) and goes through the bus (`lle.population.sharing`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lle.carriers.skills import SkillLibrary, Validation
from lle.core import ContextBuilder, Policy, SmallWorld
from lle.errors import InvalidInputError
from lle.flywheel.replay import validate_skill
from lle.flywheel.strategies import SpecPolicyFactory, WorkerCache
from lle.policies import load_policy
from lle.population.bus import Bus
from lle.population.fastslow import FastSlowPolicy, HistoryTap
from lle.population.types import AgentConfig, PopulationConfig
from lle.store import Store


class AgentPolicyFactory:
    """The agent's policy for a small world (a `runtime.parallel.PolicyFactory`): its model at its temperature
    and seed (mixed with the small world's id above temperature 0), or a fast/slow pair."""

    def __init__(self, agent: AgentConfig, *, db_path: str | None = None, cache: WorkerCache | None = None,
                 seed_offset: int = 0, threads: int | None = None) -> None:
        self.agent, self.cache = agent, cache or WorkerCache()
        threads = threads or int(os.environ.get("LLE_THREADS", "2"))
        seed = agent.seed + seed_offset
        # One loaded model per spec serves every agent that names it (SpecPolicyFactory sets the sampling
        # settings per episode): three explorers of one model cost its memory once.
        self.fast = SpecPolicyFactory(agent.model, threads=threads, seed=seed, db_path=db_path,
                                      temperature=agent.temperature, cache=self.cache)
        self.slow = None if agent.slow_model is None else SpecPolicyFactory(
            agent.slow_model, threads=threads, seed=seed, db_path=db_path, temperature=agent.temperature,
            cache=self.cache)
        self.last: Policy | None = None

    def __call__(self, small_world: SmallWorld) -> Policy:
        if self.agent.model.startswith("scripted:"):  # fixed actions, a fresh position per episode
            return load_policy(self.agent.model)
        fast = self.fast(small_world)
        policy: Policy = fast if self.slow is None else FastSlowPolicy(fast, self.slow(small_world))
        self.last = policy
        return policy

    def builder(self, policy: Policy) -> ContextBuilder:
        """The context builder for an episode of `policy` (a fast/slow policy sees the committed steps)."""
        from lle.context.builder import BudgetedContextBuilder

        inner: ContextBuilder = BudgetedContextBuilder()
        return HistoryTap(inner, policy) if isinstance(policy, FastSlowPolicy) else inner


class Population:
    """A population's bus and its agents' stores under `root` (opened lazily, closed by `close`)."""

    def __init__(self, config: PopulationConfig, root: str | Path, *, cache: WorkerCache | None = None) -> None:
        self.config, self.root = config, Path(root)
        (self.root / "agents").mkdir(parents=True, exist_ok=True)
        self.store = Store(self.root / "population.db")
        self.bus = Bus(self.store)
        self.cache = cache or WorkerCache()  # a flywheel passes its own: models loaded once per run, not per round
        self._stores: dict[str, Store] = {}
        self._libraries: dict[str, SkillLibrary] = {}

    @classmethod
    def open(cls, config: PopulationConfig, workspace: str | Path) -> Population:
        """The population's folder inside a workspace: `WORKSPACE/populations/NAME`."""
        return cls(config, Path(workspace) / "populations" / config.name)

    def agent(self, name: str) -> AgentConfig:
        try:
            return self.config.agent(name)
        except KeyError:
            names = ", ".join(a.name for a in self.config.agents)
            raise InvalidInputError(f"population {self.config.name} has no agent {name!r}; its agents: {names}") \
                from None

    def db_path(self, name: str) -> Path:
        return self.root / "agents" / f"{self.agent(name).name}.db"

    def store_of(self, name: str) -> Store:
        if name not in self._stores:
            self._stores[name] = Store(self.db_path(name))
        return self._stores[name]

    def library(self, name: str) -> SkillLibrary:
        if name not in self._libraries:
            self._libraries[name] = SkillLibrary(self.store_of(name), actor=name)
        return self._libraries[name]

    def replay(self, name: str, ref: str, small_worlds: Sequence[SmallWorld], *,
               factory: AgentPolicyFactory | None = None) -> Validation:
        """Agent `name`'s own A/B replay of its skill `ref`, played as it explores: its policy, its levers, the
        population's step limit and context builder."""
        factory = factory or self.policy_factory(name)
        return validate_skill(self.library(name), ref, small_worlds, factory, actor=name,
                              levers=self.agent(name).levers, max_steps=self.config.max_steps, builder=factory.builder)

    def policy_factory(self, name: str, *, seed_offset: int = 0, threads: int | None = None) -> AgentPolicyFactory:
        """`threads`: llama.cpp threads per model; give `cpus // workers` where episodes run in a worker pool."""
        return AgentPolicyFactory(self.agent(name), db_path=str(self.db_path(name)), cache=self.cache,
                                  seed_offset=seed_offset, threads=threads)

    def close(self) -> None:
        for store in self._stores.values():
            store.close()
        self.store.close()

    def __enter__(self) -> Population:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
