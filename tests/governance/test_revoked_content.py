"""Revocation by content: the same trajectory exported, given new ids and imported again stays revoked.

Revoking by id alone was bypassed by `lle experiences export | edit ids | lle experiences import`: the copy
reached memory, skill proposals and the dataset, and a snapshot holding it was not tainted.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lle.carriers.dataset import Dataset
from lle.carriers.exports import export, snapshots
from lle.core import CarrierKind, Experience, Split, UpdateOp, new_id
from lle.evidence import assess_experience
from lle.governance.hygiene import ContaminationIndex
from lle.governance.lineage import active_items, denylist, revoke, trajectory_hash
from lle.policies.scripted import ScriptedPolicy
from lle.router.router import UpdateRouter
from lle.runtime.harness import run_episode
from lle.store import Store
from lle.worlds.toy.keys import KeysFamily, oracle_actions


@pytest.fixture(scope="module")
def contamination() -> ContaminationIndex:
    return ContaminationIndex.from_families([KeysFamily()], per_split=30)


def recorded(store: Store, seed: int) -> Experience:
    sw = KeysFamily().small_world(Split.train, seed)
    return run_episode(sw, ScriptedPolicy(oracle_actions(sw)), store=store, assess=assess_experience)


def reimported(exp: Experience, **changes: object) -> Experience:
    """What `lle experiences export`, an edit of its ids (and of `changes`), and `import` store."""
    doc = json.loads(exp.model_dump_json())
    doc["id"] = new_id("exp")
    for ev in doc["evidence"]:
        ev["id"], ev["experience_id"] = new_id("evd"), doc["id"]
    doc.update(changes)
    if changes:
        doc["content_hash"] = ""  # an edited copy is re-sealed on import
    return Experience.model_validate(doc)


def derived_from(store: Store, exp_id: str) -> list[str]:
    return [i.id for i in store.carrier_items() if exp_id in i.experience_ids]


@pytest.mark.parametrize("edit", [{}, {"score": 0.5}], ids=["same-content", "edited-score"])
def test_a_revoked_trajectory_reimported_under_a_new_id_is_admitted_nowhere(
        tmp_path: Path, contamination: ContaminationIndex, edit: dict[str, object]) -> None:
    with Store(tmp_path / "lle.db") as store:
        router = UpdateRouter(store, contamination=contamination)
        original = recorded(store, 0)
        router.route(original)
        assert derived_from(store, original.id), "the original reached memory and the dataset"
        revoke(store, original.id, "world bug", "test")

        twin = store.append_experience(reimported(original, **edit))
        assert twin.id != original.id and trajectory_hash(twin.small_world.world, twin.steps) == \
            trajectory_hash(original.small_world.world, original.steps)
        assert (twin.content_hash == original.content_hash) is (not edit)
        assert denylist(store).blocks_experience(twin) == original.id
        updates = router.route(twin)
        assert all(u.op is UpdateOp.reject for u in updates), [(u.carrier, u.op) for u in updates]
        assert "revoked" in updates[0].gate.reasons[0] if updates[0].gate else False
        assert Dataset(store, contamination=contamination).admit(twin).op is UpdateOp.reject
        assert derived_from(store, twin.id) == []
        assert not any(twin.id in i.experience_ids for i in active_items(store))
        # Every view that lists ids marks the copy as revoked too.
        assert twin.id in store.revoked_ids()
        assert next(r for r in store.list_experiences() if r.id == twin.id).revoked


def test_a_snapshot_holding_a_copy_of_revoked_content_is_tainted(
        tmp_path: Path, contamination: ContaminationIndex) -> None:
    with Store(tmp_path / "lle.db") as store:
        original = recorded(store, 1)
        twin = store.append_experience(reimported(original))  # imported before anyone knew
        dataset = Dataset(store, contamination=contamination)
        assert dataset.admit(twin).op is UpdateOp.admit
        snap = export(dataset, "sft", tmp_path / "out")
        assert twin.id in snap.experience_ids and original.id not in snap.experience_ids
        revoke(store, original.id, "world bug", "test")  # the original, never exported, is revoked
        (now,) = [s for s in snapshots(store) if s.id == snap.id]
        assert now.tainted and twin.id in now.tainted_by
        assert [i for i in dataset.items() if twin.id in i.experience_ids] == []


def test_store_search_marks_revoked_records(tmp_path: Path, contamination: ContaminationIndex) -> None:
    from typer.testing import CliRunner

    from lle.cli.main import app

    workspace = tmp_path / "ws"
    workspace.mkdir()
    with Store(workspace / "lle.db") as store:
        original = recorded(store, 2)
        kept = recorded(store, 3)
        twin = store.append_experience(reimported(original))
        UpdateRouter(store, contamination=contamination).route(kept)
        revoke(store, original.id, "world bug", "test")
    result = CliRunner().invoke(app, ["--workspace", str(workspace), "store", "search", "key", "--json",
                                      "--limit", "50"])
    assert result.exit_code == 0, result.output
    hits = {h["id"]: h for h in json.loads(result.output)}
    assert hits[original.id]["revoked"] and hits[twin.id]["revoked"]
    assert not hits[kept.id]["revoked"]
    assert any(h["kind"] == CarrierKind.memory.value and not h["revoked"] for h in hits.values())
