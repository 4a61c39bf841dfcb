"""W: the worlds agents act in (see README.md in this folder)."""

from lle.worlds.base import (
    BaseWorld,
    CheckReport,
    TaskFamily,
    ToolWorld,
    check_family,
    check_world,
    open_family,
    open_world,
)

__all__ = [
    "BaseWorld",
    "CheckReport",
    "TaskFamily",
    "ToolWorld",
    "check_family",
    "check_world",
    "open_family",
    "open_world",
]
