"""The SQL projects by name; each is one registered world (`sql/<name>-v1`) with its own rules."""

from __future__ import annotations

from lle.worlds.sql.clinic import CLINIC
from lle.worlds.sql.library import LIBRARY
from lle.worlds.sql.questions import Project
from lle.worlds.sql.shop import SHOP

PROJECTS: dict[str, Project] = {p.name: p for p in (SHOP, LIBRARY, CLINIC)}
