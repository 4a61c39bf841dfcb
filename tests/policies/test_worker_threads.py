"""A worker's model takes the thread count its factory was given, not the one in the inherited environment.

Two workers of two llama.cpp threads each on two cores spin-wait on each other: the population's held-out
episodes measured 40-360 s a step that way, against about 3 s.
"""

from __future__ import annotations

from pathlib import Path

from lle.core import Split
from lle.flywheel.strategies import SpecPolicyFactory
from lle.population.population import AgentPolicyFactory
from lle.population.types import AgentConfig
from lle.worlds.base import cut, open_family


def test_the_factory_threads_win_over_an_inherited_lle_threads(smollm_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("LLE_THREADS", "2")  # what a worker inherits from a parent that loaded a model itself
    small_world = cut(open_family("math/arith-v1"), Split.train, 0, level=0)
    policy = SpecPolicyFactory("smollm2-135m", threads=1)(small_world)
    assert policy.n_threads == 1
    agent = AgentConfig(name="small", model="smollm2-135m")
    assert AgentPolicyFactory(agent, threads=1)(small_world).n_threads == 1
    assert AgentPolicyFactory(agent).fast.threads == 2  # unset: LLE_THREADS, for episodes played in this process
