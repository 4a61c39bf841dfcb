"""Shared set-up of the population tests: real stores, the toy world's oracle, skills mined for real."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lle.carriers.skills import SkillLibrary
from lle.core import Policy, SmallWorld, Split
from lle.evidence import assess_experience
from lle.flywheel.replay import SkillAwarePolicy
from lle.population.population import Population
from lle.population.types import PopulationConfig
from lle.runtime.harness import run_episode
from lle.worlds.toy import KeysFamily, oracle_actions, oracle_policy
from lle.worlds.toy.layout import make_layout, path

FAMILY = KeysFamily()


def train(seed: int) -> SmallWorld:
    return FAMILY.small_world(Split.train, seed)


def key_next_to_door(sw: SmallWorld) -> bool:
    layout = make_layout(sw.project, sw.seed)
    return len(path(layout, layout.key_room, layout.door_room)) == 1


def near(n: int, start: int = 0) -> list[SmallWorld]:
    return [train(s) for s in range(start, start + 60) if key_next_to_door(train(s))][:n]


def far(n: int, start: int = 0) -> list[SmallWorld]:
    return [train(s) for s in range(start, start + 60) if not key_next_to_door(train(s))][:n]


def toy_population(tmp_path: Path, agents: Sequence[dict[str, Any]], **extra: Any) -> Population:
    config = PopulationConfig.model_validate({"name": "toy", "world": "toy/keys-v1", "agents": list(agents), **extra})
    return Population(config, tmp_path / "pop")


def mine(library: SkillLibrary, seeds: Sequence[int]) -> None:
    """Oracle episodes in the library's store, assessed by the real verifiers, observed (mining)."""
    for seed in seeds:
        sw = train(seed)
        library.observe(run_episode(sw, oracle_policy(sw), store=library.store, assess=assess_experience))


def skill_aware(library: SkillLibrary, trust: str = "full") -> Any:
    """A policy factory that follows the oracle's plan and calls the library's skills where offered."""
    def make(sw: SmallWorld) -> Policy:
        return SkillAwarePolicy(oracle_actions(sw), library.skills("toy"), trust=trust)  # type: ignore[arg-type]
    return make
