"""The append-only experience store (see README.md in this folder)."""

from lle.store.sqlite import ExperienceRow, Store, migrations

__all__ = ["ExperienceRow", "Store", "migrations"]
