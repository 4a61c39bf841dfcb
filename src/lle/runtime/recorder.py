"""Recording and resume: every step is committed before the next begins; a killed episode continues.

The episode row (store/episodes.py) is committed before the first step, each step in its own
transaction as it happens (`Store.append_step`), and the experience row at the end
(`append_experience` skips the steps already stored). An episode is finished exactly when its
experiences row exists, and the ledger's primary keys make that happen at most once.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from lle.core import ContextBuilder, Experience, Policy, Step, canonical_json
from lle.errors import InvalidInputError
from lle.store import Store
from lle.store.episodes import EpisodeRecord, begin_episode, get_episode, is_finished

if TYPE_CHECKING:
    from lle.worlds.base import ToolWorld

OnCommit = Callable[[str, Step], None]
Assessor = Callable[[Experience], Experience]
"""Turns the recorded experience into an assessed one (evidence, outcome) before it is written."""


class Recorder(Protocol):
    """Where the harness sends an episode: its start, each step (durable on return), its end."""

    def begin(self, record: EpisodeRecord) -> None: ...

    def commit(self, episode_id: str, step: Step) -> None: ...

    def finish(self, experience: Experience) -> Experience: ...


class NullRecorder:
    """Keeps nothing: for runs without a store (the experience is still returned, assessed and sealed)."""

    def __init__(self, *, assess: Assessor | None = None) -> None:
        self.assess = assess

    def begin(self, record: EpisodeRecord) -> None:
        pass

    def commit(self, episode_id: str, step: Step) -> None:
        pass

    def finish(self, experience: Experience) -> Experience:
        return (self.assess(experience) if self.assess else experience).sealed()


class StoreRecorder:
    """Commits to a `Store`; `on_commit(episode_id, step)` runs after each step is durable."""

    def __init__(self, store: Store, *, on_commit: OnCommit | None = None, assess: Assessor | None = None) -> None:
        self.store = store
        self.on_commit = on_commit
        self.assess = assess

    def begin(self, record: EpisodeRecord) -> None:
        begin_episode(self.store, record)

    def commit(self, episode_id: str, step: Step) -> None:
        self.store.append_step(episode_id, step)
        if self.on_commit is not None:
            self.on_commit(episode_id, step)

    def finish(self, experience: Experience) -> Experience:
        if is_finished(self.store, experience.id):
            # Only a second resume of the same episode gets here; the first record stands.
            return self.store.get_experience(experience.id)
        return self.store.append_experience(self.assess(experience) if self.assess else experience)


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
) -> Experience:
    """Continue a killed episode from its last committed step and return its experience.

    The world is rebuilt from the recorded small world, seed and world options; the committed
    steps' executed actions are replayed and must give the recorded observations. The policy is
    `policy`, else rebuilt from the recorded spec (a scripted policy's sha256 must still match).
    An already finished episode is returned as stored.
    """
    from lle.policies import load_policy, policy_info
    from lle.runtime.harness import Episode  # the harness imports this module

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
        record_timings=record_timings, batch=record.batch, batch_key=record.batch_key,
    ).run()


def timing_free_hash(experience: Experience) -> str:
    """Content hash with measured durations zeroed: equal for two runs of a deterministic episode."""
    body = experience.model_dump(mode="json", exclude={"id", "content_hash", "created_at"})
    for step in body["steps"]:
        step["executed"]["duration_ms"] = 0.0
        if step.get("llm"):
            step["llm"]["latency_ms"] = 0.0
    return "sha256:" + hashlib.sha256(canonical_json(body).encode()).hexdigest()
