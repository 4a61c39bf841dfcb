"""Difficulty levels as seeded generators, split by the one stable hash.

A level is a generator: world seed -> task. `LevelPool` walks the world seeds 0, 1, 2, … of one level,
asks each for the key of the task it makes (the text that makes it distinct: a question, a layout,
a hidden number and its range), and files it under `split_of(salt:key)`; a key seen before is skipped,
so the same task can never be in two splits nor twice in one, and split-local seeds never repeat a
task. A small world of (split, seed, level) is the `seed`-th world seed of that split in that level's
pool: train is as large as the generator allows, dev and test are fixed lists (the pool's order).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from lle.core import Split
from lle.errors import WorldError
from lle.worlds.base import split_of

__all__ = ["LevelPool", "level_pool", "levelled_id"]

MAX_CANDIDATES = 200_000
"""World seeds tried at most per level (a finite generator stops earlier: `size`)."""
STALE_LIMIT = 20_000
"""A level whose last this-many world seeds made no new task is exhausted: its generator has a small task
space (one-digit sums, a 1-room layout) that is then found in full, and counting it need not try every seed."""


def levelled_id(prefix: str, split: Split, seed: int, level: int | None) -> str:
    """`prefix:split:seed` for an unlevelled task (as ids always were), `prefix:split:L<level>:seed` for a level."""
    return f"{prefix}:{split.value}:{seed}" if level is None else f"{prefix}:{split.value}:L{level}:{seed}"


@dataclass
class LevelPool:
    """The world seeds of one generated level, by split, found lazily and kept (thread-safe)."""

    name: str
    """What the pool is, for errors (e.g. `math/arith-v1 level 0`)."""
    key: Callable[[int], str]
    """World seed -> the key of the task it makes; equal keys are the same task."""
    salt: str
    """Salt of the split hash; keep it fixed for ever, or every task may change split."""
    size: int = MAX_CANDIDATES
    """World seeds 0..size-1 exist (a finite generator: its number of tasks)."""
    _next: int = 0
    _last_new: int = 0
    _seen: set[str] = field(default_factory=set)
    _by_split: dict[Split, list[int]] = field(default_factory=lambda: {s: [] for s in Split})
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def world_seed(self, split: Split, seed: int) -> int:
        """The world seed of the `seed`-th distinct task of `split`."""
        if seed < 0:
            raise WorldError(f"{self.name}: seed {seed} is negative; use 0, 1, 2, …")
        with self._lock:
            found = self._by_split[split]
            while len(found) <= seed and not self._exhausted():
                self._file(self._next)
            if len(found) <= seed:
                raise WorldError(f"{self.name}: the {split.value} split has {len(found)} tasks; "
                                 f"use a seed below {len(found)}")
            return found[seed]

    def count(self, split: Split) -> int:
        """How many tasks `split` has (walks the whole generator: for finite pools)."""
        with self._lock:
            while not self._exhausted():
                self._file(self._next)
            return len(self._by_split[split])

    def _exhausted(self) -> bool:
        return self._next >= self.size or self._next - self._last_new >= STALE_LIMIT

    def _file(self, world_seed: int) -> None:
        key = self.key(world_seed)
        if key not in self._seen:
            self._seen.add(key)
            self._last_new = world_seed
            self._by_split[split_of(f"{self.salt}:{key}")].append(world_seed)
        self._next += 1


_pools: dict[str, LevelPool] = {}
_pools_lock = threading.Lock()


def level_pool(name: str, key: Callable[[int], str], salt: str, size: int = MAX_CANDIDATES) -> LevelPool:
    """The process-wide pool called `name` (made on first use, so each level is scanned once per process)."""
    with _pools_lock:
        pool = _pools.get(name)
        if pool is None:
            pool = _pools[name] = LevelPool(name, key, salt, size)
        return pool
