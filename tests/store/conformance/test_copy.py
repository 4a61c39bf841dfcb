"""`lle store copy`: SQLite -> PostgreSQL -> SQLite, verified by content hashes both ways."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from lle.cli.main import app
from lle.core import CarrierItem, CarrierKind, Experience, Revocation, Scope, ScopeLevel
from lle.errors import InvalidInputError
from lle.store import Store, memory
from lle.store.copy import copy_store, table_digests
from lle.store.pg_server import TempServer


def _fill(db: Store, make_experience: Callable[..., Experience]) -> None:
    exps = [db.append_experience(make_experience(observation=f"{i} " + "w" * 5000)) for i in range(5)]
    scope = Scope(level=ScopeLevel.global_)
    item = CarrierItem(carrier=CarrierKind.memory, scope=scope, content={"text": "orders by month"},
                       experience_ids=[exps[0].id])
    db.append_item(item)
    memory.add_vectors(db, "m", 2, [(item.id, b"\x01\x02\x03\x04\x05\x06\x07\x08")])
    memory.append_utility(db, item.id, reward=1.0, alpha=0.1, q=0.1, experience_id=exps[0].id)
    db.append_revocation(Revocation(target=exps[1].id, reason="bad", author="test"))


def test_sqlite_to_postgres_and_back_is_the_same_ledger(tmp_path: Path, pg_server: TempServer,
                                                        make_experience: Callable[..., Experience]) -> None:
    url = pg_server.new_database()
    with Store(tmp_path / "a.db") as a:
        _fill(a, make_experience)
        original = table_digests(a)
        with Store(url) as pg:
            report = copy_store(a, pg)
            assert report.experiences_verified == 5 and report.tables == original
            assert pg.search("orders month")[0][0] == "memory" and pg.revoked_ids() == a.revoked_ids()
            with pytest.raises(InvalidInputError, match="not empty"):
                copy_store(a, pg)
    result = CliRunner().invoke(app, ["store", "copy", url, str(tmp_path / "b.db"), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["tables"] == original
    with Store(tmp_path / "b.db") as b:
        assert table_digests(b) == original and b.search("orders month")[0][0] == "memory"
    missing = CliRunner().invoke(app, ["store", "copy", str(tmp_path / "none.db"), str(tmp_path / "c.db")])
    assert isinstance(missing.exception, InvalidInputError) and "does not exist" in str(missing.exception)
    assert not (tmp_path / "c.db").exists()
