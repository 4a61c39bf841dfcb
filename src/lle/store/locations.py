"""Where a store is and whether its file is one: a PostgreSQL URL or a SQLite path, and the SQLite
header checked before anything opens the file (so a foreign or truncated file is refused untouched)."""

from __future__ import annotations

import os
import re
import struct
from pathlib import Path

from lle.errors import NotAStoreError

SQLITE_MAGIC = b"SQLite format 3\x00"


def is_url(location: str | Path) -> bool:
    """True for a PostgreSQL URL (`postgresql://…`, `postgres://…`), False for a SQLite file path.

    Also for such a URL that went through `Path` (`postgresql:/…`: a PostgreSQL store's `.path`), so
    a caller that reopens a store by its path (`Store(store.path)`) reopens the same one."""
    return str(location).startswith(("postgresql:/", "postgres:/"))


def as_url(location: str | Path) -> str:
    """The URL `is_url` recognised, with the `//` that `Path` folds back."""
    return re.sub(r"^(postgres(?:ql)?):/(?!/)", r"\1://", str(location))


def check_file(path: Path) -> None:
    """Refuse a file that is not SQLite, or is shorter than its own header says, before touching it."""
    if not path.exists() or path.stat().st_size == 0:
        if path.parent and not path.parent.exists():
            os.makedirs(path.parent, exist_ok=True)
        return
    size = path.stat().st_size
    with open(path, "rb") as f:
        header = f.read(100)
    if len(header) < 100 or not header.startswith(SQLITE_MAGIC):
        raise NotAStoreError(f"{path} is not a SQLite file; move it aside or point --workspace elsewhere")
    page_size = struct.unpack(">H", header[16:18])[0]
    page_size = 65536 if page_size == 1 else page_size
    pages, valid_for, change_counter = struct.unpack(">I", header[28:32])[0], header[92:96], header[24:28]
    wal = path.with_name(path.name + "-wal")
    # A checkpoint killed midway leaves the file shorter than its header says; the WAL still holds
    # those pages and SQLite replays them on open. Only without a WAL is a short file truncated.
    pending_wal = wal.exists() and wal.stat().st_size > 0
    if valid_for == change_counter and size < pages * page_size and not pending_wal:
        raise NotAStoreError(
            f"{path} is truncated ({size} bytes, its header says {pages * page_size}); restore it from a backup"
        )
