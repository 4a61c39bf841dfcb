"""A long-lived memory carrier (incremental high-water marks, cached query vectors, per-scope vector
blocks) ranks exactly as a reader built from the rows at that moment, and as a plain scan of the
stored vectors, also after another connection admits items and revokes one."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np

from lle.carriers.memory import MIN_SIMILARITY, MemoryCarrier, scope_key, visible_keys
from lle.core import CarrierItem, CarrierKind, Revocation, Scope, ScopeLevel, Update, UpdateOp
from lle.store import Store
from lle.store import memory as rows

_WORDS_TEXT = """orders revenue cents dollars refunds customers invoices discount coupon shipping warehouse
stock inventory supplier parser tokenizer regex exponent recursion stack tests fixture login session
token cache timezone migration kitchen knife oven fridge recipe carrot potato coin door map room
fraction percent average division units speed hours minutes join group distinct null schema column"""
WORDS = _WORDS_TEXT.split()
SCOPES = [Scope(level=ScopeLevel.global_), Scope(level=ScopeLevel.family, family="sql"),
          Scope(level=ScopeLevel.family, family="code"), Scope(level=ScopeLevel.project, family="sql", project="shop"),
          Scope(level=ScopeLevel.project, family="sql", project="library"),
          Scope(level=ScopeLevel.project, family="code", project="parser")]
WHERE = [Scope(level=ScopeLevel.task, family="sql", project="shop", task_id="sql/shop:t1"),
         Scope(level=ScopeLevel.task, family="code", project="parser", task_id="code/parser:t2"),
         Scope(level=ScopeLevel.global_)]
QUERIES = ["refunds in cents and dollars", "tokenizer regex for the exponent", "knife before the carrot",
           "average speed in hours", "customers join orders distinct", "cache the login session token"]


def items(rng: random.Random, n: int) -> list[tuple[CarrierItem, Update]]:
    out = []
    for _ in range(n):
        item = CarrierItem(carrier=CarrierKind.memory, scope=rng.choice(SCOPES),
                           content={"task": " ".join(rng.sample(WORDS, 5)), "lesson": " ".join(rng.sample(WORDS, 8))})
        out.append((item, Update(carrier=CarrierKind.memory, op=UpdateOp.admit, item_id=item.id, scope=item.scope)))
    return out


def plain_dense(store: Store, carrier: MemoryCarrier, query: str, scope: Scope) -> list[str]:
    """The dense ranking the slow way: every stored vector read back and scored, nothing cached."""
    keys, denied = set(visible_keys(scope)), store.revoked_ids()
    found = [i for i in store.carrier_items("memory") if scope_key(i.scope) in keys
             and denied.isdisjoint((i.id, *i.experience_ids, *i.evidence_ids, *i.derived_from))]
    stored = rows.vectors(store, carrier.embedder.model_id, [i.id for i in found])
    vec = carrier.embedder.embed_one(query)
    scored = [(float(np.frombuffer(stored[i.id], dtype="<f4") @ vec), i.id) for i in found]
    best = sorted(scored, key=lambda s: -s[0])[:carrier.candidates]
    return [i for score, i in best if score >= MIN_SIMILARITY]


def assert_same_ranking(live: MemoryCarrier, path: Path) -> None:
    with Store(path) as fresh_store:
        fresh = MemoryCarrier(fresh_store, embedder=live.embedder)
        for query in QUERIES:
            for where in WHERE:
                for mode in ("hybrid", "bm25", "dense"):
                    got = live.search(query, where, 20, mode=mode)  # type: ignore[arg-type]
                    assert got == fresh.search(query, where, 20, mode=mode), (query, where, mode)  # type: ignore[arg-type]
                dense = [h.item_id for h in sorted(live.search(query, where, 20, mode="dense", use_utility=False),
                                                   key=lambda h: h.dense_rank or 0)]
                assert dense == plain_dense(fresh_store, live, query, where)[:20], (query, where)


def test_a_long_lived_carrier_ranks_as_a_fresh_reader_after_admits_and_revokes(tmp_path: Path) -> None:
    path, rng = tmp_path / "lle.db", random.Random(40)
    with Store(path) as store, Store(path) as other_store:
        live = MemoryCarrier(store)
        live.admit_many(items(rng, 300))
        for query in QUERIES:  # fills the query-vector cache and the document-frequency cache
            live.search(query, WHERE[0], 5)
        assert_same_ranking(live, path)

        # Another connection admits: one item is the first query's own text, so it must rank first.
        writer = MemoryCarrier(other_store, embedder=live.embedder)
        exact = CarrierItem(carrier=CarrierKind.memory, scope=SCOPES[3], content={"task": QUERIES[0], "lesson": ""})
        writer.admit_many([*items(rng, 40), (exact, Update(carrier=CarrierKind.memory, op=UpdateOp.admit,
                                                          item_id=exact.id, scope=exact.scope))])
        assert live.search(QUERIES[0], WHERE[0], 1, mode="dense")[0].item_id == exact.id
        assert_same_ranking(live, path)

        # ... and revokes it: the cached query vector must not bring the revoked item back.
        other_store.append_revocation(Revocation(target=exact.id, reason="wrong lesson", author="test"))
        for query in QUERIES:
            for where in WHERE:
                assert exact.id not in {h.item_id for h in live.search(query, where, 50)}
        assert live.items([exact.id]) == []
        assert_same_ranking(live, path)
