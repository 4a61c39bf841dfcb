"""The episodic-memory carrier's own tests, run again on both backends through this folder's `store`
fixture: hybrid retrieval (FTS + application-side vectors), scope, revocation and utility behave the
same on PostgreSQL (tsvector, no pgvector) as on SQLite (FTS5)."""

from __future__ import annotations

from carriers.test_memory import (
    test_admit_writes_item_update_and_vector_in_one_go,
    test_credit_episode_rewards_the_memories_it_was_shown,
    test_revoked_items_are_never_returned_nor_readmitted,
    test_scope_filtering,
    test_utility_updates_change_the_ranking,
)

__all__ = [
    "test_admit_writes_item_update_and_vector_in_one_go",
    "test_credit_episode_rewards_the_memories_it_was_shown",
    "test_revoked_items_are_never_returned_nor_readmitted",
    "test_scope_filtering",
    "test_utility_updates_change_the_ranking",
]
