"""Where a run keeps its stores: one file per strategy in the run folder (imported by the loop and by what
reads a run, without importing the loop)."""

from __future__ import annotations

from pathlib import Path


def strategy_db(folder: Path, strategy: str) -> Path:
    return folder / f"{strategy}.db"
