"""Dataset snapshots: JSONL files that Hugging Face `datasets` loads, recorded in the ledger.

`export(dataset, fmt, out_dir)` writes `out_dir/<snap_id>/<fmt>.jsonl` and `manifest.json` from
the dataset's active items, and appends one `export_snapshots` row plus one `export_rows` row per
(row, experience) (migration m005), so a snapshot always says what it was built from. Revoking an
experience, or its dataset item, taints every snapshot that contains it: `snapshots()` computes
this from the denylist at read time; no row is rewritten and no file is touched.

Formats (every row carries `experience_ids`, `world`, `small_world_id`, `context`, `snapshot_id`):

    sft   {"messages": [... what the model saw ..., {"role": "assistant", "content": action}], "step"}
          one row per trainable step of each success (see `dataset.sft_rows`)
    dpo   {"prompt": [...], "chosen": [assistant], "rejected": [assistant], "step"}
          a success and a failure on the same small world, at the first step their actions part
    rl    {"prompt": [...], "small_world": JSON, "verifiers": [...], "world_options": JSON, "outcomes"}
          one row per small world; `lle.flywheel.reward.recompute_reward(row, actions)` is the reward
"""

from __future__ import annotations

import hashlib
import json
import os
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lle import __version__
from lle.carriers.dataset import (
    Dataset,
    Row,
    check_row,
    dpo_row,
    episode_options,
    rl_row,
    seen_messages,
    sft_rows,
    verifier_ids_of,
)
from lle.core import Experience, Message, Outcome, SmallWorld, canonical_json, new_id, utcnow
from lle.errors import InvalidInputError, LleError
from lle.governance.hygiene import scrub_experience
from lle.governance.lineage import denylist
from lle.store import Store, exports

FORMATS = ("sft", "dpo", "rl")


def new_snapshot_id() -> str:
    return new_id("snap")


@dataclass(frozen=True)
class Snapshot:
    """One export, as the ledger knows it; `tainted_by` lists the revoked ids it contains."""

    id: str
    format: str
    n_rows: int
    path: str
    sha256: str
    created_at: str
    experience_ids: tuple[str, ...] = ()
    tainted_by: tuple[str, ...] = ()
    skipped: dict[str, int] = field(default_factory=dict)

    @property
    def tainted(self) -> bool:
        return bool(self.tainted_by)


@dataclass
class _Source:
    item_id: str
    exp: Experience
    outcome: Outcome
    """From all evidence now known: a later verdict may differ from the recorded `exp.outcome`."""
    seen: list[list[Message]]
    exact: bool


def _sources(dataset: Dataset, skipped: Counter[str]) -> list[_Source]:
    denied = denylist(dataset.store)
    out = []
    for item in dataset.items():
        exp = dataset.store.get_experience(item.experience_ids[0])
        if denied.blocks_experience(exp):
            skipped["revoked source"] += 1
            continue
        outcome, _, _ = dataset.current(exp)
        admitted = item.content.get("outcome") if isinstance(item.content, dict) else None
        if outcome.value != admitted:  # a later verdict changed it: the admission no longer holds
            skipped["outcome changed since admission"] += 1
            continue
        clean = scrub_experience(exp)
        try:
            seen, exact = seen_messages(dataset.store, clean)
        except LleError:  # its world cannot be opened here any more
            skipped["world unavailable"] += 1
            continue
        out.append(_Source(item.id, clean, outcome, seen, exact))
    return out


def _rows(dataset: Dataset, fmt: str, sources: list[_Source], skipped: Counter[str]) -> list[tuple[Row, list[str]]]:
    """(row, item ids) pairs in a stable order (items in admission order)."""
    out: list[tuple[Row, list[str]]] = []
    if fmt == "sft":
        for s in sources:
            if s.outcome is Outcome.passed:
                out += [(row, [s.item_id]) for row in sft_rows(s.exp, s.seen, s.exact)]
        return out
    by_world: dict[str, list[_Source]] = defaultdict(list)
    for s in sources:
        by_world[s.exp.small_world.id].append(s)
    for group in by_world.values():
        if fmt == "rl":
            first = group[0]
            options = episode_options(dataset.store, first.exp.id)[1]
            row = rl_row([s.exp for s in group], [s.outcome for s in group], first.seen,
                         all(s.exact for s in group), verifier_ids_of(first.exp.small_world), options)
            out.append((row, [s.item_id for s in group]))
            continue
        passes = [s for s in group if s.outcome is Outcome.passed]
        fails = [s for s in group if s.outcome is Outcome.failed]
        # Every failure is used once, each against a success in turn: no pair repeats.
        for i, bad in enumerate(fails if passes else []):
            good = passes[i % len(passes)]
            pair = dpo_row(good.exp, good.seen, bad.exp, bad.seen, good.exact and bad.exact)
            if pair is None:
                skipped["pair without a common prompt"] += 1
            else:
                out.append((pair, [good.item_id, bad.item_id]))
    return out


def export(dataset: Dataset, fmt: str, out_dir: str | os.PathLike[str]) -> Snapshot:
    """Write a snapshot of `dataset` in `fmt` under `out_dir` and record it in the ledger."""
    if fmt not in FORMATS:
        raise InvalidInputError(f"format {fmt!r} is not one of {', '.join(FORMATS)}")
    store = dataset.store
    skipped: Counter[str] = Counter()
    sources = _sources(dataset, skipped)
    small_worlds: dict[str, SmallWorld] = {s.exp.small_world.id: s.exp.small_world for s in sources}
    snap_id = new_snapshot_id()
    kept: list[tuple[Row, list[str]]] = []
    for row, item_ids in _rows(dataset, fmt, sources, skipped):
        refused = check_row(row, small_worlds)
        if refused:  # admission already checked this; an export never trusts it blindly
            skipped[f"refused at export: {refused.split(' ', 1)[-1]}"] += 1
            continue
        kept.append(({**row, "snapshot_id": snap_id}, item_ids))
    folder = Path(out_dir).expanduser() / snap_id
    folder.mkdir(parents=True, exist_ok=False)
    path = folder / f"{fmt}.jsonl"
    lines = [json.dumps(row, ensure_ascii=False, sort_keys=True) for row, _ in kept]
    data = ("\n".join(lines) + "\n" if lines else "").encode()
    path.write_bytes(data)
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    item_exp = {s.item_id: s.exp.id for s in sources}
    experience_ids = sorted({e for row, _ in kept for e in row["experience_ids"]})
    manifest: dict[str, Any] = {
        "id": snap_id, "format": fmt, "n_rows": len(kept), "sha256": digest, "path": str(path.resolve()),
        "created_at": utcnow().isoformat(), "lle_version": __version__, "skipped": dict(sorted(skipped.items())),
        "dataset_items": len(sources), "experience_ids": experience_ids,
    }
    (folder / "manifest.json").write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n")
    exports.record_snapshot(
        store, exports.SnapshotRow(snap_id, fmt, len(kept), digest, manifest["path"], manifest["created_at"],
                                   canonical_json({k: v for k, v in manifest.items() if k != "experience_ids"})),
        [(index, item_exp[item_id], item_id) for index, (_, item_ids) in enumerate(kept) for item_id in item_ids])
    return Snapshot(snap_id, fmt, len(kept), manifest["path"], digest, manifest["created_at"],
                    tuple(experience_ids), (), dict(skipped))


def snapshots(store: Store) -> list[Snapshot]:
    """Every snapshot, oldest first, each with the revoked ids (experiences or items) it contains.

    Ids suffice: a revocation's cascade lists every experience its source selector matched when it
    was made, and nothing blocked by a source can be admitted or exported afterwards.
    """
    denied = denylist(store).ids
    contents: dict[str, set[str]] = defaultdict(set)
    tainted: dict[str, set[str]] = defaultdict(set)
    for snap_id, exp_id, item_id in exports.snapshot_sources(store):
        contents[snap_id].add(exp_id)
        tainted[snap_id].update(i for i in (exp_id, item_id) if i in denied)
    out = []
    for row in exports.snapshots(store):
        skipped = json.loads(row.manifest).get("skipped") or {}
        out.append(Snapshot(row.id, row.format, row.n_rows, row.path, row.sha256, row.created_at,
                            tuple(sorted(contents[row.id])), tuple(sorted(tainted[row.id])),
                            {str(k): int(v) for k, v in skipped.items()}))
    return out
