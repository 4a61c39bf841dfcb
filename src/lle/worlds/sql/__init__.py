"""SQL worlds: generated SQLite databases per project, questions with gold SQL, an execution anchor."""

from lle.worlds.base import AnchorResult
from lle.worlds.sql.anchor import verify
from lle.worlds.sql.world import ClinicFamily, LibraryFamily, ShopFamily, SqlFamily, SqlWorld, reference_actions

__all__ = ["AnchorResult", "ClinicFamily", "LibraryFamily", "ShopFamily", "SqlFamily", "SqlWorld",
           "reference_actions", "verify"]
