"""The ledger's guarantees on both backends: append-only, migrations, blobs, search, revocation, refusals."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from lle.core import CarrierItem, CarrierKind, Experience, GateResult, Revocation, Scope, ScopeLevel, Update, UpdateOp
from lle.errors import InvalidInputError, NewerSchemaError, UnknownIdError
from lle.store import Store, migrations

# A column of each ledger table to write to (any will do: the triggers refuse the row, not the column).
LEDGER = {"experiences": "id", "steps": "experience_id", "evidence": "id", "updates": "id", "revocations": "id",
          "carrier_items": "id", "blobs": "sha256", "lle_migrations": "name"}
MakeExperience = Callable[..., Experience]


def _fill(db: Store, make_experience: MakeExperience) -> Experience:
    exp = db.append_experience(make_experience(observation="y" * 6000))
    scope = Scope(level=ScopeLevel.project, family="sql", project="shop")
    item = CarrierItem(carrier=CarrierKind.rules, scope=scope, content={"rule": "dates are DD/MM/YYYY"},
                       experience_ids=[exp.id])
    db.append_item(item)
    db.append_update(Update(carrier=CarrierKind.rules, op=UpdateOp.admit, item_id=item.id, scope=scope,
                            experience_ids=[exp.id], gate=GateResult(name="rules", passed=True, reasons=["2 hard"])))
    db.append_revocation(Revocation(target=exp.id, reason="bad world version", author="test"))
    return exp


def _count(db: Store, table: str) -> int:
    return int(db.conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0])


def test_update_delete_and_truncate_are_refused_on_every_ledger_table(store: Store,
                                                                      make_experience: MakeExperience) -> None:
    _fill(store, make_experience)
    for table, column in LEDGER.items():
        before = _count(store, table)
        assert before > 0, table
        with pytest.raises(Exception, match="append-only"):
            store.conn.execute(f"UPDATE {table} SET {column} = {column}")
        with pytest.raises(Exception, match="append-only"):
            store.conn.execute(f"DELETE FROM {table}")
        if store.dialect == "postgres":  # TRUNCATE skips row triggers; a statement trigger refuses it
            with pytest.raises(Exception, match="append-only"):
                store.conn.execute(f"TRUNCATE {table} CASCADE")
        assert _count(store, table) == before, table
    assert store.integrity_check() == "ok"


def test_migrations_are_numbered_alike_and_recorded(store: Store) -> None:
    applied = [tuple(r) for r in store.conn.execute("SELECT number, name FROM lle_migrations ORDER BY number")]
    assert applied == [(n, name) for n, name, _ in migrations(store.dialect)]
    assert [(n, name) for n, name, _ in migrations("postgres")] == [(n, name) for n, name, _ in migrations()]
    assert store.schema_version == store.latest_version == len(applied)
    assert "experiences" in store.schema_sql() and "no_update" in store.schema_sql()


def test_a_second_open_migrates_nothing_and_reads_the_same(location: str, make_experience: MakeExperience) -> None:
    with Store(location) as db:
        exp = db.append_experience(make_experience())
    with Store(location) as db:
        assert db.get_experience(exp.id) == exp and _count(db, "lle_migrations") == len(migrations())
        with Store(db.path) as again:  # callers reopen a store by its path; a PostgreSQL one too
            assert again.dialect == db.dialect and again.get_experience(exp.id) == exp


def test_long_texts_are_stored_once_as_content_addressed_blobs(store: Store, make_experience: MakeExperience) -> None:
    same = "z" * 10_000
    exps = [store.append_experience(make_experience(observation=same)) for _ in range(3)]
    sizes = [r[0] for r in store.conn.execute("SELECT size FROM blobs")]
    assert len(sizes) == 3 and all(s > 10_000 for s in sizes)
    raw = store.conn.execute("SELECT body FROM steps LIMIT 1").fetchone()[0]
    assert len(raw) < 1000 and "$lle_blob" in raw
    assert [store.get_experience(e.id) for e in exps] == exps


def test_full_text_search_finds_experiences_and_items(store: Store, make_experience: MakeExperience) -> None:
    _fill(store, make_experience)
    hits = store.search("orders May")
    assert [kind for kind, _, _ in hits] == ["experience"]
    assert "orders" in hits[0][2]
    assert store.search("order")[0][0] == "experience"  # stemmed on both backends
    assert store.search("DD/MM/YYYY")[0][0] == "rules"
    assert store.search('"unbalanced ( quote') == [] and store.search("   ") == []


def test_revocation_appends_and_joins_the_denylist(store: Store, make_experience: MakeExperience) -> None:
    exp = _fill(store, make_experience)
    assert exp.id in store.revoked_ids()
    assert store.list_experiences()[0].revoked
    assert store.get_experience(exp.id) == exp  # revoked, never deleted
    copy = store.append_experience(exp.model_copy(update={"id": "exp_copy", "evidence": [], "content_hash": None}))
    assert copy.id in store.revoked_ids()  # the same trajectory under a new id is revoked too
    assert store.experiences_decided("rules") == {exp.id}


def test_duplicate_or_tampered_experiences_are_refused_and_nothing_is_written(
        store: Store, make_experience: MakeExperience) -> None:
    exp = store.append_experience(make_experience())
    fresh = make_experience()
    with pytest.raises(InvalidInputError, match="already stored"):
        store.append_experiences([fresh, exp])
    assert store.count("experiences") == 1 and store.kind_of(fresh.id) is None
    tampered = make_experience().model_copy(update={"score": 99.0})
    with pytest.raises(InvalidInputError, match="content_hash does not match"):
        store.append_experience(tampered)
    store.append_experience(fresh)  # the store is usable after a refused write
    assert store.count("experiences") == 2


def test_unknown_id_names_the_id(store: Store) -> None:
    with pytest.raises(UnknownIdError, match="exp_missing"):
        store.get_experience("exp_missing")
    assert store.kind_of("exp_missing") is None


def test_newer_schema_is_readable_but_never_written(location: str, make_experience: MakeExperience) -> None:
    with Store(location) as db:
        exp = db.append_experience(make_experience())
        db.conn.execute("INSERT INTO lle_migrations VALUES (999, 'from_the_future', 'later')")
    with Store(location) as db:
        assert not db.writable and db.schema_version == 999
        assert db.get_experience(exp.id) == exp
        with pytest.raises(NewerSchemaError, match="newer lle"):
            db.append_experience(make_experience())
        assert db.count("experiences") == 1


def test_a_transaction_commits_all_or_nothing_and_nests(store: Store, make_experience: MakeExperience) -> None:
    scope = Scope(level=ScopeLevel.global_)
    items = [CarrierItem(carrier=CarrierKind.rules, scope=scope, content={"rule": f"r{i}"}) for i in range(3)]
    with pytest.raises(RuntimeError), store.transaction():
        store.append_item(items[0])
        raise RuntimeError("midway")
    assert store.count("carrier_items") == 0
    with store.transaction():
        store.append_item(items[1])
        with pytest.raises(InvalidInputError):
            store.append_experiences([make_experience(), store.append_experience(make_experience())])
        store.append_item(items[2])
    assert [i.id for i in store.carrier_items()] == [items[1].id, items[2].id]
    assert store.count("experiences") == 1  # the inner failed write undid only itself


def test_incremental_reads_follow_the_order_of_writing(store: Store) -> None:
    scope = Scope(level=ScopeLevel.global_)
    items = [CarrierItem(carrier=c, scope=scope, content={"n": i})
             for i, c in enumerate([CarrierKind.rules, CarrierKind.memory, CarrierKind.rules])]
    for item in items:
        store.append_item(item)
        store.append_update(Update(carrier=item.carrier, op=UpdateOp.admit, item_id=item.id, scope=scope))
    rows = store.item_rows()
    assert [i for _, i, _ in rows] == [i.id for i in items]
    first = rows[0][0]
    assert [i for _, i, _ in store.item_rows("rules", after=first)] == [items[2].id]
    assert [i for _, i, _ in store.item_rows(after=0, upto=rows[1][0])] == [items[0].id, items[1].id]
    assert store.last_rowid("carrier_items") == rows[-1][0]
    assert [u.item_id for _, u in store.update_rows("rules")] == [items[0].id, items[2].id]
    assert [u.item_id for u in store.list_updates(carrier="rules", limit=1, offset=1)] == [items[2].id]
    assert store.update_item_id(store.list_updates()[0].id) == items[0].id
    assert [i.id for i in store.items_by_id([items[2].id, "itm_none", items[0].id])] == [items[2].id, items[0].id]
    assert store.items_by_id([items[1].id], "rules") == []


def test_postgres_schemas_hold_separate_ledgers(pg_server, make_experience: MakeExperience) -> None:  # type: ignore[no-untyped-def]
    from lle.store.postgres import with_schema

    url = pg_server.new_database()
    with Store(with_schema(url, "run_a_lle")) as a, Store(with_schema(url, "run_a_raw")) as b:
        exp = a.append_experience(make_experience())
        assert a.count("experiences") == 1 and b.count("experiences") == 0 and b.kind_of(exp.id) is None
    with Store(with_schema(url, "run_a_lle")) as again:
        assert again.get_experience(exp.id) == exp
    with pytest.raises(InvalidInputError, match="schema name"):
        with_schema(url, "Bad-Name")


def test_first_opens_racing_on_a_new_store_migrate_it_once(tmp_path, pg_server) -> None:  # type: ignore[no-untyped-def]
    from concurrent.futures import ThreadPoolExecutor

    for location in (str(tmp_path / "race.db"), pg_server.new_database()):  # new: nothing migrated yet
        with ThreadPoolExecutor(4) as pool:
            versions = list(pool.map(_open_version, [location] * 4))
        assert versions == [len(migrations())] * 4
        with Store(location) as db:
            assert _count(db, "lle_migrations") == len(migrations())


def _open_version(location: str) -> int:
    with Store(location) as db:
        return db.schema_version


def test_a_lost_postgres_connection_is_one_store_error(pg_server, make_experience: MakeExperience) -> None:  # type: ignore[no-untyped-def]
    from lle.errors import StoreError

    url = pg_server.new_database()
    with Store(url) as db, Store(url) as other:
        pid = db.conn.execute("SELECT pg_backend_pid()").fetchone()[0]
        other.conn.execute("SELECT pg_terminate_backend(?)", (pid,))  # the server drops db's session
        with pytest.raises(StoreError, match="run the same command again"):
            db.append_experience(make_experience())
        with pytest.raises(StoreError, match="PostgreSQL store failed"):
            db.count("experiences")
        assert other.count("experiences") == 0
