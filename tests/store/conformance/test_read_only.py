"""A store opened for reading (`Store(location, read_only=True)`, what reading commands open) on both backends:
reads as a writable open does, refuses every write with one line, and neither creates nor migrates a store."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from lle.core import Experience
from lle.errors import ReadOnlyStoreError, StoreError
from lle.store import Store

MakeExperience = Callable[..., Experience]


def test_a_store_opened_for_reading_reads_and_never_writes(location: str, make_experience: MakeExperience) -> None:
    with Store(location) as db:
        exp = db.append_experience(make_experience())
    with Store(location, read_only=True) as db:
        assert db.opened_read_only and db.read_only and not db.writable
        assert db.get_experience(exp.id) == exp and db.count("experiences") == 1
        assert [r.id for r in db.list_experiences()] == [exp.id]
        with pytest.raises(ReadOnlyStoreError, match="opened for reading only"):
            db.append_experience(make_experience(project="library"))
        with pytest.raises(ReadOnlyStoreError, match="opened for reading only"), db.transaction():
            pass
    with Store(location) as db:  # the refused write left nothing, and a writable open writes again
        assert db.count("experiences") == 1
        db.append_experience(make_experience(project="library"))
        assert db.count("experiences") == 2


def test_reading_an_empty_postgres_database_creates_no_store(pg_server) -> None:  # type: ignore[no-untyped-def]
    url = pg_server.new_database()  # nothing migrated
    with pytest.raises(StoreError, match="neither creates nor migrates"):
        Store(url, read_only=True)
    import psycopg

    with psycopg.connect(url) as conn:  # no table made by the refused read
        row = conn.execute("SELECT count(*) FROM information_schema.tables WHERE table_schema = current_schema()"
                           ).fetchone()
        assert row is not None and row[0] == 0
    with Store(url) as db:  # a writable open makes it
        assert db.schema_version == db.latest_version and db.count("experiences") == 0
