"""W: the worlds agents act in, and what a world author needs (see README.md and docs/11-writing-a-world.md)."""

from lle.worlds.base import (
    SPLIT_PERCENTS,
    AnchorResult,
    BaseWorld,
    CheckReport,
    FamilyInfo,
    TaskFamily,
    ToolWorld,
    check_family,
    check_world,
    open_family,
    open_world,
    split_of,
    stable_order,
    stable_percent,
)
from lle.worlds.toolkit import SUBMIT, GameVerdict, GameWorld, replay, tool

__all__ = [
    "SPLIT_PERCENTS",
    "SUBMIT",
    "AnchorResult",
    "BaseWorld",
    "CheckReport",
    "FamilyInfo",
    "GameVerdict",
    "GameWorld",
    "TaskFamily",
    "ToolWorld",
    "check_family",
    "check_world",
    "open_family",
    "open_world",
    "replay",
    "split_of",
    "stable_order",
    "stable_percent",
    "tool",
]
