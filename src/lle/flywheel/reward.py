"""The reward of an RL row (`lle.carriers.exports`, format `rl`): replay the actions, run the verifiers.

It plays an episode, so it lives above the runtime and not in the dataset carrier, which only
stores and retrieves; a trainer calls `recompute_reward(row, actions)` for each sampled completion.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from lle import registry
from lle.carriers.dataset import Row
from lle.core import ActionRequest, Outcome, SmallWorld
from lle.errors import InvalidInputError
from lle.evidence.evidence import decide, run_verifiers
from lle.policies.scripted import ScriptedPolicy
from lle.runtime.harness import run_episode


def recompute_reward(row: Row, actions: Sequence[ActionRequest | dict[str, Any]]) -> float | None:
    """A trainer's reward for `actions` on an RL row: play them in a fresh world and run the row's verifiers.

    1.0 for pass, 0.0 for fail, None when the verifiers cannot decide (never rounded up).
    """
    sw = SmallWorld.model_validate_json(row["small_world"])
    episode = run_episode(sw, ScriptedPolicy(list(actions)), world_options=json.loads(row.get("world_options") or "{}"))
    try:
        checks = [registry.make(i) for i in row["verifiers"]]
    except Exception as err:
        raise InvalidInputError(f"cannot build the verifiers {row['verifiers']} of {sw.id} ({err}); "
                                "install the plugins that provide them") from err
    outcome, _ = decide(run_verifiers(sw, episode.steps, checks))
    return {Outcome.passed: 1.0, Outcome.failed: 0.0}.get(outcome)
