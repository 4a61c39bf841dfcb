"""Episodic memory: what happened in an episode, retrieved by meaning, ranked by what helped before.

An item (a `CarrierItem` of kind memory) holds the task, its key steps (the highest-credit ones),
the outcome, the failure attribution and a lesson: successes and attributed failures alike.

Retrieval has two phases (MemRL):

1. Recall, hybrid: FTS5 BM25 over the store's `search` table plus cosine similarity of
   all-MiniLM-L6-v2 embeddings (brute force over in-memory matrices, one per scope), fused by
   reciprocal rank (RRF, k=60). Only items whose scope covers the query scope are candidates:
   global ⊇ family ⊇ project ⊇ task, so one project's memories never reach another project.
2. Re-rank the best fused candidates by a learned utility Q per item, updated after each episode
   that showed the item: Q ← Q + α(r − Q), one `memory_utility` row per update.

The active view is the ledger minus the revocation denylist, checked on every read and write: a
revoked item, or one derived from a revoked experience, is never returned nor (re-)admitted.
Without the embedding model, retrieval falls back to BM25 and says so in a logged warning; the
vectors it could not compute are filled in (`memory_vectors`, keyed by model) once it is back.
"""

from __future__ import annotations

import json
import logging
import math
import threading
import weakref
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import apsw
import numpy as np
from pydantic import JsonValue

from lle.actions import NO_ACTION, copies_placeholder
from lle.carriers.embeddings import DIM, Embedder, Vectors, shared_embedder
from lle.context.compress import clip_end
from lle.core import (
    ActionStatus,
    CarrierItem,
    CarrierKind,
    Experience,
    Outcome,
    Revocation,
    Scope,
    ScopeLevel,
    Step,
    Update,
    UpdateOp,
    canonical_json,
)
from lle.errors import InvalidInputError, ModelError, UnknownIdError
from lle.governance import hygiene
from lle.store import memory as rows
from lle.store.sqlite import Store

log = logging.getLogger(__name__)

RRF_K = 60
CANDIDATES = 50
"""Candidates each retriever contributes to the fusion."""
POOL = 20
"""Fused candidates the utility re-ranks (at least k)."""
UTILITY_WEIGHT = 0.3
"""λ in (1 − λ)·relevance + λ·Q, relevance being the fused score over the pool's best: utility
re-orders relevant memories, it cannot pull in an irrelevant one."""
MIN_SIMILARITY = 0.2
"""Dense candidates below this cosine are noise (unrelated sentences score ~0–0.15 in this model)."""
BM25_BUDGET = 1000
"""Most FTS rows one query may score. FTS5 spends a few µs per matching row on bm25(), so at 100k
items common words would cost 100+ ms: the rarest terms are kept within this budget (low-df terms
carry the IDF weight anyway); when even the rarest is too common, its AND with the next ones."""
KEY_STEPS = 3
Mode = Literal["hybrid", "bm25", "dense"]

# Words that match nearly every memory, our own field names among them.
_STOP_TEXT = """a an and are as at be been but by can could did do does for from had has have how i if in
into is it its me my no not of on or our should so than that the their them then there these they this those to was
we were what when where which while who why will with would you your task key_steps outcome attribution lesson kind
episode tool thought result credit index args reason steps pass fail unknown null true false world verification
score"""
STOPWORDS = frozenset(_STOP_TEXT.split())

_RANK = {ScopeLevel.episode: 0, ScopeLevel.task: 1, ScopeLevel.project: 2, ScopeLevel.family: 3, ScopeLevel.global_: 4}
ScopeKey = tuple[str, str | None, str | None, str | None]


def scope_key(scope: Scope) -> ScopeKey:
    """The part of a scope that decides visibility (fields finer than its level are ignored)."""
    rank = _RANK[scope.level]
    return (scope.level.value, scope.family if rank <= 3 else None, scope.project if rank <= 2 else None,
            scope.task_id if rank <= 1 else None)


def visible_keys(query: Scope) -> list[ScopeKey]:
    """Scope keys of the items a small world at `query` may read: those that cover it."""
    f, p, t = query.family, query.project, query.task_id
    levels = ((ScopeLevel.global_, ()), (ScopeLevel.family, (f,)), (ScopeLevel.project, (f, p)),
              (ScopeLevel.task, (f, p, t)), (ScopeLevel.episode, (f, p, t)))
    return [scope_key(Scope(level=level, family=f, project=p, task_id=t)) for level, needed in levels
            if _RANK[level] >= _RANK[query.level] and all(needed)]


def check_scope(scope: Scope) -> None:
    rank = _RANK[scope.level]
    missing = [name for name, needed, value in (("family", rank <= 3, scope.family),
                                                ("project", rank <= 2, scope.project),
                                                ("task_id", rank <= 1, scope.task_id)) if needed and not value]
    if missing:
        raise InvalidInputError(f"a {scope.level.value}-scoped memory needs {', '.join(missing)} in its scope")


def memory_text(content: JsonValue) -> str:
    """The text a memory is embedded by: task, lesson, attribution and key steps."""
    if not isinstance(content, dict):
        return canonical_json(content)
    parts = [str(content.get("task") or ""), str(content.get("lesson") or "")]
    attribution, steps = content.get("attribution"), content.get("key_steps")
    if isinstance(attribution, dict):
        parts.append(str(attribution.get("reason") or ""))
    parts += [f"{s.get('tool') or ''} {s.get('thought') or ''}" for s in (steps if isinstance(steps, list) else [])
              if isinstance(s, dict)]
    return "\n".join(p for p in parts if p.strip())


def memory_item_from(experience: Experience, *, level: ScopeLevel = ScopeLevel.project,
                     key_steps: int = KEY_STEPS) -> CarrierItem:
    """An episodic memory of an assessed experience, project-scoped unless `level` says otherwise."""
    sw, steps = experience.small_world, experience.steps
    _, family, project, task_id = scope_key(Scope(level=level, family=sw.family, project=sw.project, task_id=sw.id))
    scope = Scope(level=level, family=family, project=project, task_id=task_id)
    credit = experience.credit if len(experience.credit) == len(steps) else [0.0] * len(steps)
    best = sorted(sorted(range(len(steps)), key=lambda i: (-credit[i], -i))[:key_steps])
    chosen: list[JsonValue] = [{
        "index": steps[i].index, "tool": steps[i].executed.tool,
        "args": clip_end(canonical_json(steps[i].executed.args), 300),
        # A thought that copies the prompt's slot is not the model's plan: kept out, not stored as one.
        "thought": "" if copies_placeholder(steps[i].request.thought) else clip_end(steps[i].request.thought, 300),
        "result": clip_end(steps[i].effect.error or steps[i].effect.observation, 200), "credit": round(credit[i], 4),
    } for i in best]
    attribution = experience.attribution
    ran = [s for s in steps if s.executed.allowed and s.executed.tool != NO_ACTION]
    route = " → ".join(dict.fromkeys(map(_route_step, ran)))
    # Every step a plain answer (a chat without tool calls through the gateway): not a failure to act.
    plain = bool(steps) and all(s.request.tool == NO_ACTION and s.executed.allowed for s in steps)
    route = route or ("answering without tools" if plain else "no action")
    if experience.outcome is Outcome.passed:
        lesson = f"Succeeded ({experience.verification.value}) by {route}."
    elif attribution:
        # What was tried and what the anchor said: a lesson about this episode, not a template.
        said = [f"The {e.anchor} anchor said: {clip_end(str(e.detail.get('reason')), 160)}."
                for e in experience.evidence
                if e.outcome is Outcome.failed and isinstance(e.detail, dict) and e.detail.get("reason")][:1]
        lesson = " ".join([f"Failed at the {attribution.get('kind', 'unknown')} level after {route}: "
                           f"{attribution.get('reason', '')}.", *said])
    else:
        lesson = f"Outcome {experience.outcome.value}; no attribution."
    # A verifier's own diagnosis (its detail's `lesson`) says more than the route: keep it, never tool output.
    details = [d for e in experience.evidence if isinstance(d := e.detail, dict)]
    details += [inner for d in details if isinstance(inner := d.get("anchor_detail"), dict)]
    notes = [note.strip() for d in details if isinstance(note := d.get("lesson"), str) and note.strip()]
    lesson = " ".join([lesson, *dict.fromkeys(notes)])
    content: dict[str, JsonValue] = {
        # An aside that speaks for later tasks (a MINJA-style query) is kept as quoted data, never as the task.
        "kind": "episode", "task": clip_end(hygiene.quote_scope_claims(sw.goal), 1000), "world": sw.world,
        "outcome": experience.outcome.value,
        "verification": experience.verification.value, "score": experience.score, "key_steps": chosen,
        "attribution": attribution, "lesson": lesson,
    }
    decided = [e.id for e in experience.evidence if e.outcome is not Outcome.unknown]
    return CarrierItem(carrier=CarrierKind.memory, scope=scope, content=content, experience_ids=[experience.id],
                       evidence_ids=decided)


def _route_step(step: Step) -> str:
    """A step's tool in a lesson's route; one whose result never came back says so (it may not have run)."""
    unknown = step.executed.status is ActionStatus.not_reported
    return f"{step.executed.tool} (result not reported)" if unknown else step.executed.tool


@dataclass(frozen=True)
class Hit:
    """One retrieved memory and how it got there (ranks are 1-based, None: not found by that retriever)."""

    item_id: str
    score: float
    fused: float
    utility: float
    bm25_rank: int | None
    dense_rank: int | None


class _Block:
    """The items sharing one scope key, with a growable vector matrix."""

    def __init__(self) -> None:
        self.ids: list[str] = []
        self.vecs = np.zeros((16, DIM), dtype=np.float32)
        self.usable = np.zeros(16, dtype=bool)  # has a vector and is not revoked

    def add(self, item_id: str, vec: Vectors | None) -> int:
        row = len(self.ids)
        if row == len(self.vecs):  # doubling keeps admits amortised O(1)
            self.vecs = np.concatenate([self.vecs, np.zeros_like(self.vecs)])
            self.usable = np.concatenate([self.usable, np.zeros_like(self.usable)])
        self.ids.append(item_id)
        if vec is not None:
            self.vecs[row], self.usable[row] = vec, True
        return row


class MemoryCarrier:
    """The memory carrier over one store (implements the core `Carrier` protocol)."""

    kind = CarrierKind.memory

    def __init__(self, store: Store, *, embedder: Embedder | None = None, utility_weight: float = UTILITY_WEIGHT,
                 prior: float = 0.0, candidates: int = CANDIDATES, pool: int = POOL,
                 min_similarity: float = MIN_SIMILARITY, bm25_budget: int = BM25_BUDGET) -> None:
        self.store = store
        self.embedder = embedder if embedder is not None else shared_embedder()
        self.utility_weight, self.prior, self.candidates, self.pool = utility_weight, prior, candidates, pool
        self.min_similarity, self.bm25_budget = min_similarity, bm25_budget
        self._lock = threading.RLock()
        self._blocks: dict[ScopeKey, _Block] = {}
        self._where: dict[str, tuple[ScopeKey, int]] = {}
        self._lineage: dict[str, tuple[str, ...]] = {}
        self._q: dict[str, float] = {}
        self._missing: set[str] = set()  # items without a vector: found by BM25 only
        self._by_rowid: dict[int, str] = {}  # search-table rowid → item id
        self._active_rows: dict[int, ScopeKey] = {}  # search-table rowid → scope key, active items only
        self._seen = {"items": 0, "search": 0, "utility": 0}  # high-water rowids already folded in
        self._deny_count, self._denied, self._blocked = (-1, -1), frozenset[str](), set[str]()
        self._dense_ok: bool | None = None
        self._query_vecs: OrderedDict[str, Vectors] = OrderedDict()
        self._df: dict[str, int] = {}
        self._df_epoch = 0
        self._tokenize = rows.query_tokenizer(store)
        self._stop = {t for w in STOPWORDS for t in self._terms(w)}
        self._visible: set[ScopeKey] = set()
        me = weakref.ref(self)  # the connection must not keep the carrier alive

        def visible(rowid: int) -> bool:  # called per matching row: one lookup
            carrier = me()
            return carrier is not None and carrier._active_rows.get(rowid) in carrier._visible

        self._udf = f"lle_memory_visible_{id(self):x}"
        rows.add_row_filter(store, self._udf, visible)

    # --- the active view --------------------------------------------------------------------------

    def denied(self) -> frozenset[str]:
        """Every revoked id; re-read only when the revocations or experiences have grown (they never
        shrink; a new experience may copy revoked content under a new id, and is then revoked too)."""
        count = (self.store.count("revocations"), self.store.last_rowid("experiences"))
        if count != self._deny_count:
            self._denied, self._deny_count = frozenset(self.store.revoked_ids()), count
            self._blocked = {i for i, lineage in self._lineage.items() if not self._denied.isdisjoint(lineage)}
            self._active_rows = {r: self._where[i][0] for r, i in self._by_rowid.items() if i not in self._blocked}
            for block in self._blocks.values():
                block.usable[: len(block.ids)] = [i not in self._blocked and i not in self._missing for i in block.ids]
        return self._denied

    def _refuse_revoked(self, ids: Iterable[str], what: str) -> None:
        if blocked := next((i for i in ids if i in self.denied()), None):
            raise InvalidInputError(f"{what} derives from revoked {blocked}; revocations are final "
                                    "(record a new experience instead)")

    def refresh(self) -> None:
        """Fold in items, vectors and utilities written since the last read, by anyone."""
        with self._lock:
            seen, memory = self._seen, CarrierKind.memory.value
            top = self.store.last_rowid("carrier_items")
            if top > seen["items"]:
                self._index_rows([(i, b) for _, i, b in self.store.item_rows(memory, after=seen["items"], upto=top)])
                seen["items"] = top
                for rowid, ref_id in rows.search_rows(self.store, memory, after=seen["search"]):
                    if ref_id not in self._where and self.store.kind_of(ref_id):
                        break  # its item was committed after the read above: the next refresh takes both
                    self._by_rowid[rowid] = ref_id
                    if ref_id in self._where and ref_id not in self._blocked:
                        self._active_rows[rowid] = self._where[ref_id][0]
                    seen["search"] = rowid
            for seq, item_id, q in rows.utility_rows(self.store, after=seen["utility"]):
                self._q[item_id], seen["utility"] = q, seq
            self.denied()

    def _index_rows(self, found: Sequence[tuple[str, str]]) -> None:
        vectors = self._stored_vectors([item_id for item_id, _ in found])
        missing = [(item_id, raw) for item_id, raw in found if item_id not in vectors]
        if missing and self._dense_available():
            # Admitted while the model was unavailable (or under another model): embed them now.
            fresh = self.embedder.embed([memory_text(self.store.decode(raw).get("content")) for _, raw in missing])
            vectors.update((item_id, vec) for (item_id, _), vec in zip(missing, fresh, strict=True))
            if self.store.writable:
                self._add_vectors([item_id for item_id, _ in missing], fresh, ignore=True)
        for item_id, raw in found:
            body: dict[str, Any] = json.loads(raw)  # plain JSON is enough: scope and ids are never blobs
            lineage = (item_id, *body.get("experience_ids", ()), *body.get("evidence_ids", ()),
                       *body.get("derived_from", ()))
            key = scope_key(Scope.model_validate(body["scope"]))
            block = self._blocks.setdefault(key, _Block())
            row = block.add(item_id, vectors.get(item_id))
            self._where[item_id], self._lineage[item_id] = (key, row), lineage
            if item_id not in vectors:
                self._missing.add(item_id)
            if not self._denied.isdisjoint(lineage):
                self._blocked.add(item_id)
                block.usable[row] = False

    def _stored_vectors(self, ids: list[str]) -> dict[str, Vectors]:
        return {i: np.frombuffer(v, dtype="<f4").astype(np.float32)
                for i, v in rows.vectors(self.store, self.embedder.model_id, ids).items() if len(v) == DIM * 4}

    def _add_vectors(self, ids: Sequence[str], vecs: Vectors, *, ignore: bool = False) -> None:
        rows.add_vectors(self.store, self.embedder.model_id, DIM, ((item_id, np.asarray(vec, dtype="<f4").tobytes())
                                                                  for item_id, vec in zip(ids, vecs, strict=True)),
                         ignore=ignore)

    def _dense_available(self) -> bool:
        if self._dense_ok is None:
            self._dense_ok = self.embedder.available()
            if not self._dense_ok:  # once per carrier: every search after this one is BM25 only
                log.warning("memory retrieval falls back to BM25 only, and memories are admitted without embeddings "
                            "until the model is back: %s", self.embedder.unavailable_reason)
        return self._dense_ok

    # --- writing ----------------------------------------------------------------------------------

    def admit(self, item: CarrierItem, update: Update) -> None:
        """Store an admitted item, its update and its embedding in one transaction."""
        self.admit_many([(item, update)])

    def admit_many(self, pairs: Sequence[tuple[CarrierItem, Update]], *, vectors: Vectors | None = None) -> None:
        """Admit several items in one transaction, all or none; `vectors`: their embeddings by this
        carrier's embedder, precomputed (bulk imports), else they are embedded here."""
        for item, update in pairs:
            _check_admissible(item, update)
        with self._lock:
            self.refresh()
            for item, update in pairs:  # before the (slow) embedding: fail fast
                self._refuse_revoked(_sources(item, update), f"memory item {item.id}")
            if vectors is None and self._dense_available():
                vectors = self.embedder.embed([memory_text(item.content) for item, _ in pairs])
            if vectors is not None and vectors.shape != (len(pairs), DIM):
                raise InvalidInputError(f"vectors have shape {vectors.shape}, expected {(len(pairs), DIM)}")
            try:
                # One transaction, checked again under its lock: nothing slips in, and an item never
                # exists without its admit update and its vector.
                with self.store.transaction():
                    for item, update in pairs:
                        self._refuse_revoked(_sources(item, update), f"memory item {item.id}")
                        self.store.append_item(item)
                        self.store.append_update(update)
                    if vectors is not None:
                        self._add_vectors([item.id for item, _ in pairs], vectors)
            except apsw.ConstraintError as err:
                raise InvalidInputError(
                    f"{err}: a memory item among {[i.id for i, _ in pairs][:3]} or its update is already stored; "
                    "the ledger is append-only, give new items new ids") from err
            self.refresh()

    def revoke(self, item_id: str, revocation: Revocation) -> None:
        """Record `revocation` (unless stored already); `item_id` is then never returned nor re-admitted."""
        if item_id != revocation.target and item_id not in revocation.cascade:
            raise InvalidInputError(f"revocation {revocation.id} names {item_id} neither as target nor in its "
                                    "cascade; revoke with `lle revoke ITEM_ID --reason …`")
        with self._lock:
            if self.store.kind_of(revocation.id) is None:
                self.store.append_revocation(revocation)
            self.refresh()

    def update_utility(self, item_id: str, reward: float, alpha: float = 0.1, *,
                       experience_id: str | None = None) -> float:
        """Q ← Q + α(r − Q) for an item shown in an episode that earned `reward`; returns the new Q."""
        if not math.isfinite(reward) or not 0.0 < alpha <= 1.0:
            raise InvalidInputError(f"utility update of {item_id}: need a finite reward and 0 < alpha ≤ 1, "
                                    f"got reward={reward}, alpha={alpha}")
        with self._lock:
            self.refresh()
            if item_id not in self._where:
                raise UnknownIdError("memory item", item_id, "see `lle updates list --carrier memory`")
            with self.store.transaction():  # read and append under one lock: no update is lost
                self._refuse_revoked(self._lineage[item_id], f"memory item {item_id} (its utility is frozen)")
                latest = rows.latest_utility(self.store, item_id)
                old = self.prior if latest is None else latest
                new = old + alpha * (reward - old)
                rows.append_utility(self.store, item_id, reward=reward, alpha=alpha, q=new, experience_id=experience_id)
            self.refresh()
            return new

    def credit_episode(self, experience: Experience, alpha: float = 0.1) -> dict[str, float]:
        """Update the utility of every active memory the episode was shown: reward +1 on pass, −1 on fail."""
        reward = {Outcome.passed: 1.0, Outcome.failed: -1.0}.get(experience.outcome)
        if reward is None:
            return {}
        self.refresh()
        shown = dict.fromkeys(r for s in experience.steps for r in s.context_refs if r in self._where)
        return {i: self.update_utility(i, reward, alpha, experience_id=experience.id)
                for i in shown if i not in self._blocked}

    def utility(self, item_id: str) -> float:
        with self._lock:
            self.refresh()
            return self._q.get(item_id, self.prior)

    # --- reading ----------------------------------------------------------------------------------

    def retrieve(self, query: str, scope: Scope, k: int = 5) -> list[CarrierItem]:
        return self.items([hit.item_id for hit in self.search(query, scope, k)])

    def items(self, ids: Sequence[str]) -> list[CarrierItem]:
        """Stored memory items by id, in the order given, revoked ones left out."""
        with self._lock:
            self.refresh()
            return self.store.items_by_id([i for i in ids if i not in self._blocked | self._denied],
                                          CarrierKind.memory.value)

    def search(self, query: str, scope: Scope, k: int = 5, *, mode: Mode = "hybrid",
               use_utility: bool = True) -> list[Hit]:
        """The `k` best active memories visible from `scope`, with their rank in each retriever."""
        if k <= 0:
            return []
        with self._lock:
            self.refresh()
            keys = visible_keys(scope)
            bm25 = self._bm25(query, keys) if mode != "dense" else []
            dense: list[str] = []
            if mode != "bm25" and self._dense_available():
                dense = self._dense(query, keys)
            elif mode == "dense":
                raise ModelError(f"dense-only search needs the embedding model: {self.embedder.unavailable_reason}")
            ranks = [{item_id: r for r, item_id in enumerate(found, start=1)} for found in (bm25, dense)]
            fused: dict[str, float] = {}
            for ranking in ranks:
                for item_id, r in ranking.items():
                    fused[item_id] = fused.get(item_id, 0.0) + 1.0 / (RRF_K + r)
            pool = sorted(fused, key=lambda i: (-fused[i], i))[: max(self.pool, k)]
            lam = self.utility_weight if use_utility else 0.0
            hits = [Hit(i, (1 - lam) * fused[i] / fused[pool[0]] + lam * self._q.get(i, self.prior), fused[i],
                        self._q.get(i, self.prior), ranks[0].get(i), ranks[1].get(i)) for i in pool]
            return sorted(hits, key=lambda h: (-h.score, -h.fused, h.item_id))[:k]

    def _terms(self, text: str) -> dict[str, str]:
        """stem → the word as written, for the words FTS5 would index (the query repeats the word, not
        the stem: porter is not idempotent)."""
        data = text.encode()
        found = self._tokenize(data)
        return {stem: data[a:b].decode(errors="ignore") for a, b, stem in reversed(found)}

    def _doc_freq(self, word: str) -> int:
        # Counted up to a cap, so a very common word costs a bounded scan, and cached until the
        # store has grown by a tenth.
        if len(self._where) > self._df_epoch * 1.1 + 100:
            self._df, self._df_epoch = {}, len(self._where)
        if word not in self._df:
            self._df[word] = rows.doc_freq(self.store, _quote(word), cap=10 * self.bm25_budget)
        return self._df[word]

    def _bm25(self, query: str, keys: list[ScopeKey]) -> list[str]:
        terms = {s: w for s, w in self._terms(query).items() if s not in self._stop} or self._terms(query)
        by_df = sorted((df, word) for word in dict.fromkeys(terms.values()) if (df := self._doc_freq(word)) > 0)
        if not by_df:
            return []
        chosen, total = [], 0
        for df, word in by_df:
            if total + df > self.bm25_budget:
                break
            chosen.append(_quote(word))
            total += df
        match = " OR ".join(chosen) if chosen else " AND ".join(_quote(w) for _, w in by_df[:3])
        self._visible = set(keys)
        # Scope and revocation are checked per row before bm25() is computed, so neither invisible
        # rows nor common words can crowd the visible ones out of the LIMIT.
        return [self._by_rowid[r] for r in rows.matching_rowids(self.store, match, self._udf, limit=self.candidates)]

    def _dense(self, query: str, keys: list[ScopeKey]) -> list[str]:
        vec = self._query_vecs.get(query)
        if vec is None:  # an agent asks with the same goal at every step of an episode: keep recent ones
            vec = self._query_vecs[query] = self.embedder.embed_one(query)
            if len(self._query_vecs) > 256:
                self._query_vecs.popitem(last=False)
        blocks = [self._blocks[key] for key in keys if key in self._blocks and self._blocks[key].ids]
        if not blocks:
            return []
        # np.vecdot, not `@`: a matrix-vector product through multithreaded OpenBLAS stalls for
        # milliseconds on a busy machine, vecdot's single-threaded SIMD loop does not.
        flat = np.concatenate([np.where(b.usable[: len(b.ids)], np.vecdot(b.vecs[: len(b.ids)], vec), -np.inf)
                               for b in blocks])
        starts = np.cumsum([0] + [len(b.ids) for b in blocks])
        c = min(self.candidates, len(flat))
        best = np.argpartition(-flat, c - 1)[:c]
        out = []
        for i in best[np.argsort(-flat[best], kind="stable")]:
            if flat[i] >= self.min_similarity:
                j = int(np.searchsorted(starts, i, side="right")) - 1
                out.append(blocks[j].ids[int(i - starts[j])])
        return out


def _quote(word: str) -> str:
    return '"' + word.replace('"', '""') + '"'


def _sources(item: CarrierItem, update: Update) -> tuple[str, ...]:
    return (item.id, *item.experience_ids, *item.evidence_ids, *item.derived_from, *update.experience_ids,
            *update.evidence_ids)


def _check_admissible(item: CarrierItem, update: Update) -> None:
    if item.carrier is not CarrierKind.memory or update.carrier is not CarrierKind.memory:
        raise InvalidInputError(f"item {item.id} is for the {item.carrier.value} carrier (update: "
                                f"{update.carrier.value}); the memory carrier admits only memory items")
    if update.op is not UpdateOp.admit or update.item_id != item.id:
        raise InvalidInputError(f"update {update.id} must be an admit of item {item.id} "
                                f"(got op={update.op.value}, item_id={update.item_id})")
    if not isinstance(item.content, dict):
        raise InvalidInputError(f"memory item {item.id}: content must be a JSON object (task, lesson, …); "
                                "build it with memory_item_from(experience)")
    check_scope(item.scope)

