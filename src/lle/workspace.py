"""Where lle keeps its files: `.lle/` in the current folder unless told otherwise."""

from __future__ import annotations

import os
from pathlib import Path

from lle.errors import WorkspaceError
from lle.store import Store

ENV_VAR = "LLE_WORKSPACE"
STORE_URL_VAR = "LLE_STORE_URL"
"""A postgresql:// URL: the workspace's store lives on that server instead of in `.lle/lle.db`."""
DEFAULT = ".lle"
DB_NAME = "lle.db"


def resolve(workspace: str | Path | None = None) -> Path:
    """The workspace folder: the argument, else `$LLE_WORKSPACE`, else `./.lle`."""
    chosen = workspace or os.environ.get(ENV_VAR) or DEFAULT
    path = Path(chosen).expanduser()
    if path.exists() and not path.is_dir():
        raise WorkspaceError(f"workspace {path} is a file, not a folder; pass --workspace DIR or set {ENV_VAR}")
    return path


def db_path(workspace: str | Path | None = None) -> Path:
    return resolve(workspace) / DB_NAME


def open_store(workspace: str | Path | None = None, *, read_only: bool = False) -> Store:
    """Open (creating on first use) the workspace's store: `$LLE_STORE_URL` when set, else `.lle/lle.db`.

    With `read_only` (reading commands) nothing is created, migrated nor written: a missing store is refused."""
    url = os.environ.get(STORE_URL_VAR)
    if url:
        return Store(url, read_only=read_only)
    folder = resolve(workspace)
    if read_only:
        return Store(folder / DB_NAME, read_only=True)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise WorkspaceError(f"cannot create workspace {folder}: {err.strerror}; pass --workspace DIR") from err
    return Store(folder / DB_NAME)
