"""Exploration: explorers run the same train small worlds; a task solved by any of them counts.

    explore(pop, small worlds, attempts=1, budget=…) ─ ExploreReport
        pass@population   tasks solved by at least one explorer
        best single       the explorer that solved the most
        diversity         how different the explorers' solved sets are (mean pairwise Jaccard distance)
                          and their action sequences (distinct sequences per task over attempts)

Budgets are model calls (a fast/slow step counts each of its calls). An explorer stops starting
episodes once it has spent its budget; the episode in flight finishes, so the calls it really made
are reported beside the budget. With `attempts` > 1 an agent replays the round with other sampling
seeds (attempt-major, so a budget covers the tasks evenly): one explorer with as many attempts as
the population has explorers is the baseline at equal budget.

Where an episode runs is the `runner`'s business: by default in the explorer's own store; the
flywheel's `population` strategy runs it as a resumable batch in the strategy's store instead.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

from lle.core import Experience, Limits, Outcome, SmallWorld, Split, canonical_json, utcnow
from lle.errors import InvalidInputError
from lle.evidence import assess_experience
from lle.population.fastslow import calls_of
from lle.population.population import AgentPolicyFactory, Population
from lle.population.types import AgentConfig, Intent, Message, Role
from lle.runtime.harness import run_episode

SEED_STRIDE = 1000
"""Attempt k of an agent samples with seed + k * SEED_STRIDE."""

Runner = Callable[[AgentConfig, SmallWorld, AgentPolicyFactory, int], Experience]
"""Plays one episode of an explorer (its config, the small world, its policy factory, the attempt)."""


def in_own_store(pop: Population) -> Runner:
    """The default runner: the episode goes to the explorer's own store, assessed as it ends."""
    def run(agent: AgentConfig, sw: SmallWorld, factory: AgentPolicyFactory, attempt: int) -> Experience:
        policy = factory(sw)
        return run_episode(sw, policy, factory.builder(policy), store=pop.store_of(agent.name),
                           assess=assess_experience, levers=agent.levers,
                           limits=Limits(max_steps=pop.config.max_steps, max_seconds=sw.limits.max_seconds))
    return run


@dataclass(frozen=True)
class Attempt:
    """One episode of one explorer."""

    agent: str
    small_world: str
    attempt: int
    experience_id: str
    passed: bool
    calls: int
    """Model calls the episode made (fast and slow)."""
    slow_calls: int
    actions: str
    """The executed actions as canonical JSON: two attempts that did the same have the same text."""
    seconds: float


@dataclass
class ExploreReport:
    tasks: list[str]
    agents: list[str]
    attempts: list[Attempt] = field(default_factory=list)
    budget: int | None = None

    def solved(self, agent: str | None = None) -> set[str]:
        return {a.small_world for a in self.attempts if a.passed and (agent is None or a.agent == agent)}

    def calls(self, agent: str | None = None) -> int:
        return sum(a.calls for a in self.attempts if agent is None or a.agent == agent)

    def best_single(self) -> tuple[str, int]:
        """(agent, tasks solved) of the explorer that solved the most (the first listed on a tie)."""
        return max(((a, len(self.solved(a))) for a in self.agents), key=lambda p: p[1])

    def solved_diversity(self) -> float:
        """Mean pairwise Jaccard distance of the explorers' solved sets (0: all solved the same tasks)."""
        pairs = list(itertools.combinations(self.agents, 2))
        if not pairs:
            return 0.0
        total = 0.0
        for a, b in pairs:
            sa, sb = self.solved(a), self.solved(b)
            union = sa | sb
            total += 1 - len(sa & sb) / len(union) if union else 0.0
        return total / len(pairs)

    def sequence_diversity(self) -> float:
        """Distinct action sequences per task over the attempts at it, averaged over tasks (1: all differ)."""
        per_task = []
        for task in self.tasks:
            seqs = [a.actions for a in self.attempts if a.small_world == task]
            if seqs:
                per_task.append(len(set(seqs)) / len(seqs))
        return sum(per_task) / len(per_task) if per_task else 0.0

    def summary(self) -> dict[str, Any]:
        best, best_n = self.best_single()
        slow = sum(a.slow_calls for a in self.attempts)
        return {
            "tasks": len(self.tasks), "episodes": len(self.attempts), "budget_per_agent": self.budget,
            "pass_at_population": len(self.solved()), "best_single": {"agent": best, "solved": best_n},
            "per_agent": {a: {"solved": len(self.solved(a)), "calls": self.calls(a),
                              "episodes": sum(1 for t in self.attempts if t.agent == a),
                              "seconds": round(sum(t.seconds for t in self.attempts if t.agent == a), 1)}
                          for a in self.agents},
            "solved_tasks": sorted(self.solved()),
            "diversity": {"solved_jaccard": round(self.solved_diversity(), 3),
                          "distinct_sequences": round(self.sequence_diversity(), 3)},
            "calls": self.calls(), "slow_share": round(slow / self.calls(), 3) if self.calls() else 0.0,
        }

    def as_json(self) -> dict[str, Any]:
        return {**self.summary(), "attempts": [asdict(a) for a in self.attempts]}


def actions_key(exp: Experience) -> str:
    return canonical_json([[s.executed.tool, s.executed.args] for s in exp.steps])


def model_calls(exp: Experience) -> tuple[int, int]:
    """(all, slow) model calls of an episode: a fast/slow agent's notes, else one per step with a model call."""
    fast, slow = calls_of(exp.steps)
    if fast or slow:
        return fast + slow, slow
    return sum(1 for s in exp.steps if s.llm is not None), 0


def explore(pop: Population, small_worlds: Sequence[SmallWorld], *, agents: Sequence[str] | None = None,
            attempts: int = 1, budget: int | None = None, now: datetime | None = None,
            observe: bool = True, runner: Runner | None = None) -> ExploreReport:
    """Each explorer plays each train small world `attempts` times (within `budget` model calls), in its own
    store (or where `runner` puts it). A success is posted on the bus (`solved`); with `observe`, the agent's
    skill library sees each episode (its own mining and monitoring)."""
    held = [sw.id for sw in small_worlds if sw.split is not Split.train]
    if held:
        raise InvalidInputError(f"explorers run train small worlds only (got {held[:3]}); dev and test are for "
                                "evaluation")
    names = list(agents) if agents is not None else [a.name for a in pop.config.explorers]
    for name in names:
        if pop.agent(name).role is not Role.explorer:
            raise InvalidInputError(f"agent {name} is a {pop.agent(name).role}, not an explorer")
    report = ExploreReport([sw.id for sw in small_worlds], names, budget=budget)
    play = runner or in_own_store(pop)
    # A resumed round gets its stored episodes back from the runner: each success is posted once.
    posted = {e for m in pop.bus.messages(intent=Intent.solved) for e in m.experience_ids}
    for name in names:
        agent, spent = pop.agent(name), 0
        for attempt in range(attempts):
            factory = pop.policy_factory(name, seed_offset=attempt * SEED_STRIDE)
            for sw in small_worlds:
                if budget is not None and spent >= budget:
                    break
                started = time.monotonic()
                exp = play(agent, sw, factory, attempt)
                seconds = time.monotonic() - started
                calls, slow = model_calls(exp)
                spent += calls
                passed = exp.outcome is Outcome.passed
                report.attempts.append(Attempt(name, sw.id, attempt, exp.id, passed, calls, slow, actions_key(exp),
                                               round(seconds, 3)))
                if observe:
                    pop.library(name).observe(exp)
                if passed and exp.id not in posted:
                    posted.add(exp.id)
                    pop.bus.post(Message(sender=name, intent=Intent.solved, experience_ids=[exp.id],
                                         created_at=now or utcnow(), priority=3,
                                         payload={"small_world": sw.id, "attempt": attempt}))
    return report
