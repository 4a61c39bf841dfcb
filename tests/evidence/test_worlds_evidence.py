"""For each built-in world: a known-good and a known-bad trajectory give the expected evidence."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from lle import registry
from lle.core import ActionRequest, Outcome, Policy, SmallWorld, Split, VerificationLevel
from lle.evidence import assess_experience
from lle.policies.scripted import ScriptedPolicy
from lle.runtime.harness import run_episode
from lle.sandbox import bwrap_available
from lle.worlds.base import open_family


def _reference(module: str, name: str = "reference_actions") -> Callable[[SmallWorld], Policy]:
    def make(sw: SmallWorld) -> Policy:
        import importlib

        return ScriptedPolicy(getattr(importlib.import_module(module), name)(sw))

    return make


def _game_solver(sw: SmallWorld) -> Policy:
    from lle.worlds.games.arena import GAMES

    game = GAMES[sw.world]
    return ScriptedPolicy(lambda context: game.solve(context.messages[-1].content))  # type: ignore[arg-type]


WORLDS: dict[str, tuple[Callable[[SmallWorld], Policy], str, VerificationLevel]] = {
    "toy/keys-v1": (_reference("lle.worlds.toy.keys", "oracle_actions"), "state", VerificationLevel.hard_anchor),
    "sql/shop-v1": (_reference("lle.worlds.sql.world"), "execution", VerificationLevel.hard_anchor),
    "math/arith-v1": (_reference("lle.worlds.math.world"), "symbolic", VerificationLevel.hard_anchor),
    "games/guess-number-v1": (_game_solver, "textarena:guessed-number", VerificationLevel.hard_anchor),
    # Code: the tests plus the compiler on the file written are two independent anchors.
    "code/humaneval-v1": (_reference("lle.worlds.code.humaneval"), "test", VerificationLevel.independent_anchors),
    "code/quirks-v1": (_reference("lle.worlds.code.quirks"), "test", VerificationLevel.independent_anchors),
}


@pytest.mark.slow
@pytest.mark.parametrize("world_id", sorted(WORLDS))
def test_good_and_bad_trajectories_per_world(world_id: str) -> None:
    if world_id.startswith("code/") and not bwrap_available():
        pytest.skip("bubblewrap is missing (apt-get install bubblewrap)")
    assert world_id in registry.ids()
    good_policy, anchor, level = WORLDS[world_id]
    sw = open_family(world_id).small_world(Split.train, 1)
    good = assess_experience(run_episode(sw, good_policy(sw)))
    assert (good.outcome, good.verification, good.score) == (Outcome.passed, level, 1.0), good.evidence
    goal_evidence = [e for e in good.evidence if e.anchor == anchor]
    assert goal_evidence and all(e.outcome is Outcome.passed for e in goal_evidence)
    bad = assess_experience(run_episode(sw, ScriptedPolicy([ActionRequest(tool="submit", args=_empty(sw))])))
    assert bad.outcome is Outcome.failed and bad.score == 0.0
    assert bad.verification.rank >= VerificationLevel.hard_anchor.rank
    assert bad.attribution is not None


def _empty(sw: SmallWorld) -> dict[str, object]:
    """The arguments of a submit that gives up (each world names its answer field)."""
    family = open_family(sw.world)
    world = family.make_world(sw)
    try:
        submit = next(t for t in world.tools if t.name == "submit")
    finally:
        world.close()
    required = submit.parameters.get("required") or []
    return {name: "" for name in required}  # type: ignore[union-attr]

