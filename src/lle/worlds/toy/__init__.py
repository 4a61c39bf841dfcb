"""`toy/keys-v1`: a few rooms, a key, a locked door (see ../README.md)."""

from __future__ import annotations

from lle.core import SmallWorld
from lle.policies.scripted import ScriptedPolicy
from lle.worlds.toy.keys import KeysFamily, KeysWorld, oracle_actions

__all__ = ["KeysFamily", "KeysWorld", "oracle_actions", "oracle_policy"]


def oracle_policy(small_world: SmallWorld) -> ScriptedPolicy:
    """A scripted policy that solves `small_world` (picklable: usable as a `run_many` policy factory)."""
    return ScriptedPolicy(oracle_actions(small_world), name="toy-oracle")
