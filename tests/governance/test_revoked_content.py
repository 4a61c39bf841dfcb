"""Revocation by content: the same trajectory exported, given new ids and imported again stays revoked.

Revoking by id alone was bypassed by `lle experiences export | edit ids | lle experiences import`: the copy
reached memory, skill proposals and the dataset, and a snapshot holding it was not tainted.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from lle.carriers.dataset import Dataset
from lle.carriers.exports import export, snapshots
from lle.carriers.skill_mining import SkillCall, SkillDescriptor, SkillSlot
from lle.carriers.skills import SkillLibrary, SkillState
from lle.core import CarrierKind, Experience, Split, UpdateOp, new_id
from lle.errors import InvalidInputError
from lle.evidence import assess_experience
from lle.governance import normalize
from lle.governance.hygiene import ContaminationIndex
from lle.governance.lineage import active_items, denylist, refuse_revoked, revoke, trajectory_hash
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


# --- by meaning: near copies of a revoked trajectory, and a revoked skill's descriptor --------------------

FULLWIDTH = str.maketrans({chr(c): chr(c + 0xFEE0) for c in range(0x21, 0x7F)})


Doc = dict[str, Any]


def _observations(change: Callable[[str], str]) -> Callable[[Doc], None]:
    def edit(doc: Doc) -> None:
        for step in doc["steps"]:
            step["effect"]["observation"] = change(step["effect"]["observation"])
    return edit


def _error(doc: Doc) -> None:
    doc["steps"][2]["effect"]["error"] = "Error: the world server timed out after 30 s; the action was retried"


def _null_argument(doc: Doc) -> None:
    for step in doc["steps"]:
        step["request"]["args"]["note"] = step["executed"]["args"]["note"] = None


def _reordered(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _reordered(value[k]) for k in reversed(list(value))}
    return [_reordered(v) for v in value] if isinstance(value, list) else value


NEAR_COPIES: dict[str, Callable[[Doc], None]] = {  # the outside battery's 8, and 4 it found refused already
    "zero-width space": _observations(lambda o: o.replace(" ", " \u200b").replace("key", "ke\u200by")),
    "zero-width joiner U+200D": _observations(lambda o: o.replace("e", "e\u200d")),
    "byte order mark U+FEFF": _observations(lambda o: "\ufeff" + o.replace(" the ", " the\ufeff ")),
    "homoglyph (Cyrillic a, o, e)": _observations(lambda o: o.translate(str.maketrans("aoe", "\u0430\u043e\u0435"))),
    "upper case": _observations(str.upper),
    "added '.'": _observations(lambda o: o + "."),
    "added error text": _error,
    "extra null argument": _null_argument,
    "exact copy": lambda doc: None,
    "reordered JSON keys": lambda doc: doc.update(_reordered(doc)),
    "extra whitespace": _observations(lambda o: "  " + o.replace(" ", " \t ") + "\n"),
    "fullwidth (NFKC)": _observations(lambda o: o.translate(FULLWIDTH)),
}


def near_copy(exp: Experience, name: str) -> Experience:
    doc = json.loads(reimported(exp).model_dump_json())
    NEAR_COPIES[name](doc)
    doc["content_hash"] = ""  # re-sealed on import
    return Experience.model_validate_json(json.dumps(_reordered(doc) if "JSON" in name else doc))


def test_twelve_near_copies_of_a_revoked_trajectory_make_no_training_rows(
        tmp_path: Path, contamination: ContaminationIndex) -> None:
    with Store(tmp_path / "lle.db") as store:
        dataset = Dataset(store, contamination=contamination)
        original, control = recorded(store, 0), recorded(store, 3)
        assert dataset.admit(original).op is UpdateOp.admit and len(original.steps) == 7
        revoke(store, original.id, "world bug", "test")
        errored = near_copy(original, "added error text")  # near, not equal: the containment check finds it
        assert normalize.digest("w", normalize.step_fields(errored.steps)) != \
            normalize.digest("w", normalize.step_fields(original.steps))
        copies = {name: near_copy(original, name) for name in NEAR_COPIES}
        for name, copy in copies.items():
            with pytest.raises(InvalidInputError, match=f"revoked {original.id}; nothing imported"):
                refuse_revoked(store, [copy])  # `lle experiences import` refuses it
            stored = store.append_experience(copy)  # stored some other way (before the revocation, say)
            update = dataset.admit(stored)
            assert update.op is UpdateOp.reject, name
            assert update.gate is not None and update.gate.reasons == [f"its source {original.id} is revoked"], name
        assert dataset.admit(control).op is UpdateOp.admit
        snap = export(dataset, "sft", tmp_path / "out")
        assert snap.n_rows > 0 and set(snap.experience_ids) == {control.id}  # 0 rows from the 12 copies


def test_a_revoked_skill_is_not_exported_and_its_descriptor_not_imported_again(tmp_path: Path) -> None:
    descriptor = SkillDescriptor(name="take_key_go", family="toy", calls=[
        SkillCall(tool="take", args={"item": "key"}), SkillCall(tool="go", slots={"direction": "direction"})],
        slots=[SkillSlot(name="direction", type="string")]).finished()
    with Store(tmp_path / "lle.db") as store:
        library = SkillLibrary(store)
        skill = library.import_descriptor(descriptor.model_dump(mode="json"), actor="test")
        document = library.export(skill.item_id)
        revoke(store, skill.item_id, "it hides a harmful call", "test")
        with pytest.raises(InvalidInputError, match=f"take_key_go .{skill.item_id}. is revoked"):
            library.export(skill.item_id)
        renamed = {**document, "name": "fetch", "id": None, "calls": [
            {**document["calls"][0], "args": {"item": "K\u0415Y\u200b", "note": None}}, document["calls"][1]]}
        for doc in (document, renamed):  # as exported, and renamed with its constants disguised
            with pytest.raises(InvalidInputError, match=f"repeats revoked skill {skill.item_id}; nothing imported"):
                library.import_descriptor(doc, actor="test")
        assert [s.item_id for s in library.skills()] == [skill.item_id]
        other = descriptor.model_copy(update={"name": "open_door", "calls": [
            SkillCall(tool="open", args={"target": "door"}), SkillCall(tool="go", slots={"direction": "direction"})]})
        assert library.import_descriptor(other.finished().model_dump(mode="json"), actor="test").state is \
            SkillState.candidate
