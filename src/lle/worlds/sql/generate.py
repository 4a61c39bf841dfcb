"""Databases as plain data, and writing them to SQLite files.

A `Database` is a pure function of (project, seed): every random choice comes from a
`random.Random` seeded with a string (sha512-hashed by Python, so the same on every machine and
under any PYTHONHASHSEED). Writing it gives byte-identical files, so the runtime's per-step file
hashes are reproducible too.
"""

from __future__ import annotations

import calendar
import random
import sqlite3
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path

Cell = int | float | str | bytes | None

FIRST_NAMES = (
    "Ada", "Ben", "Chloe", "Dev", "Elena", "Farid", "Grace", "Hugo", "Ines", "Jonas", "Kira", "Liam", "Maya", "Noah",
    "Olga", "Pablo", "Quinn", "Rosa", "Sami", "Tara", "Umar", "Vera", "Wen", "Ximena", "Yusuf", "Zoe", "Aiko", "Bruno",
    "Carla", "Dmitri", "Emeka", "Fatima", "Goran", "Hana", "Ivan", "Julia", "Kofi", "Lena", "Marco", "Nadia",
)
LAST_NAMES = (
    "Abbott", "Baptiste", "Castro", "Dubois", "Eriksen", "Fischer", "Garcia", "Haddad", "Ito", "Jansen", "Kowalski",
    "Larsen", "Moreau", "Nakamura", "Okafor", "Petrov", "Quispe", "Rossi", "Silva", "Tanaka", "Usman", "Varga",
    "Weber", "Xu", "Yilmaz", "Zhang", "Almeida", "Brennan", "Costa", "Dalton",
)
CITIES = ("Lisbon", "Oslo", "Quito", "Nairobi", "Osaka", "Lyon", "Porto", "Denver", "Krakow", "Austin", "Tunis",
          "Perth")
MONTHS = tuple(calendar.month_name)[1:]
"""January … December (English, whatever the locale)."""
START, END = date(2021, 1, 1), date(2024, 12, 31)


@dataclass(frozen=True)
class Table:
    name: str
    columns: tuple[tuple[str, str], ...]
    """(column name, SQL declaration such as `INTEGER PRIMARY KEY` or `TEXT`)."""
    rows: tuple[tuple[Cell, ...], ...]

    def column(self, name: str) -> int:
        return [c for c, _ in self.columns].index(name)


@dataclass(frozen=True)
class Database:
    project: str
    variant: str
    """Short name of the schema variant (which table and column names this seed drew)."""
    names: dict[str, str]
    """Logical name -> physical table or column name; templates write their SQL through it."""
    tables: tuple[Table, ...]

    def table(self, logical: str) -> Table:
        physical = self.names.get(logical, logical)
        return next(t for t in self.tables if t.name == physical)


def variant_names(rng: random.Random, choices: Mapping[str, tuple[str, ...]]) -> tuple[str, dict[str, str]]:
    """Draw one physical name per logical name; the variant id lists the index drawn for each."""
    names: dict[str, str] = {}
    picks: list[str] = []
    for logical, options in choices.items():
        i = rng.randrange(len(options))
        names[logical] = options[i]
        picks.append(str(i))
    return "".join(picks), names


def unique_people(rng: random.Random, n: int) -> list[str]:
    """`n` distinct full names, so a question can name a person unambiguously."""
    pool = [f"{f} {last}" for f in FIRST_NAMES for last in LAST_NAMES]
    return rng.sample(pool, n)


def random_day(rng: random.Random, start: date = START, end: date = END) -> date:
    return start + timedelta(days=rng.randrange((end - start).days + 1))


def iso(day: date) -> str:
    return day.isoformat()


def dmy(day: date) -> str:
    """The library's quirk: dates as `DD/MM/YYYY` text, which does not sort as text."""
    return day.strftime("%d/%m/%Y")


def stamp(day: date) -> str:
    """A `deleted_at` timestamp."""
    return f"{day.isoformat()} 09:30:00"


def write_database(db: Database, path: Path) -> None:
    """Write `db` to a fresh SQLite file at `path` (replacing any file there)."""
    path.unlink(missing_ok=True)
    conn = sqlite3.connect(path)
    try:
        fill(conn, db)
    finally:
        conn.close()


def fill(conn: sqlite3.Connection, db: Database) -> None:
    """Create and fill `db`'s tables on an open connection (a file or `:memory:`)."""
    # Rollback journal, not WAL: a read-only opener then never needs a -wal or -shm file next to it.
    conn.execute("PRAGMA journal_mode=DELETE")
    # A generated database is rebuilt from its seed whenever needed: fsync would only cost time.
    conn.execute("PRAGMA synchronous=OFF")
    with conn:
        for table in db.tables:
            cols = ", ".join(f"{name} {decl}" for name, decl in table.columns)
            conn.execute(f"CREATE TABLE {table.name} ({cols})")
            marks = ", ".join("?" for _ in table.columns)
            conn.executemany(f"INSERT INTO {table.name} VALUES ({marks})", table.rows)


def memory_connection(db: Database) -> sqlite3.Connection:
    """`db` in an in-memory SQLite, for checking generated questions before any file is written."""
    conn = sqlite3.connect(":memory:")
    fill(conn, db)
    return conn
