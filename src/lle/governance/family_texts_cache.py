"""The contamination index's texts of a family, kept on disk between processes (`LLE_CACHE_DIR`, `off` to disable).

Building a family's held-out texts means building hundreds of small worlds; a file per (family, version, options,
sources, size) keeps that to once per machine. The format number is part of the key: a change in how texts are
chosen (2: first observations by the family's `quick_reset`, not by a timing) leaves old files unread.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import logging
import os
from pathlib import Path
from typing import Any

import lle
from lle.core import canonical_json
from lle.worlds.base import TaskFamily

log = logging.getLogger(__name__)

FORMAT = 2


def cache_path(family: TaskFamily, per_split: int) -> Path | None:
    """Where a family's texts are kept between processes (`LLE_CACHE_DIR`, `off` to disable)."""
    root = os.environ.get("LLE_CACHE_DIR") or str(
        Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "lle")
    if root == "off":
        return None
    try:
        # The family's own package sources are part of the key: editing a world invalidates its texts.
        digest = hashlib.sha256()
        for source in sorted(Path(inspect.getfile(type(family))).parent.glob("*.py")):
            digest.update(source.name.encode() + source.read_bytes())
        key = canonical_json([FORMAT, lle.__version__, family.id, family.version, family.options(),
                              type(family).__qualname__, per_split, digest.hexdigest()])
    except (OSError, TypeError, ValueError):
        return None
    return Path(root) / "contamination" / f"{hashlib.sha256(key.encode()).hexdigest()[:32]}.json"


def read_cache(path: Path | None) -> dict[str, Any] | None:
    if path is None or not path.exists():
        return None
    try:
        data = json.loads(path.read_text())
        return data if isinstance(data, dict) and {"held", "train", "with_obs", "notes", "closest"} <= set(data) \
            else None
    except (OSError, ValueError):
        return None  # a damaged cache is rebuilt


def write_cache(path: Path, data: dict[str, Any]) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(data))
        tmp.replace(path)  # atomic: a concurrent reader sees the old file or the new one
    except OSError as err:
        log.info("contamination cache not written (%s); it is rebuilt next time", err)
