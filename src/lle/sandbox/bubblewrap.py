"""Run untrusted commands (tests, agent code) under bubblewrap (DESIGN §6).

Each run gets a fresh unprivileged uid, every namespace unshared, no capabilities, a seccomp filter,
only `/usr` from the host (read-only), a copy of the workdir at `/work` (read-write, protected paths
read-only) on a tmpfs the kernel caps in bytes and files, copied back once the run is over, rlimits, and
a wall-clock limit that kills the whole pid namespace. Without bwrap, untrusted code is
refused unless the caller opts into `unsafe_no_sandbox=True` and records `sandboxed=False`.
See docs/25-sandbox.md for what is guaranteed and what is not.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import platform
import re
import secrets
import select
import selectors
import shutil
import signal
import stat
import struct
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from lle.errors import InvalidInputError, SandboxUnavailableError
from lle.sandbox.copyback import sync_back

BWRAP = "bwrap"
"""Name or path of the bubblewrap binary; module-level so a deployment (or a test) can point elsewhere."""

WORKDIR_INSIDE = "/work"
"""Where the workdir appears inside the sandbox; argv runs with this as cwd."""

BASE_ENV = {"PATH": "/usr/bin:/bin", "HOME": "/tmp", "LANG": "C.UTF-8", "TMPDIR": "/tmp"}
"""The whole environment a sandboxed command starts with, before the caller's `env`."""

INSTALL_HINT = (
    "install it with `sudo apt-get install bubblewrap` (or run `make test` as root, which installs it); "
    "to run without isolation anyway pass unsafe_no_sandbox=True (`--unsafe-no-sandbox`) and record it")

# A fresh uid per run: RLIMIT_NPROC is counted per uid, so parallel runs sharing `nobody` would eat
# each other's process budget, and a uid that owns nothing on the host can reach nothing there.
_UID_BASE, _UID_SPAN = 1_500_000_000, 1 << 20

# The stage runs first, in a private mount namespace, as root (a non-root caller gets a user namespace of
# its own, whose root may mount a tmpfs): it mounts a tmpfs over $2, copies the workdir ($1) in, and caps
# the tmpfs at what the copy takes plus $3 bytes and $4 inodes, so the kernel refuses every write past
# the cap; bwrap binds it at /work, and `_execute` takes it back through /proc/<pid>/root. $2 is a path
# anyone can traverse: bwrap resolves bind sources as the run's uid. `env -i`: the shell's `cd` set
# OLDPWD to the host workdir, and bwrap (pid 1 inside, whose environ the run can read) would carry it in.
_STAGE = "/tmp"
_STAGE_SCRIPT = ('set -e; cd -- "$1"; mount -t tmpfs -o nosuid,nodev,mode=700 lle-work "$2"; cp -a . "$2"; '
                 'set -- $(stat -f -c "%S %b %f %c %d" "$2") "$@"; '  # block size, blocks, free, inodes, free
                 'mount -t tmpfs -o remount,nosuid,nodev,size=$(($1 * ($2 - $3) + $8)),nr_inodes=$(($4 - $5 + $9)) '
                 'lle-work "$7"; '
                 'cd /; shift 9; exec env -i PATH=/usr/bin:/bin "$@"')

_TEST_FILE = re.compile(r"(test_.*|.*_test|conftest)\.py")
"""A protected file with such a name protects its whole folder: else a run could add `conftest.py` (or
another test module) beside it and change what the protected tests do."""

_BLOCKED_SYSCALLS = {  # same order on both; aarch64 has no uselib
    "x86_64": (101, 310, 311, 298, 321, 323, 250, 248, 249, 246, 320, 175, 313, 176, 425, 426, 427, 163,
               167, 168, 169, 165, 166, 155, 304, 303, 179, 103, 134, 212, 428, 429, 430, 431, 432, 433, 442),
    "aarch64": (117, 270, 271, 241, 280, 282, 219, 217, 218, 104, 294, 105, 273, 106, 425, 426, 427, 89,
                224, 225, 142, 40, 39, 41, 265, 264, 60, 116, 18, 428, 429, 430, 431, 432, 433, 442),
}
"""Syscalls no test needs, with a record of kernel escapes or reach into other processes: ptrace,
process_vm_readv/writev, perf_event_open, bpf, userfaultfd, keyctl, add_key, request_key, kexec_load,
kexec_file_load, init/finit/delete_module, io_uring_*, acct, swapon/off, reboot, mount, umount2,
pivot_root, open_by_handle_at, name_to_handle_at, quotactl, syslog, uselib, lookup_dcookie, and the new
mount API (open_tree, move_mount, fsopen, fsconfig, fsmount, fspick, mount_setattr)."""
_AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}


@dataclass(frozen=True)
class SandboxLimits:
    cpu_seconds: int = 10
    memory_mb: int = 1024
    file_size_mb: int = 64
    max_processes: int = 64
    wall_seconds: float = 30.0
    max_output_bytes: int = 65536
    workdir_mb: int = 100
    """How much the workdir may grow during a run (its tmpfs's pages, every file together): the kernel
    refuses writes past it, and a run that fills it fails. `file_size_mb` bounds each file; this all."""
    workdir_files: int = 10_000
    """How many files, folders and links the workdir may gain during a run (its tmpfs's inodes), likewise."""


@dataclass(frozen=True)
class SandboxResult:
    returncode: int | None
    """Exit status (128+N when killed by signal N inside); None when the wall-clock limit killed it."""
    stdout: str
    stderr: str
    timed_out: bool
    duration_ms: float
    sandboxed: bool
    """False for `unsafe_no_sandbox` runs; record it on every experience the run touches."""


def bwrap_available() -> bool:
    """Whether the bubblewrap binary named by `BWRAP` can be found."""
    return shutil.which(BWRAP) is not None


def _rel_parts(relpath: str) -> tuple[str, ...]:
    parts = tuple(p for p in Path(relpath).parts if p not in ("", "."))
    if not parts or Path(relpath).is_absolute() or ".." in parts:
        raise InvalidInputError(f"path {relpath!r} must be relative to the workdir, without `..`; "
                                "write it like `tests/test_app.py`")
    return parts


def _open_beneath(root_fd: int, parts: Sequence[str], final_flags: int) -> int:
    """Open root/parts… refusing a symlink at any component: race-free, unlike checking realpath first."""
    fd = os.dup(root_fd)
    try:
        for i, name in enumerate(parts):
            flags = final_flags if i == len(parts) - 1 else os.O_PATH | os.O_DIRECTORY
            try:
                nfd = os.open(name, flags | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
            except OSError as err:
                if err.errno not in (errno.ELOOP, errno.ENOTDIR):
                    raise
                raise InvalidInputError(f"refusing {'/'.join(parts)!r}: {'/'.join(parts[:i + 1])!r} is a symlink or "
                                        "not a folder; sandboxed code may have planted it, so it is never followed"
                                        ) from err
            os.close(fd)
            fd = nfd
        if stat.S_ISLNK(os.fstat(fd).st_mode):  # O_PATH|O_NOFOLLOW opens a final symlink itself
            raise InvalidInputError(f"refusing {'/'.join(parts)!r}: it is a symlink, and is never followed")
        return fd
    except BaseException:
        os.close(fd)
        raise


def read_file_nofollow(workdir: Path, relpath: str, max_bytes: int = 1 << 20) -> bytes:
    """Up to `max_bytes` of a regular file in `workdir`, never following a symlink on the way.

    Raises `InvalidInputError` for a symlink, a path leaving the workdir, or a non-regular file
    (a FIFO planted to hang the reader), and `FileNotFoundError` when it does not exist.
    """
    parts = _rel_parts(relpath)
    root = os.path.realpath(workdir)
    resolved = os.path.realpath(os.path.join(root, *parts))
    if os.path.commonpath([root, resolved]) != root:
        raise InvalidInputError(f"refusing {relpath!r}: it resolves to {resolved}, outside the workdir {root}")
    root_fd = os.open(root, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        fd = _open_beneath(root_fd, parts, os.O_RDONLY | os.O_NONBLOCK)
    finally:
        os.close(root_fd)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise InvalidInputError(f"refusing {relpath!r}: not a regular file")
        chunks, left = [], max_bytes
        while left > 0 and (chunk := os.read(fd, min(left, 1 << 16))):
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _bpf(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("HBBI", code, jt, jf, k)  # struct sock_filter


@functools.cache
def _seccomp_filter() -> bytes | None:
    """Classic BPF for bwrap's --seccomp: EPERM for `_BLOCKED_SYSCALLS`, death for a foreign ABI."""
    arch = platform.machine()
    if arch not in _AUDIT_ARCH:
        return None  # unknown syscall table: namespaces, capabilities and rlimits still hold
    ld, jeq, jge, ret = 0x20, 0x15, 0x35, 0x06
    nrs = _BLOCKED_SYSCALLS[arch]
    # A 32-bit (int 0x80) or x32 call goes through another syscall table and would slip past the numbers.
    prog = [_bpf(ld, 0, 0, 4), _bpf(jeq, 1, 0, _AUDIT_ARCH[arch]), _bpf(ret, 0, 0, 0x80000000), _bpf(ld, 0, 0, 0)]
    if arch == "x86_64":
        prog.append(_bpf(jge, len(nrs) + 1, 0, 0x40000000))
    prog += [_bpf(jeq, len(nrs) - i, 0, nr) for i, nr in enumerate(nrs)]
    prog += [_bpf(ret, 0, 0, 0x7FFF0000), _bpf(ret, 0, 0, 0x00050000 | errno.EPERM)]
    return b"".join(prog)


def _memfd(data: bytes) -> int:
    fd = os.memfd_create("lle-sandbox")  # CLOEXEC; Popen's pass_fds hands it to bwrap alone
    os.write(fd, data)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def _tree(top: str) -> Iterator[str]:
    yield top
    for dirpath, dirnames, filenames in os.walk(top, followlinks=False):
        yield from (os.path.join(dirpath, name) for name in (*dirnames, *filenames))


def _chown_tree(root: str, uid: int, gid: int) -> None:
    """Hand the workdir to this run's uid. Never follows a symlink, and skips hard-linked files:
    they may be host files linked in, and chowning them would hand them to the sandbox."""
    for path in _tree(root):
        st = os.lstat(path)
        if stat.S_ISLNK(st.st_mode) or (not stat.S_ISDIR(st.st_mode) and st.st_nlink > 1):
            continue
        if (st.st_uid, st.st_gid) != (uid, gid):
            os.chown(path, uid, gid, follow_symlinks=False)


def _drop_setid(root: str) -> None:
    """Drop setuid/setgid bits from everything in an unsafe run's workdir (a sandboxed run's copy-back does).

    A run may leave a setuid file for the host to execute later; each name is opened O_PATH|O_NOFOLLOW
    beneath its folder's fd (`fwalk`), so a symlink is never followed to a host file."""
    special = stat.S_ISUID | stat.S_ISGID
    for _dirpath, dirnames, filenames, dir_fd in os.fwalk(root, follow_symlinks=False):
        for name in (".", *dirnames, *filenames) if _dirpath == root else (*dirnames, *filenames):
            try:
                fd = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
            except OSError:
                continue  # gone since the folder was listed
            try:
                st = os.fstat(fd)
                if stat.S_ISLNK(st.st_mode) or not st.st_mode & special:
                    continue
                # fchmod refuses an O_PATH fd; its /proc link reaches the very inode that was opened.
                with contextlib.suppress(PermissionError):  # not ours: the run could not have set its bits
                    os.chmod(f"/proc/self/fd/{fd}", stat.S_IMODE(st.st_mode) & ~special)
            finally:
                os.close(fd)


def _check_workdir(root: str) -> None:
    # As root the whole tree is handed to the sandbox uid: a system or home folder must never be it.
    system = ("/usr", "/etc", "/proc", "/sys", "/dev", "/boot", "/bin", "/sbin", "/lib", "/lib64", "/var/lib")
    home = os.path.realpath(Path.home())
    if (root.count("/") < 2 or root in (home, os.path.dirname(home))
            or any(root == s or root.startswith(s + "/") for s in system)):
        raise InvalidInputError(f"workdir {root} is a system or home folder; give the sandbox a scratch folder "
                                "of its own (e.g. tempfile.mkdtemp())")
    if not os.path.isdir(root):
        raise InvalidInputError(f"workdir {root} is not a folder; create it before running in it")


def _pids(match: Callable[[str], bool]) -> list[int]:
    """Host pids (but ours) whose /proc folder satisfies `match`."""
    found = []
    for entry in os.listdir("/proc"):
        with contextlib.suppress(OSError):  # it may exit while we look
            if entry.isdigit() and int(entry) != os.getpid() and match(f"/proc/{entry}"):
                found.append(int(entry))
    return found


class Sandbox:
    """Runs argv under bubblewrap with `limits`; one instance may serve many runs, from many threads."""

    def __init__(self, limits: SandboxLimits = SandboxLimits(), *, unsafe_no_sandbox: bool = False) -> None:
        if limits.workdir_mb < 1 or limits.workdir_files < 1:  # tmpfs reads a 0 as "no limit"
            raise InvalidInputError(f"workdir_mb and workdir_files must be at least 1, got {limits}")
        self.limits = limits
        self.unsafe_no_sandbox = unsafe_no_sandbox
        self._bwrap = None if unsafe_no_sandbox else shutil.which(BWRAP)
        if not unsafe_no_sandbox and self._bwrap is None:
            raise SandboxUnavailableError(f"bubblewrap (`{BWRAP}`) is not installed, so untrusted code cannot run "
                                          f"isolated; {INSTALL_HINT}")
        for tool in ("prlimit", "setpriv", "unshare", "mount"):
            if shutil.which(tool) is None:
                raise SandboxUnavailableError(f"`{tool}` is missing; install util-linux (`apt-get install util-linux`)")

    def run(self, argv: list[str], *, workdir: Path, protected: Sequence[str] = (),
            env: Mapping[str, str] | None = None, stdin: str | None = None) -> SandboxResult:
        """Run `argv` with cwd = the workdir (`/work` inside); `env` is added to `BASE_ENV`."""
        if not argv or not all(isinstance(a, str) for a in argv):
            raise InvalidInputError(f"argv must be a non-empty list of strings, got {argv!r}")
        extra = dict(env or {})
        for key, value in extra.items():
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key) or "\0" in value:
                raise InvalidInputError(f"environment variable {key!r} has a bad name or a NUL in its value")
        root = os.path.realpath(workdir)
        _check_workdir(root)
        if self.unsafe_no_sandbox:
            # No pid namespace to tear down: the run's processes are found again through their environment.
            token = f"LLE_SANDBOX_RUN={secrets.token_hex(8)}"
            with tempfile.TemporaryDirectory(prefix="lle-unsafe-home-") as home:
                env_ = {**BASE_ENV, "HOME": home, "TMPDIR": home, **extra, "LLE_SANDBOX_RUN": token.split("=")[1]}
                try:
                    return self._execute([*self._prlimit(), *argv], root, env_, stdin, [], None, token.encode(), root)
                finally:
                    _drop_setid(root)
        fds: list[int] = []  # passed to bwrap or kept for it, closed here afterwards
        try:
            cmd, pipes = self._bwrap_cmd(argv, root, protected, extra, fds)
            return self._execute(cmd, "/", {"PATH": BASE_ENV["PATH"]}, stdin, fds, pipes, None, root)
        finally:
            for fd in fds:
                with contextlib.suppress(OSError):
                    os.close(fd)

    def _prlimit(self) -> list[str]:
        lim, mib = self.limits, 1 << 20
        # RLIMIT_NPROC counts every process of the uid: a non-root caller's own ones are added back.
        uid = os.getuid()
        nproc = lim.max_processes + (0 if os.geteuid() == 0 else len(_pids(lambda p: os.stat(p).st_uid == uid)))
        # The hard CPU limit is one second above the soft one: SIGXCPU first, SIGKILL if that is ignored.
        return ["prlimit", f"--cpu={lim.cpu_seconds}:{lim.cpu_seconds + 1}", f"--as={lim.memory_mb * mib}",
                f"--fsize={lim.file_size_mb * mib}", f"--nproc={nproc}", "--core=0", "--"]

    def _bwrap_cmd(self, argv: list[str], root: str, protected: Sequence[str], extra: dict[str, str],
                   fds: list[int]) -> tuple[list[str], tuple[int, int]]:
        assert self._bwrap is not None
        as_root = os.geteuid() == 0
        uid = _UID_BASE + secrets.randbelow(_UID_SPAN) if as_root else os.getuid()
        gid = uid if as_root else os.getgid()

        def keep(fd: int) -> str:
            fds.append(fd)
            return str(fd)

        # A protected test file below the workdir protects its folder as a whole (see `_TEST_FILE`).
        paths = sorted({q[:-1] if len(q) > 1 and _TEST_FILE.fullmatch(q[-1]) else q
                        for q in map(_rel_parts, protected)}, key=len)
        root_fd = os.open(root, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            for parts in paths:  # bwrap would follow a symlink here, so refuse one anywhere on the way
                try:
                    os.close(_open_beneath(root_fd, parts, os.O_PATH))
                except FileNotFoundError as err:
                    raise InvalidInputError(f"protected path {'/'.join(parts)!r} does not exist in {root}; "
                                            "create it first or drop it from `protected`") from err
                for path in _tree(os.path.join(root, *parts)):
                    st = os.lstat(path)
                    if stat.S_ISREG(st.st_mode) and st.st_nlink > 1:  # a read-only mount guards one name only
                        raise InvalidInputError(f"protected file {path} has another hard link, through which "
                                                "the sandbox could edit it; copy the file instead of linking it")
        finally:
            os.close(root_fd)
        binds = ["--bind", _STAGE, WORKDIR_INSIDE]
        # A mount point cannot be renamed or removed, so binding each folder above a protected file
        # onto itself stops `mv tests tests.old && mkdir tests` from swapping the file out.
        for parts in sorted({p[:i] for p in paths for i in range(1, len(p))}, key=len):
            if not any(parts[:len(q)] == q for q in paths):
                binds += ["--bind", "/".join((_STAGE, *parts)), "/".join((WORKDIR_INSIDE, *parts))]
        for parts in paths:
            binds += ["--ro-bind", "/".join((_STAGE, *parts)), "/".join((WORKDIR_INSIDE, *parts))]
        if as_root:
            _chown_tree(root, uid, gid)
        cmd = ["unshare", *([] if as_root else ["--user", "--map-root-user"]), "--mount", "--propagation", "private",
               "--", "sh", "-c", _STAGE_SCRIPT, "lle-stage", root, _STAGE, str(self.limits.workdir_mb << 20),
               str(self.limits.workdir_files), *self._prlimit()]  # rlimits after the stage: its copy is the host's
        if as_root:
            cmd += ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups", "--inh-caps=-all",
                    "--bounding-set=-all", "--no-new-privs", "--"]
        cmd += [self._bwrap, "--unshare-all", "--unshare-user", "--uid", str(uid), "--gid", str(gid),
                "--disable-userns", "--cap-drop", "ALL",
                "--die-with-parent", "--new-session", "--hostname", "sandbox", "--clearenv",
                "--ro-bind", "/usr", "/usr"]
        cmd += [a for link in ("bin", "lib", "lib64", "sbin") if os.path.islink(f"/{link}")
                for a in ("--symlink", f"usr/{link}", f"/{link}")]
        with contextlib.suppress(OSError):  # `awk`, `cc`, `which` … resolve through /etc/alternatives
            for name in sorted(os.listdir("/etc/alternatives")):
                if (target := os.readlink(f"/etc/alternatives/{name}")).startswith(("/usr/bin/", "/usr/sbin/")):
                    cmd += ["--symlink", target, f"/etc/alternatives/{name}"]
        passwd = f"sandbox:x:{uid}:{gid}:sandbox:/tmp:/usr/sbin/nologin\nnobody:x:65534:65534::/:/usr/sbin/nologin\n"
        size = str(self.limits.file_size_mb << 20)  # tmpfs lives in host memory: cap each one
        cmd += ["--proc", "/proc", "--dev", "/dev", "--size", size, "--tmpfs", "/dev/shm", "--size", size,
                "--tmpfs", "/tmp", *binds, "--ro-bind-data", keep(_memfd(passwd.encode())), "/etc/passwd",
                "--ro-bind-data", keep(_memfd(f"sandbox:x:{gid}:\nnogroup:x:65534:\n".encode())), "/etc/group",
                "--remount-ro", "/dev", "--remount-ro", "/", "--chdir", WORKDIR_INSIDE]
        for key, value in {**BASE_ENV, **extra}.items():
            cmd += ["--setenv", key, value]
        if (prog := _seccomp_filter()) is not None:
            cmd += ["--seccomp", keep(_memfd(prog))]
        (info_r, info_w), (block_r, block_w) = os.pipe(), os.pipe()
        fds += [info_r, block_w]  # the run waits on --block-fd until the host holds its tmpfs (`_execute`)
        return [*cmd, "--info-fd", keep(info_w), "--block-fd", keep(block_r), "--", *argv], (info_r, block_w)

    def _execute(self, cmd: list[str], cwd: str, env: dict[str, str], stdin: str | None, fds: list[int],
                 pipes: tuple[int, int] | None, token: bytes | None, root: str) -> SandboxResult:
        lim, start = self.limits, time.monotonic()
        info_r, block_w = pipes or (None, None)
        stage: int | None = None  # the run's tmpfs, held open past the end of its namespace
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
                                pass_fds=[fd for fd in fds if fd not in (info_r, block_w)])
        for fd in [fd for fd in fds if fd not in (info_r, block_w)]:
            os.close(fd)  # bwrap holds its copies; the info pipe gives EOF only once ours is closed
        fds[:] = list(pipes or ())
        assert proc.stdout is not None and proc.stderr is not None
        proc_fd = os.pidfd_open(proc.pid)
        ns_fd: int | None = None  # pidfd of the pid namespace's init: its death kills all inside
        out_fd, err_fd = proc.stdout.fileno(), proc.stderr.fileno()
        bufs, dropped = {out_fd: bytearray(), err_fd: bytearray()}, {out_fd: 0, err_fd: 0}
        pending, info = memoryview((stdin or "").encode()), bytearray()
        sel = selectors.DefaultSelector()
        for fd in (out_fd, err_fd, *([info_r] if info_r is not None else [])):
            os.set_blocking(fd, False)
            sel.register(fd, selectors.EVENT_READ)
        sel.register(proc_fd, selectors.EVENT_READ)
        if proc.stdin is not None:
            os.set_blocking(proc.stdin.fileno(), False)
            sel.register(proc.stdin.fileno(), selectors.EVENT_WRITE)

        def kill_all() -> None:
            if proc.returncode is None:  # once reaped, its pid (and so the group id) may be reused
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(proc.pid, signal.SIGKILL)
            if ns_fd is not None:
                with contextlib.suppress(ProcessLookupError):
                    signal.pidfd_send_signal(ns_fd, signal.SIGKILL)
            for _ in range(100 if token is not None else 0):  # a fork bomb can outrun one sweep
                if not (pids := _pids(lambda p: token in Path(p, "environ").read_bytes().split(b"\0"))):
                    break
                for pid in pids:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)

        timed_out, killed, started, end = False, False, False, start + lim.wall_seconds
        try:
            while sel.get_map():
                if (now := time.monotonic()) >= end:
                    if killed:
                        break  # an unsafe-mode straggler that cleared its environment still holds a pipe
                    timed_out = proc.poll() is None
                    kill_all()
                    killed, end = True, now + 2.0
                for key, _ in sel.select(timeout=max(end - time.monotonic(), 0)):
                    fd = int(key.fd)
                    if fd == proc_fd:
                        sel.unregister(fd)
                        if not killed:  # the main process is gone: nothing of the run may outlive it
                            kill_all()
                            killed, end = True, min(end, time.monotonic() + 2.0)
                        proc.wait()
                    elif proc.stdin is not None and key.events & selectors.EVENT_WRITE:
                        try:
                            pending = pending[os.write(fd, pending[:1 << 16]):]
                        except BrokenPipeError:  # it stopped reading (or exited): drop the rest
                            pending = pending[:0]
                        if not pending:
                            sel.unregister(fd)
                            with contextlib.suppress(BrokenPipeError):
                                proc.stdin.close()  # EOF for the reader
                    elif not (chunk := os.read(fd, 1 << 16)):
                        sel.unregister(fd)
                    elif fd == info_r:
                        info += chunk
                        if not started and (m := re.search(rb'"child-pid":\s*(\d+)', info)):
                            started = True
                            with contextlib.suppress(ProcessLookupError):
                                ns_fd = os.pidfd_open(int(m.group(1)))
                            # bwrap, our unreaped child, is in the stage's mount namespace while the run waits on
                            # --block-fd: its tmpfs, held by this fd, outlives that namespace for the copy-back.
                            with contextlib.suppress(FileNotFoundError, BrokenPipeError):  # bwrap failed: see stderr
                                stage = os.open(f"/proc/{proc.pid}/root{_STAGE}", os.O_RDONLY | os.O_DIRECTORY)
                                fds.append(stage)
                                os.write(block_w, b"1")  # type: ignore[arg-type]  # set with info_r
                    else:
                        room = max(lim.max_output_bytes - len(bufs[fd]), 0)
                        bufs[fd] += chunk[:room]
                        dropped[fd] += len(chunk) - len(chunk[:room])
        finally:
            kill_all()
            proc.wait()
            if ns_fd is not None:  # init exits only after the kernel has killed the rest of the namespace
                select.select([ns_fd], [], [], 5.0)
                os.close(ns_fd)
            os.close(proc_fd)
            sel.close()
            for pipe in (proc.stdin, proc.stdout, proc.stderr):
                with contextlib.suppress(OSError):
                    if pipe is not None:
                        pipe.close()
        if token is None and not started and not timed_out and proc.returncode != 0:
            err = bufs[err_fd].decode(errors="replace").strip()
            fix = ("enable unprivileged user namespaces (`sysctl kernel.unprivileged_userns_clone=1`)"
                   if "namespace" in err or "unshare" in err
                   else f"as root it also needs CAP_SYS_ADMIN to mount; {INSTALL_HINT}")
            raise SandboxUnavailableError(f"bubblewrap could not start the sandbox ({err}); {fix}")
        texts = [bufs[fd].decode(errors="replace") + (f"\n[lle sandbox: {name} truncated; {dropped[fd]} more bytes "
                                                     "dropped]\n" if dropped[fd] else "")
                 for fd, name in ((out_fd, "stdout"), (err_fd, "stderr"))]
        returncode = proc.returncode
        if stage is not None:  # every process of the run is gone: nothing writes the tmpfs any more
            vfs = os.fstatvfs(stage)
            full = [cap for cap, left in ((f"{lim.workdir_mb} MB (SandboxLimits.workdir_mb)", vfs.f_bavail),
                                          (f"{lim.workdir_files} files (SandboxLimits.workdir_files)", vfs.f_favail))
                    if not left]
            host = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
            try:
                sync_back(stage, host)
            finally:
                os.close(host)
            if full:
                texts[1] += (f"\n[lle sandbox: the workdir is full: writes over its cap of {' and '.join(full)} "
                             "were refused by the kernel, and the run counts as failed: write less there or raise "
                             "the cap]\n")
                returncode = returncode or 1
        return SandboxResult(returncode=None if timed_out else returncode, stdout=texts[0], stderr=texts[1],
                             timed_out=timed_out, duration_ms=(time.monotonic() - start) * 1000,
                             sandboxed=token is None)
