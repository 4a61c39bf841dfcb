"""The append-only experience store (see README.md in this folder)."""

from lle.store import postgres  # noqa: F401  (registers Store("postgresql://…"); psycopg loads only then)
from lle.store.sqlite import ExperienceRow, Store, migrations

__all__ = ["ExperienceRow", "Store", "migrations"]
