"""Memory retrieval latency and admission throughput at 1k, 10k and 100k items, on both store
backends side by side (SQLite's FTS5, PostgreSQL's tsvector; vectors ranked by the application on
both); prints JSON.

    .venv/bin/python benchmarks/retrieval.py [--sizes 1000,10000,100000] [--queries 200]
        [--backends sqlite,postgres] [--store-url postgresql://…  (empty databases are made on its server)]

PostgreSQL is a throwaway local server with fsync on (over its unix socket) unless --store-url
names a server; a fresh database is made there for each store (its user must be allowed to).

Items are synthetic memories (a task of 6-10 and a lesson of 12-20 real words drawn Zipf-like, so
FTS doc frequencies have a real corpus's long tail) spread over 5 families x 10 projects: 70% project-,
20% family-, 10% globally scoped. A query comes from one project's task, so it sees the global
items, its family's and its project's. A second 100k store puts every item in global scope: the
worst case, where the dense scan covers all 100k vectors.

Vectors come from the real embedder when embedding all texts fits in ~3 minutes here; otherwise
10k texts are embedded for real and tiled with a small perturbation (`vectors` in the JSON says
which). Latencies per query: `end_to_end` is `search()` on a new query (embedding it included),
`index` is the same with the query vector already cached (FTS + scan + fusion + utility),
`numpy_scan_all_*` is a plain brute-force scan + top-50 over all N vectors for comparison: `M @ q`
(multithreaded OpenBLAS) and `np.vecdot(M, q)` (single-threaded SIMD, what the carrier uses).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from lle.carriers.embeddings import Embedder, shared_embedder, tokenizer_path
from lle.carriers.memory import MemoryCarrier, visible_keys
from lle.core import CarrierItem, CarrierKind, Scope, ScopeLevel, Update, UpdateOp
from lle.store import Store
from lle.store.pg_server import TempServer


def vocabulary() -> list[str]:
    """Real English words in rough frequency order: BERT's vocabulary lists whole words by frequency."""
    vocab = json.loads(tokenizer_path().read_text())["model"]["vocab"]
    words = sorted((i, w) for w, i in vocab.items() if w.isalpha() and w.isascii() and len(w) > 2 and i >= 1996)
    return [w for _, w in words]


class Texts:
    """Word salad drawn Zipf-like (p ∝ 1/rank) from ~20k real words, so FTS doc frequencies have the
    long tail of a real corpus: a few words in many memories, most in few."""

    def __init__(self, seed: int) -> None:
        self.words = vocabulary()
        weights = 1.0 / np.arange(1, len(self.words) + 1)
        self.cdf = np.cumsum(weights) / weights.sum()
        self.rng = np.random.default_rng(seed)

    def sample(self, n: int) -> str:
        picks = np.searchsorted(self.cdf, self.rng.random(n))
        return " ".join(self.words[min(i, len(self.words) - 1)] for i in picks)

    def memory(self) -> tuple[str, str]:
        return self.sample(int(self.rng.integers(6, 11))), self.sample(int(self.rng.integers(12, 21)))


def scope_for(i: int, rng: random.Random, all_global: bool) -> Scope:
    if all_global:
        return Scope(level=ScopeLevel.global_)
    fam, proj, roll = f"f{rng.randrange(5)}", f"p{rng.randrange(10)}", rng.random()
    if roll < 0.1:
        return Scope(level=ScopeLevel.global_)
    if roll < 0.3:
        return Scope(level=ScopeLevel.family, family=fam)
    return Scope(level=ScopeLevel.project, family=fam, project=proj)


def percentiles(samples: list[float]) -> dict[str, float]:
    ms = np.array(samples) * 1000
    return {"p50_ms": round(float(np.percentile(ms, 50)), 3), "p95_ms": round(float(np.percentile(ms, 95)), 3)}


def timed(fn: Callable[[], Any], reps: list[Any]) -> list[float]:
    out = []
    for _ in reps:
        start = time.perf_counter()
        fn()
        out.append(time.perf_counter() - start)
    return out


def make_vectors(embedder: Embedder, texts: list[str], budget_s: float) -> tuple[np.ndarray, str]:
    probe = texts[:500]
    start = time.perf_counter()
    first = embedder.embed(probe)
    rate = len(probe) / (time.perf_counter() - start)
    if len(texts) / rate <= budget_s:
        rest = embedder.embed(texts[len(probe):]) if len(texts) > len(probe) else np.zeros((0, first.shape[1]))
        return np.concatenate([first, rest]).astype(np.float32), f"real: all {len(texts)} embedded ({rate:.0f}/s)"
    real_n = min(10_000, len(texts))
    base = np.concatenate([first, embedder.embed(texts[len(probe):real_n])])
    rng = np.random.default_rng(0)
    tiled = np.resize(base, (len(texts), base.shape[1])) + rng.normal(0, 0.02, (len(texts), base.shape[1]))
    tiled[:real_n] = base
    tiled /= np.linalg.norm(tiled, axis=1, keepdims=True)
    return tiled.astype(np.float32), (f"{real_n} embedded for real ({rate:.0f}/s; all {len(texts)} would take "
                                      f"~{len(texts) / rate:.0f} s), tiled with N(0, 0.02) noise and renormalised")


def build(path: str, n: int, vectors: np.ndarray, texts: list[tuple[str, str]], all_global: bool,
          embedder: Embedder) -> tuple[MemoryCarrier, float]:
    store = Store(path)
    carrier = MemoryCarrier(store, embedder=embedder)
    rng = random.Random(n)
    admit_s = 0.0
    for start in range(0, n, 2000):
        pairs = []
        for i in range(start, min(n, start + 2000)):
            task, lesson = texts[i]
            item = CarrierItem(carrier=CarrierKind.memory, scope=scope_for(i, rng, all_global),
                               content={"task": task, "lesson": lesson, "outcome": "pass"})
            pairs.append((item, Update(carrier=CarrierKind.memory, op=UpdateOp.admit, item_id=item.id,
                                       scope=item.scope)))
        begin = time.perf_counter()
        carrier.admit_many(pairs, vectors=vectors[start:start + len(pairs)])
        admit_s += time.perf_counter() - begin
    return carrier, n / admit_s


def measure(carrier: MemoryCarrier, vectors: np.ndarray, queries: list[str], n: int) -> dict[str, Any]:
    """Each query runs every variant back to back, so a busy machine weighs on all of them alike
    (except the multithreaded `M @ q`, measured after the others)."""
    where = Scope(level=ScopeLevel.task, family="f1", project="p3", task_id="f1/p3:task-1")
    carrier.search("warm up the index", where, 5)
    matrix = vectors[:n]
    runs: dict[str, list[float]] = {k: [] for k in ("end_to_end", "index", "bm25_only", "dense_only",
                                                    "numpy_scan_all_matmul", "numpy_scan_all_vecdot")}

    def clock(name: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
        start = time.perf_counter()
        fn(*args, **kwargs)
        runs[name].append(time.perf_counter() - start)

    for q in queries:
        clock("end_to_end", carrier.search, q, where, 5)
        clock("index", carrier.search, q, where, 5)  # the query vector is cached now
        clock("bm25_only", carrier.search, q, where, 5, mode="bm25")
        clock("dense_only", carrier.search, q, where, 5, mode="dense")
        clock("numpy_scan_all_vecdot", lambda v: _top(np.vecdot(matrix, v)), carrier._query_vecs[q])
    # Apart: OpenBLAS threads keep spinning after a call and would slow whatever runs next.
    for q in queries:
        clock("numpy_scan_all_matmul", lambda v: _top(matrix @ v), carrier._query_vecs[q])
    visible = sum(len(carrier._blocks[k].ids) for k in carrier._blocks if k in set(visible_keys(where)))
    return {"visible_items": visible, **{name: percentiles(samples) for name, samples in runs.items()}}


def _top(scores: np.ndarray, k: int = 50) -> np.ndarray:
    top = np.argpartition(-scores, k)[:k]
    return top[np.argsort(-scores[top])]


def single_admits(path: str, embedder: Embedder, texts: list[tuple[str, str]], count: int) -> float:
    """Items/s through `admit` one at a time: embedding and one durable commit each, as the router does."""
    with Store(path) as store:
        carrier = MemoryCarrier(store, embedder=embedder)
        start = time.perf_counter()
        for task, lesson in texts[:count]:
            item = CarrierItem(carrier=CarrierKind.memory, scope=Scope(level=ScopeLevel.global_),
                               content={"task": task, "lesson": lesson})
            carrier.admit(item, Update(carrier=CarrierKind.memory, op=UpdateOp.admit, item_id=item.id,
                                       scope=item.scope))
        return count / (time.perf_counter() - start)


def fresh_stores(backend: str, folder: Path, server_url: str | None) -> Callable[[str], str]:
    """name -> the location of a new empty store: a file in `folder`, or a new database on the server."""
    def fresh(name: str) -> str:
        if backend == "postgres":
            assert server_url is not None
            return TempServer.database_on(server_url)
        return str(folder / f"{name}.db")

    return fresh


def measure_backend(fresh: Callable[[str], str], embedder: Embedder, texts: list[tuple[str, str]],
                    vectors: np.ndarray, queries: list[str], sizes: list[int], worst_case: bool) -> dict[str, Any]:
    """One backend's figures; `fresh(name)` is the location of a new empty store."""
    out: dict[str, Any] = {"admit_single_items_per_s": round(single_admits(fresh("single"), embedder, texts, 100), 1),
                           "sizes": {}}
    for n in sizes:
        carrier, rate = build(fresh(f"m{n}"), n, vectors, texts, False, embedder)
        out["sizes"][str(n)] = {"admit_batch_items_per_s": round(rate, 1), **measure(carrier, vectors, queries, n)}
        carrier.store.close()
    if worst_case:
        n = max(sizes)
        carrier, rate = build(fresh("global"), n, vectors, texts, True, embedder)
        out["sizes"][f"{n}_all_global"] = {"admit_batch_items_per_s": round(rate, 1),
                                           **measure(carrier, vectors, queries, n)}
        carrier.store.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--embed-budget-s", type=float, default=180.0)
    parser.add_argument("--skip-worst-case", action="store_true")
    parser.add_argument("--vectors-cache", help="a .npy file: reuse the vectors of an earlier run with the same sizes")
    parser.add_argument("--backends", default="sqlite,postgres")
    parser.add_argument("--store-url", help="a PostgreSQL server (any database on it) instead of a throwaway one")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    embedder = shared_embedder()
    if not embedder.available():
        sys.exit(f"the embedding model is needed: {embedder.unavailable_reason}")
    gen = Texts(7)
    texts = [gen.memory() for _ in range(max(sizes))]
    queries = [gen.sample(int(gen.rng.integers(5, 10))) for _ in range(args.queries)]
    probes = [gen.sample(8) for _ in range(50)]
    query_embed = timed(lambda: embedder.embed_one(probes.pop()), [None] * 50)
    cache = Path(args.vectors_cache) if args.vectors_cache else None
    if cache and cache.exists():
        vectors, how = np.load(cache), cache.with_suffix(".txt").read_text()
    else:
        vectors, how = make_vectors(embedder, [f"{t}\n{lesson}" for t, lesson in texts], args.embed_budget_s)
        if cache:
            np.save(cache, vectors)
            cache.with_suffix(".txt").write_text(how)
    report: dict[str, Any] = {
        "machine": {"cpus": os.cpu_count(), "loadavg_at_start": [round(x, 2) for x in os.getloadavg()]},
        "vectors": how, "queries": len(queries), "k": 5, "query_embedding": percentiles(query_embed), "sizes": {}}
    report["backends"] = {}
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
        for backend in args.backends.split(","):
            server = stack.enter_context(TempServer(fast=False)) if backend == "postgres" and not args.store_url \
                else None
            fresh = fresh_stores(backend, Path(tmp), server.url() if server else args.store_url)
            report["backends"][backend] = measure_backend(fresh, embedder, texts, vectors, queries, sizes,
                                                          not args.skip_worst_case)
    report["machine"]["loadavg_at_end"] = [round(x, 2) for x in os.getloadavg()]
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
