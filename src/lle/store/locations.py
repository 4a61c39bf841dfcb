"""Where a store is and whether its file is one: a PostgreSQL URL or a SQLite path, and the SQLite
header checked before anything opens the file (so a foreign or truncated file is refused untouched)."""

from __future__ import annotations

import re
import struct
from pathlib import Path
from urllib.parse import urlsplit

from lle.errors import InvalidInputError, NotAStoreError

SQLITE_MAGIC = b"SQLite format 3\x00"


def is_url(location: str | Path) -> bool:
    """True for a PostgreSQL URL (`postgresql://…`, `postgres://…`), False for a SQLite file path.

    Also for such a URL that went through `Path` (`postgresql:/…`: a PostgreSQL store's `.path`), so
    a caller that reopens a store by its path (`Store(store.path)`) reopens the same one."""
    return str(location).startswith(("postgresql:/", "postgres:/"))


def as_url(location: str | Path) -> str:
    """The URL `is_url` recognised, with the `//` that `Path` folds back."""
    return re.sub(r"^(postgres(?:ql)?):/(?!/)", r"\1://", str(location))


def check_location(location: str | Path) -> None:
    """Refuse, in one line, a location no backend opens: a URL of another scheme (it would be taken for a file
    path and written), a PostgreSQL URL that does not parse, a folder."""
    text = str(location)
    scheme = re.match(r"([A-Za-z][A-Za-z0-9+.-]+):/", text)
    if scheme and not is_url(text):
        raise InvalidInputError(f"{text}: lle stores are SQLite files or PostgreSQL, not {scheme.group(1)}; pass a "
                                "file path (lle.db) or a postgresql://USER@HOST[:PORT]/DATABASE URL")
    if is_url(text):
        try:
            urlsplit(as_url(text)).port  # noqa: B018 (parses host and port; raises on a malformed one)
        except ValueError as err:
            raise InvalidInputError(f"the postgresql:// store URL does not parse ({err}); write it as "
                                    "postgresql://USER@HOST[:PORT]/DATABASE") from None
    elif Path(text).is_dir():
        raise InvalidInputError(f"{text} is a folder; a store is a file: pass a path such as {Path(text) / 'lle.db'}")


def check_file(path: Path) -> None:
    """Refuse a file that is empty, is not SQLite, or is shorter than its own header says, before touching it.

    Empty is damage: lle makes a store whole before it has its name (`sqlite_open.create`), so a 0-byte
    store was truncated or copied badly, and SQLite would take it for a new one and start the ledger over."""
    if not path.exists():
        return
    size = path.stat().st_size
    if size == 0:
        raise NotAStoreError(f"{path} is empty (0 bytes): the store is damaged (truncated, or a copy that failed); "
                             f"restore it from a backup, or move it aside (`mv {path} {path}.damaged`) to start "
                             "a new store there")
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
