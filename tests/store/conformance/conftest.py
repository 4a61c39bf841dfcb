"""Both store backends behind one fixture: `store` is a fresh SQLite file or a fresh PostgreSQL database.

PostgreSQL runs as a throwaway server for the whole session (`lle.store.pg_server.TempServer`:
initdb + pg_ctl in a temporary folder, a unix socket there, as `nobody` when we are root). The
postgres half skips, saying why, only when PostgreSQL's binaries or psycopg are not installed.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from lle.store import Store
from lle.store.pg_server import TempServer, find_bin_dir

BACKENDS = ["sqlite", "postgres"]


@pytest.fixture(scope="session")
def pg_server() -> Iterator[TempServer]:
    if importlib.util.find_spec("psycopg") is None:
        pytest.skip("psycopg is not installed: pip install 'lle[postgres]' (make install does)")
    if find_bin_dir() is None:
        pytest.skip("PostgreSQL is not installed (no initdb/pg_ctl in /usr/lib/postgresql/*/bin or $PATH): "
                    "apt-get install postgresql (make test does, as root)")
    with TempServer() as server:
        yield server


@pytest.fixture(scope="session")
def pg_migrated(pg_server: TempServer) -> str:
    """A database migrated once, copied for each test (CREATE DATABASE … TEMPLATE): opening a copy
    migrates nothing, which saves most of a test's set-up. Migrating itself is tested on new ones."""
    url = pg_server.new_database("template")
    Store(url).close()
    return url.split("?")[0].rsplit("/", 1)[-1]


@pytest.fixture(params=BACKENDS)
def new_location(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[], str]:
    """Makes the location of a fresh, empty store of this test's backend (a path or a URL)."""
    if request.param == "sqlite":
        counter = iter(range(1000))
        return lambda: str(tmp_path / f"lle-{next(counter)}.db")
    server: TempServer = request.getfixturevalue("pg_server")
    template: str = request.getfixturevalue("pg_migrated")
    return lambda: server.new_database(template=template)


@pytest.fixture
def location(new_location: Callable[[], str]) -> str:
    return new_location()


@pytest.fixture
def store(location: str) -> Iterator[Store]:
    with Store(location) as db:
        yield db
