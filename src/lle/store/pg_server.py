"""A throwaway PostgreSQL server in a temporary folder, for tests and benchmarks.

`initdb` + `pg_ctl` from the installed PostgreSQL (Debian's `postgresql` package puts them in
`/usr/lib/postgresql/N/bin`), a unix socket in the same folder, no TCP listener, trust auth for a
superuser named `lle`. PostgreSQL refuses to run as root, so when we are root the server runs as
`nobody` (or `$LLE_PG_USER`) through `subprocess`'s `user=`/`group=`, which needs neither runuser
nor setpriv; the folder is made theirs. Nothing here is used by lle at run time.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import uuid
from pathlib import Path
from types import TracebackType
from urllib.parse import urlsplit, urlunsplit

BIN_GLOBS = ("/usr/lib/postgresql/*/bin", "/usr/local/pgsql/bin")


def find_bin_dir() -> Path | None:
    """The folder holding initdb and pg_ctl (newest Debian version first, then $PATH), or None."""
    candidates = sorted(glob.glob(BIN_GLOBS[0]), key=lambda p: int(Path(p).parent.name) if
                        Path(p).parent.name.isdigit() else 0, reverse=True) + glob.glob(BIN_GLOBS[1])
    for folder in candidates:
        if (Path(folder) / "initdb").exists() and (Path(folder) / "pg_ctl").exists():
            return Path(folder)
    initdb = shutil.which("initdb")
    if initdb and (Path(initdb).parent / "pg_ctl").exists():
        return Path(initdb).parent
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class TempServer:
    """`with TempServer() as server: url = server.new_database()` — stopped and deleted on exit."""

    def __init__(self, *, fast: bool = True) -> None:
        """`fast`: fsync off (a test server: durability across power cuts is not what it tests)."""
        bin_dir = find_bin_dir()
        if bin_dir is None:
            raise FileNotFoundError("PostgreSQL's initdb and pg_ctl were not found (install Debian's `postgresql`)")
        self.bin = bin_dir
        self.fast = fast
        self.folder = Path(tempfile.mkdtemp(prefix="lle-pg-"))
        self.port = free_port()
        self.user: tuple[int, int] | None = None
        if os.geteuid() == 0:  # initdb and postgres refuse root
            entry = pwd.getpwnam(os.environ.get("LLE_PG_USER", "nobody"))
            self.user = (entry.pw_uid, entry.pw_gid)
            os.chown(self.folder, entry.pw_uid, entry.pw_gid)
        self.started = False

    def _run(self, *args: str) -> None:
        kwargs: dict[str, object] = {}
        if self.user is not None:
            kwargs = {"user": self.user[0], "group": self.user[1], "extra_groups": []}
        done = subprocess.run([str(a) for a in args], cwd=self.folder, capture_output=True, text=True, check=False,
                              env={**os.environ, "LC_ALL": "C.UTF-8"}, **kwargs)  # type: ignore[call-overload]
        if done.returncode != 0:
            log = self.folder / "server.log"
            tail = log.read_text()[-2000:] if log.exists() else ""
            raise RuntimeError(f"{Path(args[0]).name} failed ({done.returncode}): {done.stderr.strip()}\n{tail}")

    def start(self) -> TempServer:
        data = self.folder / "data"
        self._run(str(self.bin / "initdb"), "-D", str(data), "-U", "lle", "--auth=trust", "-E", "UTF8",
                  "--locale=C.UTF-8", "--no-sync")
        options = f"-p {self.port} -k {self.folder} -c listen_addresses='' -c max_connections=200"
        if self.fast:
            options += " -c fsync=off -c full_page_writes=off"
        self._run(str(self.bin / "pg_ctl"), "-D", str(data), "-l", str(self.folder / "server.log"), "-w",
                  "-t", "60", "-o", options, "start")
        self.started = True
        return self

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://lle@/{database}?host={self.folder}&port={self.port}"

    def new_database(self, prefix: str = "lle", *, template: str | None = None) -> str:
        """A fresh database (empty, or a copy of database `template`, which nobody may be connected to); its URL."""
        return self.database_on(self.url(), prefix, template=template)

    @staticmethod
    def database_on(url: str, prefix: str = "lle", *, template: str | None = None) -> str:
        """A fresh database on the server `url` points at (its user may create databases); its URL."""
        import psycopg

        name = f"{prefix}_{uuid.uuid4().hex[:12]}"
        copy = f' TEMPLATE "{template}"' if template else ""
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"{copy}'.encode())
        parts = urlsplit(url)
        return urlunsplit(parts._replace(path="/" + name))

    def stop(self) -> None:
        if self.started:
            self._run(str(self.bin / "pg_ctl"), "-D", str(self.folder / "data"), "-m", "immediate", "-w", "stop")
            self.started = False
        shutil.rmtree(self.folder, ignore_errors=True)

    def __enter__(self) -> TempServer:
        return self.start()

    def __exit__(self, kind: type[BaseException] | None, err: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()
