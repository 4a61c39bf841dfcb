"""The store's named functions (episodes, lookups, memory rows, exports, routed marks, revoked content)
on both backends: the SQL that differs per dialect gives the same answers."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

import pytest

from lle.config import Levers
from lle.core import (
    CarrierItem,
    CarrierKind,
    Evidence,
    Experience,
    Feedback,
    Limits,
    Outcome,
    PolicyInfo,
    Scope,
    ScopeLevel,
    SmallWorld,
    Split,
    Strength,
)
from lle.errors import InvalidInputError
from lle.store import Store, content, experiences, exports, flywheel, memory
from lle.store.episodes import EpisodeRecord, batch_episodes, begin_episode, get_episode, is_finished, list_episodes

MakeExperience = Callable[..., Experience]


def test_episodes_begin_resume_and_finish(store: Store, make_experience: MakeExperience) -> None:
    exp = make_experience(4)
    record = EpisodeRecord(id=exp.id, small_world=exp.small_world, policy=PolicyInfo(model="scripted"),
                           limits=Limits(max_steps=7), initial_observation="hello", batch="b1", batch_key="k#0")
    begin_episode(store, record)
    with pytest.raises(InvalidInputError, match="already recorded"):
        begin_episode(store, record)
    for step in exp.steps[:2]:
        store.append_step(exp.id, step)
    assert store.steps_of(exp.id) == exp.steps[:2]
    assert get_episode(store, exp.id) == record and batch_episodes(store, "b1") == {"k#0": record}
    assert [(r.id, n, done) for r, n, done in list_episodes(store, unfinished=True)] == [(exp.id, 2, False)]
    assert not is_finished(store, exp.id)
    store.append_experience(exp)  # the two committed steps are kept, the rest written with the record
    assert is_finished(store, exp.id) and store.get_experience(exp.id) == exp
    assert list_episodes(store, unfinished=True) == [] and list_episodes(store)[0][1:] == (4, True)
    assert flywheel.batch_results(store, "b") == [("b1", exp.id, exp.small_world.world, "pass", 4)]
    assert flywheel.batches(store, "b1") == {exp.id: "b1"}


def test_experience_lookups(store: Store, make_experience: MakeExperience) -> None:
    a = make_experience()
    step = a.steps[0].model_copy(update={"feedback": [Feedback(source="skill", kind="skill_call",
                                                                content={"skill": "count_rows"})]})
    a = store.append_experience(a.model_copy(update={"steps": [step, *a.steps[1:]], "world_version": "2",
                                                     "content_hash": None}))
    b = store.append_experience(make_experience(project="library"))
    assert experiences.all_ids(store) == sorted([a.id, b.id])
    assert experiences.of_world(store, "sql/shop-v1") == [a.id]
    assert experiences.of_world(store, "sql/shop-v1", "2") == [a.id]
    assert experiences.of_world(store, "sql/shop-v1", "1") == []
    assert sorted(experiences.of_model(store, "scripted")) == sorted([a.id, b.id])
    assert experiences.created_between(store, "2000", "9999") != []
    assert experiences.latest(store, family="sql", split="train", outcome="pass", verification=["none"],
                              limit=1) == [b.id]
    assert experiences.feedback_outcomes(store, "skill_call", "count_rows") == [(a.id, "pass")]
    assert experiences.feedback_outcomes(store, "skill_call", "other") == []
    later = Evidence(experience_id=b.id, anchor="human", outcome=Outcome.failed, strength=Strength.hard,
                     scope=Scope(level=ScopeLevel.task))
    store.append_evidence(later)
    assert experiences.with_later_evidence(store) == [b.id]
    assert experiences.evidence_ids(store, b.id)[-1] == later.id
    assert len(store.evidence_for(b.id)) == 2 and store.get_experience(b.id) == b


def test_the_arms_of_the_skills_measured_use(store: Store, make_experience: MakeExperience) -> None:
    found = []
    for arm, split, project in [("with", Split.train, "shop"), ("without", Split.train, "library"),
                                (None, Split.train, "zoo"), ("with", Split.dev, "shop")]:
        exp = make_experience(split=split, project=project)
        record = EpisodeRecord(id=exp.id, small_world=exp.small_world, policy=PolicyInfo(model="scripted"),
                               limits=Limits(), initial_observation="hi", levers=Levers(skills_arm=arm))
        begin_episode(store, record)
        store.append_experience(exp)
        found.append((exp.id, arm, "pass", exp.small_world, record.started_at))
    rows = experiences.skills_arms(store, "sql")  # train only, with an arm, in start order
    assert [(i, a, o, SmallWorld.model_validate_json(w), datetime.fromisoformat(t)) for i, a, o, w, t in rows] == \
        found[:2]
    assert experiences.skills_arms(store, "toy") == []


def test_memory_rows_vectors_utility_and_filtered_ranking(store: Store) -> None:
    scope = Scope(level=ScopeLevel.global_)
    texts = ["count the orders placed in May", "orders are stored per customer", "the weather in May is mild"]
    items = [CarrierItem(carrier=CarrierKind.memory, scope=scope, content={"text": t}) for t in texts]
    for item in items:
        store.append_item(item)
    rows = memory.search_rows(store, "memory", after=0)
    assert [i for _, i in rows] == [i.id for i in items]
    tokenize = memory.query_tokenizer(store)
    stems = [stem for _, _, stem in tokenize(b"Orders placed")]
    assert stems == ["order", "place"]
    start, end, _ = tokenize("héllo orders".encode())[-1]
    assert "héllo orders".encode()[start:end] == b"orders"
    assert memory.doc_freq(store, '"orders"', cap=10) == 2 and memory.doc_freq(store, '"orders"', cap=1) == 1
    keep = {rows[1][0], rows[2][0]}
    memory.add_row_filter(store, "lle_test_keep", lambda rowid: rowid in keep)
    assert memory.matching_rowids(store, '"orders" OR "May"', "lle_test_keep", limit=5) != []
    assert set(memory.matching_rowids(store, '"orders" OR "May"', "lle_test_keep", limit=5)) == keep
    assert memory.matching_rowids(store, '"orders" AND "May"', "lle_test_keep", limit=5) == []
    memory.add_vectors(store, "m1", 2, [(items[0].id, b"\x00" * 8), (items[1].id, b"\x01" * 8)])
    memory.add_vectors(store, "m1", 2, [(items[0].id, b"\x02" * 8)], ignore=True)  # kept as stored
    assert memory.vectors(store, "m1", [items[0].id, "itm_none"]) == {items[0].id: b"\x00" * 8}
    assert memory.latest_utility(store, items[0].id) is None
    memory.append_utility(store, items[0].id, reward=1.0, alpha=0.5, q=0.5, experience_id=None)
    memory.append_utility(store, items[0].id, reward=1.0, alpha=0.5, q=0.75, experience_id="exp_x")
    assert memory.latest_utility(store, items[0].id) == 0.75
    seqs = memory.utility_rows(store, after=0)
    assert [q for _, _, q in seqs] == [0.5, 0.75] and memory.utility_rows(store, after=seqs[0][0])[0][2] == 0.75


def test_exports_routed_marks_and_revoked_content(store: Store, make_experience: MakeExperience) -> None:
    exp = store.append_experience(make_experience())
    snap = exports.SnapshotRow("snap_1", "sft", 1, "sha", "/tmp/x.jsonl", "2026-01-01", "{}")
    exports.record_snapshot(store, snap, [(0, exp.id, "itm_1"), (0, exp.id, "itm_1")])
    assert exports.snapshots(store) == [snap] and exports.snapshot_sources(store) == [("snap_1", exp.id, "itm_1")]
    assert not flywheel.is_routed(store, exp.id)
    flywheel.mark_routed(store, exp.id, "run1")
    flywheel.mark_routed(store, exp.id, "run2")  # once: marking again changes nothing
    assert flywheel.is_routed(store, exp.id) and store.count("experiences") == 1
    content.record_revoked(store, "rev_1", [(exp.id, kind, digest) for kind, digest in content.hashes_of(exp)])
    hashes = content.revoked_hashes(store, [])
    assert set(hashes) == {h for _, h in content.hashes_of(exp)}
    assert content.copies_of(store, hashes) == {exp.id: exp.id}
