"""Items from reasoning-gym datasets, and their stable split.

An item is (dataset, index) in a dataset made with a fixed seed and size (gsm_symbolic's items
depend on the size too, so both are pinned). Its split is a hash of its normalized question text,
so the same question can never land in two splits, whichever dataset or index it comes from;
within a split a repeated question is skipped, so split-local seeds never repeat a question.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from functools import cache
from typing import Any

import reasoning_gym

from lle.core import Split
from lle.errors import WorldError
from lle.worlds.base import split_of

DATASET_SEED = 1234
POOL_SIZE = 10_000
"""Indices 0..POOL_SIZE-1 of each dataset; the split-local seeds enumerate them."""
SPLIT_SALT = "lle-math-split-v1"


@cache
def dataset(name: str) -> Any:
    """The reasoning-gym dataset `name` with the pinned seed and size (offline; items are made on demand)."""
    try:
        return reasoning_gym.create_dataset(name, size=POOL_SIZE, seed=DATASET_SEED)
    except Exception as err:  # reasoning-gym raises plain errors for unknown names
        raise WorldError(f"reasoning-gym has no usable dataset {name!r} ({err}); check the name") from err


def entry(name: str, index: int) -> dict[str, Any]:
    """Item `index` of dataset `name`: question, answer (private) and metadata."""
    if not 0 <= index < POOL_SIZE:
        raise WorldError(f"math: index {index} is outside 0..{POOL_SIZE - 1} of {name}; use a seed from a small world")
    item: dict[str, Any] = dataset(name)[index]
    return item


def normalize(question: str) -> str:
    return " ".join(question.split())


@dataclass
class _Scan:
    """How far a dataset has been read, and the indices found per split (first occurrence of each question)."""

    next_index: int = 0
    seen: set[str] = field(default_factory=set)
    by_split: dict[Split, list[int]] = field(default_factory=lambda: {s: [] for s in Split})
    lock: threading.Lock = field(default_factory=threading.Lock)


_scans: dict[str, _Scan] = {}
_scans_lock = threading.Lock()


def split_index(name: str, split: Split, seed: int) -> int:
    """The dataset index of the `seed`-th distinct question of `split` in dataset `name`."""
    if seed < 0:
        raise WorldError(f"math: seed {seed} is negative; use 0, 1, 2, …")
    with _scans_lock:
        scan = _scans.setdefault(name, _Scan())
    with scan.lock:
        found = scan.by_split[split]
        while len(found) <= seed and scan.next_index < POOL_SIZE:
            text = normalize(entry(name, scan.next_index)["question"])
            if text not in scan.seen:
                scan.seen.add(text)
                scan.by_split[split_of(f"{SPLIT_SALT}:{text}")].append(scan.next_index)
            scan.next_index += 1
        if len(found) <= seed:
            raise WorldError(f"math/{name}: the {split.value} split has only {len(found)} questions in the pool; "
                             f"use a seed below {len(found)}")
        return found[seed]
