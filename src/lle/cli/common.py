"""What every CLI module shares: the workspace option's value, JSON output, the store."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from rich.console import Console

from lle import workspace
from lle.store import Store

MAX_ROWS = 1_000_000_000
"""Upper bound of `--limit`/`--offset`: past it SQLite's 64-bit integers overflow (and no store is that big)."""

console = Console(soft_wrap=True)
err_console = Console(stderr=True)


@dataclass
class Settings:
    workspace: str | None = None


settings = Settings()


def open_store() -> Store:
    return workspace.open_store(settings.workspace)


def print_json(value: Any) -> None:
    # Plain print, not rich: JSON output must stay machine-readable (no wrapping, no markup).
    print(json.dumps(value, indent=2, ensure_ascii=False, default=str))
