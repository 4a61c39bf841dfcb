"""Resume: continue a killed episode from its last committed step (the recorder committed each one).

The world is rebuilt and the committed actions replayed; the harness then runs on from there.
Its own module because it needs both the harness (`Episode`) and the recorder, which the harness uses.
"""

from __future__ import annotations

from collections.abc import Sequence

from lle.core import ContextBuilder, Experience, Policy
from lle.errors import InvalidInputError
from lle.policies import load_policy, policy_info
from lle.runtime.grounding import SkillTool
from lle.runtime.harness import Episode
from lle.runtime.recorder import Assessor, OnCommit, StoreRecorder
from lle.store import Store
from lle.store.episodes import get_episode, is_finished
from lle.worlds.base import ToolWorld


def resume(
    store: Store,
    episode_id: str,
    *,
    policy: Policy | None = None,
    context_builder: ContextBuilder | None = None,
    world: ToolWorld | None = None,
    on_commit: OnCommit | None = None,
    record_timings: bool = True,
    assess: Assessor | None = None,
    skills: Sequence[SkillTool] = (),
) -> Experience:
    """Continue a killed episode from its last committed step and return its experience.

    The world is rebuilt from the recorded small world, seed and world options; the committed
    steps' executed actions are replayed and must give the recorded observations. The policy is
    `policy`, else rebuilt from the recorded spec (a scripted policy's sha256 must still match).
    An already finished episode is returned as stored. `skills`: those the episode was offered (a program
    skill killed in the middle of its calls runs on from the committed ones).
    """
    record = get_episode(store, episode_id)
    if is_finished(store, episode_id):
        return store.get_experience(episode_id)
    if policy is None:
        if record.policy_spec is None:
            raise InvalidInputError(
                f"episode {episode_id} was started by a policy without a spec ({record.policy.model}); "
                "pass the same policy (resume(..., policy=…) or `lle episodes resume ID --policy SPEC`)"
            )
        policy = load_policy(record.policy_spec)
    info = policy_info(policy)
    if record.policy.sha256 is not None and info.sha256 != record.policy.sha256:
        raise InvalidInputError(
            f"episode {episode_id} was started by {record.policy.model} with sha256 {record.policy.sha256[:12]}…, "
            f"the given policy has {str(info.sha256)[:12]}…; resume it with the policy it started with"
        )
    return Episode(
        record.small_world, policy, context_builder, record.limits,
        recorder=StoreRecorder(store, on_commit=on_commit, assess=assess),
        episode_id=episode_id, world=world, world_options=record.world_options, resume=True,
        history=store.steps_of(episode_id), expected_initial_observation=record.initial_observation,
        record_timings=record_timings, batch=record.batch, batch_key=record.batch_key, levers=record.levers,
        skills=skills,
    ).run()
