"""The ledger is append-only at the SQLite level, migrations are recorded, blobs and search work."""

from __future__ import annotations

from pathlib import Path

import apsw
import pytest

from lle.core import CarrierItem, CarrierKind, GateResult, Revocation, Scope, ScopeLevel, Update, UpdateOp
from lle.errors import InvalidInputError, NewerSchemaError, UnknownIdError
from lle.store import Store, migrations

LEDGER = ["experiences", "steps", "evidence", "updates", "revocations", "carrier_items", "blobs", "lle_migrations"]


def _fill(db: Store, make_experience) -> None:  # type: ignore[no-untyped-def]
    exp = db.append_experience(make_experience(observation="y" * 6000))
    scope = Scope(level=ScopeLevel.project, family="sql", project="shop")
    item = CarrierItem(carrier=CarrierKind.rules, scope=scope, content={"rule": "dates are DD/MM/YYYY"},
                       experience_ids=[exp.id])
    db.append_item(item)
    db.append_update(Update(carrier=CarrierKind.rules, op=UpdateOp.admit, item_id=item.id, scope=scope,
                            experience_ids=[exp.id], gate=GateResult(name="rules", passed=True, reasons=["2 hard"])))
    db.append_revocation(Revocation(target=exp.id, reason="bad world version", author="test"))


@pytest.mark.parametrize("table", LEDGER)
def test_update_and_delete_on_ledger_tables_fail_in_sqlite(table: str, store: Store, make_experience) -> None:  # type: ignore[no-untyped-def]
    _fill(store, make_experience)
    before = store.conn.execute(f"SELECT count(*) FROM {table}").fetchone()
    assert before[0] > 0
    column = next(iter(store.conn.execute(f"SELECT * FROM {table} LIMIT 1").getdescription()))[0]
    with pytest.raises(apsw.ConstraintError, match="append-only"):
        store.conn.execute(f"UPDATE {table} SET {column} = {column}")
    with pytest.raises(apsw.ConstraintError, match="append-only"):
        store.conn.execute(f"DELETE FROM {table}")
    assert store.conn.execute(f"SELECT count(*) FROM {table}").fetchone() == before


def test_store_is_wal_with_full_sync_and_records_its_migrations(store: Store) -> None:
    assert store.conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert store.conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
    applied = [tuple(r) for r in store.conn.execute("SELECT number, name FROM lle_migrations ORDER BY number")]
    assert applied == [(n, name) for n, name, _ in migrations()]
    assert store.conn.execute("PRAGMA user_version").fetchone()[0] == len(applied)


def test_long_texts_are_stored_once_as_content_addressed_blobs(store: Store, make_experience) -> None:  # type: ignore[no-untyped-def]
    same = "z" * 10_000
    for _ in range(3):
        store.append_experience(make_experience(observation=same))
    # Each experience has 3 steps whose observations differ only in the suffix, plus identical goal:
    # the identical long text is one blob however often it appears.
    sizes = [r[0] for r in store.conn.execute("SELECT size FROM blobs")]
    assert len(sizes) == 3 and all(s > 10_000 for s in sizes)
    raw = store.conn.execute("SELECT body FROM steps LIMIT 1").fetchone()[0]
    assert len(raw) < 1000 and "$lle_blob" in raw


def test_full_text_search_finds_experiences_and_items(store: Store, make_experience) -> None:  # type: ignore[no-untyped-def]
    _fill(store, make_experience)
    hits = store.search("orders May")
    assert [kind for kind, _, _ in hits] == ["experience"]
    assert store.search("DD/MM/YYYY")[0][0] == "rules"
    assert store.search('"unbalanced ( quote') == []


def test_revocation_appends_and_joins_the_denylist(store: Store, make_experience) -> None:  # type: ignore[no-untyped-def]
    _fill(store, make_experience)
    exp_id = store.list_experiences()[0].id
    assert exp_id in store.revoked_ids()
    assert store.list_experiences()[0].revoked
    assert store.get_experience(exp_id).id == exp_id  # revoked, never deleted


def test_duplicate_or_tampered_experiences_are_refused_and_nothing_is_written(store: Store, make_experience) -> None:  # type: ignore[no-untyped-def]
    exp = store.append_experience(make_experience())
    fresh = make_experience()
    with pytest.raises(InvalidInputError, match="already stored"):
        store.append_experiences([fresh, exp])
    assert store.count("experiences") == 1 and store.kind_of(fresh.id) is None
    tampered = make_experience().model_copy(update={"score": 99.0})
    with pytest.raises(InvalidInputError, match="content_hash does not match"):
        store.append_experience(tampered)


def test_unknown_id_names_the_id(store: Store) -> None:
    with pytest.raises(UnknownIdError, match="exp_missing"):
        store.get_experience("exp_missing")


def test_newer_schema_is_readable_but_never_written(tmp_path: Path, make_experience) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "lle.db"
    with Store(path) as db:
        exp = db.append_experience(make_experience())
        db.conn.execute("INSERT INTO lle_migrations VALUES (999, 'from_the_future', 'later')")
    before = path.read_bytes()
    with Store(path) as db:
        assert not db.writable and db.schema_version == 999
        assert db.get_experience(exp.id) == exp
        with pytest.raises(NewerSchemaError, match="newer lle"):
            db.append_experience(make_experience())
    assert path.read_bytes() == before
