"""Copy what a run left in its capped tmpfs back to the host workdir (docs/25-sandbox.md).

The run wrote into a tmpfs whose size and inode count the kernel caps. Once every process of the run is
gone, `sync_back` makes the host workdir hold what that tmpfs holds. The host writes untrusted content
there (as root, when it runs as root), so it goes through folder fds and never follows a symlink, never
writes into a file that exists (a changed entry is unlinked and made anew, so a host file hard-linked in
is never written through), leaves what did not change (same bytes, mode, owner and mtime) as it is, keeps
sparse files sparse, drops setuid/setgid bits, and leaves sockets and device files behind. It walks with
two folder fds whatever the depth, climbing back up through `..`, which nothing moves while it works.
"""

from __future__ import annotations

import errno
import os
import shutil
import stat

_CHUNK = 1 << 20
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_MADE = (stat.S_IFREG, stat.S_IFLNK, stat.S_IFIFO)


def _extents(fd: int, size: int) -> list[tuple[int, int]]:
    """Where a file holds data; the holes between stay holes."""
    spans, pos = [], 0
    while pos < size:
        try:
            start = os.lseek(fd, pos, os.SEEK_DATA)
        except OSError as err:
            if err.errno != errno.ENXIO:  # ENXIO: only a hole is left
                raise
            break
        pos = os.lseek(fd, start, os.SEEK_HOLE)
        spans.append((start, pos))
    return spans


def _pieces(fd: int, size: int) -> list[tuple[int, int]]:
    return [(off, min(_CHUNK, end - off)) for start, end in _extents(fd, size) for off in range(start, end, _CHUNK)]


def _same(src: int, dst: int, name: str, s: os.stat_result, d: os.stat_result) -> bool:
    mode = stat.S_IMODE(s.st_mode) & ~(stat.S_ISUID | stat.S_ISGID)
    if (s.st_uid, s.st_gid) != (d.st_uid, d.st_gid):
        return False
    if stat.S_ISLNK(s.st_mode):
        return os.readlink(name, dir_fd=src) == os.readlink(name, dir_fd=dst)
    if (mode, s.st_mtime_ns, s.st_size) != (stat.S_IMODE(d.st_mode), d.st_mtime_ns, d.st_size):
        return False
    if not stat.S_ISREG(s.st_mode):
        return True
    sfd, dfd = os.open(name, _FILE, dir_fd=src), os.open(name, _FILE, dir_fd=dst)
    try:
        return (_extents(sfd, s.st_size) == _extents(dfd, s.st_size)
                and all(os.pread(sfd, n, off) == os.pread(dfd, n, off) for off, n in _pieces(sfd, s.st_size)))
    finally:
        os.close(sfd)
        os.close(dfd)


def _settle(st: os.stat_result, where: int | str, dir_fd: int | None = None) -> None:
    """Give `where` (an fd, or a name in `dir_fd`) the owner, mode and times of `st`, without setuid bits."""
    if os.geteuid() == 0:
        os.chown(where, st.st_uid, st.st_gid, dir_fd=dir_fd, follow_symlinks=dir_fd is None)
    if not stat.S_ISLNK(st.st_mode):  # a FIFO made a moment ago in a folder no one else writes
        os.chmod(where, stat.S_IMODE(st.st_mode) & ~(stat.S_ISUID | stat.S_ISGID), dir_fd=dir_fd)
    os.utime(where, ns=(st.st_atime_ns, st.st_mtime_ns), dir_fd=dir_fd, follow_symlinks=dir_fd is None)


def _level(src: int, dst: int) -> list[str]:
    """Sync one folder's own entries; return the names of its subfolders, still to do."""
    names = set(os.listdir(src))
    for name in set(os.listdir(dst)) - names:
        if stat.S_ISDIR(os.stat(name, dir_fd=dst, follow_symlinks=False).st_mode):
            shutil.rmtree(name, dir_fd=dst)  # fd-based: never follows a symlink
        else:
            os.unlink(name, dir_fd=dst)
    folders = []
    for name in sorted(names):
        s = os.stat(name, dir_fd=src, follow_symlinks=False)
        try:
            d: os.stat_result | None = os.stat(name, dir_fd=dst, follow_symlinks=False)
        except FileNotFoundError:
            d = None
        kind = stat.S_IFMT(s.st_mode)
        if d is not None and (stat.S_IFMT(d.st_mode) != kind or (kind in _MADE and not _same(src, dst, name, s, d))):
            (shutil.rmtree if stat.S_ISDIR(d.st_mode) else os.unlink)(name, dir_fd=dst)
            d = None
        if kind == stat.S_IFDIR:
            if d is None:
                os.mkdir(name, 0o700, dir_fd=dst)
            folders.append(name)
        elif d is not None or kind not in _MADE:
            continue  # unchanged; or a socket or device, which stays behind
        elif kind == stat.S_IFLNK:
            os.symlink(os.readlink(name, dir_fd=src), name, dir_fd=dst)
            _settle(s, name, dst)
        elif kind == stat.S_IFIFO:
            os.mkfifo(name, 0o600, dir_fd=dst)
            _settle(s, name, dst)
        else:
            sfd = os.open(name, _FILE, dir_fd=src)
            try:
                dfd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600,
                              dir_fd=dst)
                try:
                    for off, n in _pieces(sfd, s.st_size):
                        if os.pwrite(dfd, data := os.pread(sfd, n, off), off) != len(data):
                            raise OSError(errno.EIO, f"short write copying {name} back to the workdir")
                    os.ftruncate(dfd, s.st_size)
                    _settle(s, dfd)
                finally:
                    os.close(dfd)
            finally:
                os.close(sfd)
    return folders


def _move(fds: list[int], name: str) -> list[int]:
    """Both folders' `name` (a subfolder, or `..`), opened; `fds` closed once both are."""
    new: list[int] = []
    try:
        for fd in fds:
            new.append(os.open(name, _DIR, dir_fd=fd))
    except BaseException:
        for fd in new:
            os.close(fd)
        raise
    for fd in fds:
        os.close(fd)
    return new


def sync_back(src: int, dst: int) -> None:
    """Make the folder open as `dst` hold exactly what the folder open as `src` holds."""
    fds = [os.dup(src), os.dup(dst)]
    try:
        todo = [_level(*fds)]
        while todo:
            if todo[-1]:
                fds = _move(fds, todo[-1].pop())
                todo.append(_level(*fds))
            else:
                todo.pop()
                _settle(os.fstat(fds[0]), fds[1])  # after its entries, whose changes moved its mtime
                if todo:
                    fds = _move(fds, "..")
    finally:
        for fd in fds:
            os.close(fd)
