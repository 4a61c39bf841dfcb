"""Recording: every step is committed before the next begins, so a killed episode can continue (`resume.py`).

The episode row (store/episodes.py) is committed before the first step, each step in its own
transaction as it happens (`Store.append_step`), and the experience row at the end
(`append_experience` skips the steps already stored). An episode is finished exactly when its
experiences row exists, and the ledger's primary keys make that happen at most once.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Protocol

from lle.core import Experience, Step, canonical_json
from lle.store import Store
from lle.store.episodes import EpisodeRecord, begin_episode, is_finished

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


def timing_free_hash(experience: Experience) -> str:
    """Content hash with measured durations zeroed: equal for two runs of a deterministic episode."""
    body = experience.model_dump(mode="json", exclude={"id", "content_hash", "created_at"})
    for step in body["steps"]:
        step["executed"]["duration_ms"] = 0.0
        if step.get("llm"):
            step["llm"]["latency_ms"] = 0.0
    return "sha256:" + hashlib.sha256(canonical_json(body).encode()).hexdigest()
