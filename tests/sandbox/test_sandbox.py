"""Sandbox escape battery: each attack really runs inside bubblewrap; each verdict is read on the host.

What the sandboxed program prints is never trusted as proof: the host checks its listeners, its files,
its processes and its /proc. Every run also carries a unique marker in its argv, and after every run
no process with that marker may be left on the host.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import secrets
import socket
import stat
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from lle.errors import InvalidInputError, SandboxUnavailableError
from lle.sandbox import Sandbox, SandboxLimits, SandboxResult, bwrap_available, read_file_nofollow
from lle.sandbox import bubblewrap as sandbox_module

PY = "/usr/bin/python3"  # Debian's, under /usr, so it exists inside the sandbox
LIMITS = SandboxLimits(cpu_seconds=5, memory_mb=256, file_size_mb=8, max_processes=32, wall_seconds=5.0)

needs_bwrap = pytest.mark.skipif(
    not bwrap_available(),
    reason="bubblewrap is not installed, so the escape battery cannot run; "
           "install it with `sudo apt-get install bubblewrap` (or run `make test` as root)")


def new_marker() -> str:
    return f"lle-sbx-{secrets.token_hex(6)}"


def host_pids(marker: str) -> list[int]:
    """Host pids whose command line contains `marker` (zombies have none, so they do not count)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != os.getpid():
            with contextlib.suppress(OSError):
                if marker.encode() in Path(f"/proc/{entry}/cmdline").read_bytes():
                    found.append(int(entry))
    return found


def argv0(pid: int) -> str:
    with contextlib.suppress(OSError):
        return Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode()
    return ""


def host_uid(pid: int) -> int | None:
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("Uid:"):
                return int(line.split()[1])
    return None


class Watch:
    """Samples, from the host, the processes of a run while it runs."""

    def __init__(self, marker: str) -> None:
        self.marker, self.max_count = marker, 0
        self.uids: set[tuple[str, int | None]] = set()  # (argv[0], host uid)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        while not self._stop.is_set():
            pids = host_pids(self.marker)
            self.max_count = max(self.max_count, len(pids))
            self.uids.update((argv0(p), host_uid(p)) for p in pids)
            time.sleep(0.01)

    def __enter__(self) -> Watch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def run(sb: Sandbox, argv: list[str], workdir: Path, marker: str, **kw: object) -> SandboxResult:
    """Run, then assert what must hold for every run: ended in time, and nothing of it survives."""
    assert any(marker in a for a in argv), "every run carries its marker so survivors can be found"
    start = time.monotonic()
    result = sb.run(argv, workdir=workdir, **kw)  # type: ignore[arg-type]
    elapsed = time.monotonic() - start
    assert elapsed <= sb.limits.wall_seconds + 2, f"run took {elapsed:.1f}s"
    assert host_pids(marker) == [], "a process of the run survived it"
    return result


def py(code: str, marker: str) -> list[str]:
    return [PY, "-c", textwrap.dedent(code), marker]


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    path = tmp_path / "work"
    path.mkdir()
    return path


@pytest.fixture
def sb() -> Sandbox:
    return Sandbox(LIMITS)


@pytest.fixture
def host_sleep() -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen(["sleep", f"300.{secrets.randbelow(10**6):06d}"])  # a unique, findable cmdline
    yield proc
    proc.kill()
    proc.wait()


# --- it works, as an unprivileged uid -------------------------------------------------------------------


@needs_bwrap
def test_runs_in_workdir_with_env_stdin_and_a_non_root_host_uid(sb: Sandbox, workdir: Path) -> None:
    marker = new_marker()
    (workdir / "data.txt").write_text("hello")
    code = """
        import os, sys, time
        print(os.getcwd(), open("data.txt").read(), os.environ["GREETING"], sys.stdin.read(), os.getuid())
        open("made.txt", "w").write("x")
        time.sleep(0.5)  # long enough for the host to look at this process
    """
    with Watch(marker) as watch:
        r = run(sb, py(code, marker), workdir, marker, env={"GREETING": "hi"}, stdin="from-stdin")
    assert r.returncode == 0 and r.sandboxed and not r.timed_out, r.stderr
    cwd, data, greeting, got_stdin, uid = r.stdout.split()
    assert (cwd, data, greeting, got_stdin) == ("/work", "hello", "hi", "from-stdin")
    assert int(uid) != 0
    # From the host: the file it wrote and the processes it ran belong to a uid that is not root.
    assert (workdir / "made.txt").stat().st_uid != 0
    # (The root-owned prlimit/unshare/sh/setpriv steps that start bwrap also carry the marker.)
    sandboxed = {uid for name, uid in watch.uids if name in (PY, "/usr/bin/bwrap")}
    assert sandboxed and 0 not in sandboxed and None not in sandboxed, watch.uids
    assert any(name == PY for name, _ in watch.uids)


@needs_bwrap
def test_output_is_capped_and_wall_clock_kills(workdir: Path) -> None:
    marker = new_marker()
    sb = Sandbox(SandboxLimits(max_output_bytes=1000, wall_seconds=1.0))
    r = run(sb, py("import sys; sys.stdout.write('x' * 100000); sys.stderr.write('e' * 5)", marker), workdir, marker)
    assert r.stdout.startswith("x" * 1000) and "x" * 1001 not in r.stdout and "99000 more bytes dropped" in r.stdout
    assert r.stderr == "eeeee"
    r = run(sb, py("import time; time.sleep(60)", marker), workdir, marker)
    assert r.timed_out and r.returncode is None and r.duration_ms < 2000


# --- network and sockets --------------------------------------------------------------------------------


@needs_bwrap
def test_no_network_dns_or_host_tcp(sb: Sandbox, workdir: Path) -> None:
    marker = new_marker()
    listener = socket.socket()
    listener.bind(("0.0.0.0", 0))
    listener.listen()
    listener.setblocking(False)
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("127.0.0.1", 0))
    udp.setblocking(False)
    port, udp_port = listener.getsockname()[1], udp.getsockname()[1]
    host_ips = {"127.0.0.1"}
    with contextlib.suppress(OSError):
        host_ips.update(str(i[4][0]) for i in socket.getaddrinfo(socket.gethostname(), None, socket.AF_INET))
    code = f"""
        import socket
        for name in ("example.com", "pypi.org"):
            try: print("DNS-OK", socket.getaddrinfo(name, 443))
            except OSError as e: print("dns failed", e)
        for ip in {sorted(host_ips)!r}:
            try: socket.create_connection((ip, {port}), timeout=1); print("TCP-OK", ip)
            except OSError as e: print("tcp failed", ip, e)
        try: socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"x", ("127.0.0.1", {udp_port}))
        except OSError as e: print("udp failed", e)
    """
    r = run(sb, py(code, marker), workdir, marker)
    assert r.returncode == 0, r.stderr
    with pytest.raises(BlockingIOError):
        listener.accept()
    with pytest.raises(BlockingIOError):
        udp.recvfrom(10)
    assert "DNS-OK" not in r.stdout and "TCP-OK" not in r.stdout
    listener.close()
    udp.close()


@needs_bwrap
def test_no_host_unix_sockets(sb: Sandbox, workdir: Path, tmp_path: Path) -> None:
    marker = new_marker()
    path_listener = socket.socket(socket.AF_UNIX)
    path_listener.bind(str(tmp_path / "host.sock"))
    abstract_listener = socket.socket(socket.AF_UNIX)
    abstract_listener.bind(f"\0{marker}")
    for s in (path_listener, abstract_listener):
        s.listen()
        s.setblocking(False)
    host_sockets = []  # real host daemons' sockets (docker, dbus, postgres …) when this host has any
    for dirpath, _, files in os.walk("/run"):
        for name in files:
            with contextlib.suppress(OSError):
                if stat.S_ISSOCK(os.lstat(os.path.join(dirpath, name)).st_mode):
                    host_sockets.append(os.path.join(dirpath, name))
    targets = [str(tmp_path / "host.sock"), f"\0{marker}", *host_sockets]
    code = f"""
        import os, socket, stat
        found = []
        for root in ("/run", "/var/run", "/tmp", "/"):
            for dirpath, dirs, files in os.walk(root):
                dirs[:] = [d for d in dirs if os.path.join(dirpath, d) not in ("/proc", "/sys", "/usr")]
                found += [os.path.join(dirpath, f) for f in files
                          if stat.S_ISSOCK(os.lstat(os.path.join(dirpath, f)).st_mode)]
        print("sockets seen", found)
        for target in {targets!r} + found:
            s = socket.socket(socket.AF_UNIX)
            try: s.connect(target); print("UNIX-OK", repr(target))
            except OSError as e: print("unix failed", repr(target), e)
    """
    r = run(sb, py(code, marker), workdir, marker)
    assert r.returncode == 0, r.stderr
    for s in (path_listener, abstract_listener):
        with pytest.raises(BlockingIOError):
            s.accept()
        s.close()
    assert "UNIX-OK" not in r.stdout


# --- files outside the workdir ----------------------------------------------------------------------------


@needs_bwrap
def test_cannot_write_outside_workdir(sb: Sandbox, workdir: Path, tmp_path: Path) -> None:
    marker = new_marker()
    outside = tmp_path / "outside.txt"
    outside.write_text("original")
    before = (sha256(outside), outside.stat().st_mtime_ns)
    targets = [str(outside), str(tmp_path / "new.txt"), f"/tmp/{marker}", f"/{marker}", f"/usr/{marker}",
               f"/etc/{marker}", f"/dev/{marker}", "/work/../escaped.txt", f"/root/{marker}"]
    code = f"""
        import os
        for t in {targets!r}:
            try: open(t, "w").write("pwned"); print("wrote", t)
            except OSError as e: print("refused", t, e)
        for t in {[str(outside)]!r}:
            try: os.remove(t); print("REMOVED", t)
            except OSError as e: print("refused rm", t, e)
    """
    r = run(sb, py(code, marker), workdir, marker)
    assert r.returncode == 0, r.stderr
    assert (sha256(outside), outside.stat().st_mtime_ns) == before
    for t in targets[1:]:
        assert not Path(t).exists(), f"{t} appeared on the host"


@needs_bwrap
def test_cannot_read_root_or_parent_secrets(sb: Sandbox, workdir: Path, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    marker = new_marker()
    secret = f"s3cr3t-{secrets.token_hex(8)}"
    monkeypatch.setenv("LLE_TEST_SECRET", secret)
    host_secret = tmp_path / "secret.txt"
    host_secret.write_text(secret)
    root_names = [p.name for p in Path("/root").iterdir()] if Path("/root").is_dir() else []
    code = f"""
        import os, glob
        print(dict(os.environ))
        for f in glob.glob("/proc/*/environ") + glob.glob("/proc/*/cmdline"):
            try: print(f, open(f, "rb").read())
            except OSError as e: print(f, e)
        for p in ["/root", "/root/.bashrc", "/etc/shadow", "/home", {str(host_secret)!r}]:
            try: print(p, os.listdir(p) if os.path.isdir(p) else open(p).read())
            except OSError as e: print("refused", p, e)
        print("root exists:", os.path.exists("/root"))
    """
    r = run(sb, py(code, marker), workdir, marker)
    assert r.returncode == 0, r.stderr
    assert secret not in r.stdout + r.stderr
    assert r.stdout.splitlines()[-1] == "root exists: False"
    assert not [n for n in root_names if len(n) > 6 and f"'{n}'" in r.stdout]


# --- other processes ----------------------------------------------------------------------------------------


@needs_bwrap
def test_cannot_kill_or_see_host_processes(sb: Sandbox, workdir: Path,
                                           host_sleep: subprocess.Popen[bytes]) -> None:
    marker = new_marker()
    code = f"""
        import os, signal, subprocess, sys
        print(subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True).stdout)
        print("pids", sorted(int(p) for p in os.listdir("/proc") if p.isdigit()))
        print(subprocess.run(["kill", "-9", "{host_sleep.pid}"], capture_output=True, text=True))
        try: os.kill({host_sleep.pid}, signal.SIGKILL); print("KILL" "ED")
        except OSError as e: print("refused", e)
        sys.stdout.flush()
        os.execvp("kill", ["kill", "-9", "-1"])  # every process it may signal (but itself)
    """
    r = run(sb, py(code, marker), workdir, marker)
    time.sleep(0.1)
    assert host_sleep.poll() is None, "the host process was killed from inside the sandbox"
    assert " ".join(host_sleep.args) not in r.stdout and "KILLED" not in r.stdout  # type: ignore[arg-type]
    pids = json.loads(r.stdout.split("pids ")[1].split("\n")[0])
    assert host_sleep.pid not in pids and len(pids) <= 4, f"the sandbox sees more than its own processes: {pids}"


@needs_bwrap
def test_ptrace_fails_on_host_and_sibling(sb: Sandbox, workdir: Path, host_sleep: subprocess.Popen[bytes]) -> None:
    marker = new_marker()
    code = f"""
        import ctypes, os, subprocess
        libc = ctypes.CDLL(None, use_errno=True)
        sibling = subprocess.Popen(["sleep", "5", "{marker}"])
        for pid in ({host_sleep.pid}, sibling.pid, 1):
            rc = libc.ptrace(16, pid, 0, 0)  # PTRACE_ATTACH
            print("ATTACHED" if rc == 0 else "refused", pid, os.strerror(ctypes.get_errno()))
        sibling.kill()
    """
    r = run(sb, py(code, marker), workdir, marker)
    assert r.returncode == 0, r.stderr
    assert "ATTACHED" not in r.stdout and r.stdout.count("refused") == 3
    status = Path(f"/proc/{host_sleep.pid}/status").read_text()
    assert "TracerPid:\t0" in status


# --- privileges ---------------------------------------------------------------------------------------------


@needs_bwrap
def test_setuid_does_not_gain_root(sb: Sandbox, workdir: Path, tmp_path: Path) -> None:
    marker = new_marker()
    host_dir = tmp_path / "host"
    host_dir.mkdir()
    rootfile = host_dir / "rootfile"
    rootfile.write_text("root only")
    os.chmod(rootfile, 0o644)
    # A hard link makes a root-owned host file visible inside; the sandbox must not hand it over.
    os.link(rootfile, workdir / "rootfile")
    code = """
        import os, subprocess
        attempts = {
            "su": ["su", "root", "-c", "touch /work/by_su"],
            "setpriv": ["setpriv", "--reuid=0", "--regid=0", "--clear-groups", "touch", "/work/by_setpriv"],
            "mount": ["mount", "-t", "tmpfs", "none", "/tmp"],
            "newgrp": ["newgrp", "root"],
        }
        for name, cmd in attempts.items():
            print(name, subprocess.run(cmd, capture_output=True, text=True, input="").returncode)
        try: os.setuid(0); open("/work/by_setuid", "w").write("x"); print("SETUID-OK")
        except OSError as e: print("setuid refused", e)
        try: open("/work/rootfile", "w").write("pwned"); print("ROOTFILE-WRITTEN")
        except OSError as e: print("rootfile refused", e)
        open("/work/plain", "w").write("x")
    """
    r = run(sb, py(code, marker), workdir, marker)
    assert r.returncode == 0, r.stderr
    assert rootfile.read_text() == "root only" and rootfile.stat().st_uid == 0
    assert "SETUID-OK" not in r.stdout and "ROOTFILE-WRITTEN" not in r.stdout
    for path in workdir.iterdir():
        if path.name != "rootfile":
            assert path.stat().st_uid != 0, f"{path.name} was written as root"
    assert not (workdir / "by_su").exists() and not (workdir / "by_setpriv").exists()


@needs_bwrap
def test_mount_fails(sb: Sandbox, workdir: Path) -> None:
    marker = new_marker()
    (workdir / "m").mkdir()
    r = run(sb, ["sh", "-c", f"mount -t tmpfs none /work/m && touch /work/m/{marker}"], workdir, marker)
    assert r.returncode != 0
    assert str(workdir / "m") not in Path("/proc/self/mountinfo").read_text()
    assert list((workdir / "m").iterdir()) == []


@needs_bwrap
def test_nested_user_namespace_fails(sb: Sandbox, workdir: Path) -> None:
    marker = new_marker()
    r = run(sb, ["sh", "-c", f"unshare -U true && echo {marker}-NESTED"], workdir, marker)
    assert r.returncode != 0 and f"{marker}-NESTED" not in r.stdout
    r = run(sb, ["sh", "-c", f"unshare -Ur id -u && echo {marker}-NESTED"], workdir, marker)
    assert r.returncode != 0 and f"{marker}-NESTED" not in r.stdout


# --- resource bombs ------------------------------------------------------------------------------------------


@pytest.mark.slow
@needs_bwrap
def test_fork_bomb_is_bounded(workdir: Path) -> None:
    marker = new_marker()
    limits = SandboxLimits(max_processes=16, wall_seconds=3.0, memory_mb=256)
    code = """
        import os, time
        while True:
            try: os.fork()
            except OSError: time.sleep(0.01)
    """
    with Watch(marker) as watch:
        r = run(Sandbox(limits), py(code, marker), workdir, marker)
    assert r.timed_out and r.returncode is None
    assert 1 < watch.max_count <= limits.max_processes, watch.max_count


@needs_bwrap
def test_memory_bomb_is_bounded(workdir: Path) -> None:
    marker = new_marker()
    # Run from a fresh host process so that its RUSAGE_CHILDREN peak is this run's alone.
    probe = f"""
        import json, resource, sys
        from pathlib import Path
        from lle.sandbox import Sandbox, SandboxLimits
        code = "chunks = []\\nwhile True: chunks.append(bytearray(16 << 20))"
        r = Sandbox(SandboxLimits(memory_mb=128, wall_seconds=5.0)).run(
            ["{PY}", "-c", code, "{marker}"], workdir=Path({str(workdir)!r}))
        print(json.dumps({{"rc": r.returncode, "timed_out": r.timed_out, "stderr": r.stderr,
                          "maxrss_kb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}}))
    """
    start = time.monotonic()
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(probe)], capture_output=True, text=True, timeout=30)
    assert time.monotonic() - start < 5.0 + 2 + 3  # wall limit + 2 s, + the probe's own start-up
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["rc"] != 0 and not result["timed_out"] and "MemoryError" in result["stderr"]
    assert result["maxrss_kb"] < 128 * 1024, result
    assert host_pids(marker) == []


@needs_bwrap
def test_disk_fill_is_bounded(workdir: Path) -> None:
    marker = new_marker()
    limits = SandboxLimits(file_size_mb=4, wall_seconds=5.0)
    code = """
        import os, time
        written = {}
        for root in ("/work", "/tmp", "/dev/shm", "/"):
            written[root] = 0
            for i in range(40):  # 160 MiB per place if nothing stopped it
                try:
                    with open(f"{root}/fill{i}", "wb") as fh:
                        for _ in range(4):
                            fh.write(b"x" * (1 << 20)); written[root] += 1 << 20
                except OSError as e:
                    break
        print(written)
        time.sleep(0.3)
    """
    shmem_before = _shmem_kb()
    host_free_before = os.statvfs("/").f_bavail * os.statvfs("/").f_frsize
    peak = [0]

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], _shmem_kb() - shmem_before)
            time.sleep(0.02)

    done = threading.Event()
    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        dd = run(Sandbox(limits), ["dd", "if=/dev/zero", f"of=/work/big-{marker}", "bs=1M", "count=64"],
                 workdir, marker)
        r = run(Sandbox(limits), py(code, marker), workdir, marker)
    finally:
        done.set()
        sampler.join()
    assert dd.returncode != 0, dd.stderr  # dd dies of SIGXFSZ
    # 160 MiB into /work passes the workdir's cap (100 MB by default): the kernel refuses the rest; the run fails.
    assert r.returncode != 0 and "over its cap of 100 MB" in r.stderr, r.stderr
    assert all(p.stat().st_size <= 4 << 20 for p in workdir.iterdir())  # dd's file too
    assert sum(p.stat().st_size for p in workdir.iterdir()) <= (4 + 100) << 20  # dd's file, then the cap's worth
    # tmpfs (/work, /tmp, /dev/shm) is host memory: 100 MB + 2 x 4 MiB at most of 480 MiB tried (+ slack for others).
    assert peak[0] < (100 + 2 * 4 + 52) << 10, f"shared memory grew by {peak[0]} KiB"
    host_free_after = os.statvfs("/").f_bavail * os.statvfs("/").f_frsize
    workdir_bytes = sum(p.stat().st_size for p in workdir.iterdir())
    assert host_free_before - host_free_after < workdir_bytes + (256 << 20)  # slack: other writers on the host


def _shmem_kb() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("Shmem:"):
            return int(line.split()[1])
    return 0


@needs_bwrap
def test_daemon_does_not_outlive_the_run(sb: Sandbox, workdir: Path) -> None:
    marker = new_marker()
    code = """
        import os, sys, time
        for keep_pipes in (False, True):  # the second one holds stdout open, so the run would never see EOF
            if os.fork() == 0:
                os.setsid()
                if os.fork() == 0:
                    if not keep_pipes:
                        os.closerange(0, 3)
                    time.sleep(60)
                os._exit(0)
        time.sleep(0.2)
        print("parent done")
    """
    r = run(sb, py(code, marker), workdir, marker)
    assert r.returncode == 0 and not r.timed_out and r.duration_ms < 2000
    assert r.stdout == "parent done\n"


@needs_bwrap
def test_cpu_limit_kills_a_busy_loop(workdir: Path) -> None:
    marker = new_marker()
    sb = Sandbox(SandboxLimits(cpu_seconds=1, wall_seconds=10.0))
    r = run(sb, py("while True: pass", marker), workdir, marker)
    # Ended by the CPU limit (SIGXCPU, or SIGKILL at the hard limit), not by the wall clock.
    assert not r.timed_out and r.returncode in (128 + 24, 128 + 9), r


# --- protected files and symlinks ----------------------------------------------------------------------------


@needs_bwrap
def test_protected_files_cannot_be_edited_or_deleted(sb: Sandbox, workdir: Path) -> None:
    marker = new_marker()
    (workdir / "tests").mkdir()
    (workdir / "fixtures").mkdir()
    test_file, fixture = workdir / "tests" / "test_app.py", workdir / "fixtures" / "data.json"
    test_file.write_text("def test_app():\n    assert False\n")
    fixture.write_text('{"answer": 42}')
    before = {p: (sha256(p), p.stat().st_ino) for p in (test_file, fixture)}
    code = """
        import os, shutil
        def attempt(name, fn):
            try: fn(); print("DID", name)
            except OSError as e: print("refused", name, e.strerror)
        t = "tests/test_app.py"
        attempt("write", lambda: open(t, "w").write("def test_app(): pass"))
        attempt("append", lambda: open(t, "a").write("\\npass"))
        attempt("truncate", lambda: os.truncate(t, 0))
        attempt("chmod", lambda: os.chmod(t, 0o777))
        attempt("remove", lambda: os.remove(t))
        attempt("rename", lambda: os.rename(t, "tests/old.py"))
        attempt("replace", lambda: (open("x.py", "w").write("pass"), os.replace("x.py", t)))
        attempt("rename dir", lambda: os.rename("tests", "tests_old"))
        attempt("rmtree dir", lambda: shutil.rmtree("tests"))
        attempt("fixture write", lambda: open("fixtures/data.json", "w").write("{}"))
        attempt("fixture new", lambda: open("fixtures/extra.json", "w").write("{}"))
        attempt("fixture rename", lambda: os.rename("fixtures", "f2"))
        attempt("fixture rmtree", lambda: shutil.rmtree("fixtures"))
        attempt("sibling", lambda: open("tests/conftest.py", "w").write("collect_ignore = ['test_app.py']"))
        attempt("elsewhere", lambda: open("notes.txt", "w").write("x"))
    """
    r = run(sb, py(code, marker), workdir, marker, protected=["tests/test_app.py", "fixtures"])
    assert r.returncode == 0, r.stderr
    for path, (digest, inode) in before.items():
        assert not path.is_symlink() and path.is_file()
        assert (sha256(path), path.stat().st_ino) == (digest, inode), f"{path.name} changed"
    assert sorted(p.name for p in (workdir / "fixtures").iterdir()) == ["data.json"]
    assert sorted(p.name for p in (workdir / "tests").iterdir()) == ["test_app.py"]  # a test file guards its folder
    assert "DID elsewhere" in r.stdout  # the rest of the workdir stays writable
    assert [line for line in r.stdout.splitlines() if line.startswith("DID")] == ["DID elsewhere"]


@needs_bwrap
def test_protected_path_must_be_a_real_file(sb: Sandbox, workdir: Path, tmp_path: Path) -> None:
    (tmp_path / "host.py").write_text("x")
    (workdir / "tests").symlink_to(tmp_path)
    with pytest.raises(InvalidInputError, match="symlink"):
        sb.run(["true"], workdir=workdir, protected=["tests/host.py"])
    with pytest.raises(InvalidInputError, match="does not exist"):
        sb.run(["true"], workdir=workdir, protected=["missing.py"])
    with pytest.raises(InvalidInputError, match="relative"):
        sb.run(["true"], workdir=workdir, protected=["../x"])
    (workdir / "real.py").write_text("x")
    os.link(workdir / "real.py", workdir / "alias.py")  # writing alias.py would edit real.py
    with pytest.raises(InvalidInputError, match="hard link"):
        sb.run(["true"], workdir=workdir, protected=["real.py"])


def test_refuses_system_folders_as_workdir(tmp_path: Path) -> None:
    sb = Sandbox(unsafe_no_sandbox=True)  # the check comes first, whatever the mode
    for bad in (Path("/"), Path("/usr/lib"), Path("/etc"), Path.home()):
        with pytest.raises(InvalidInputError, match="system or home"):
            sb.run(["true"], workdir=bad)
    with pytest.raises(InvalidInputError, match="not a folder"):
        sb.run(["true"], workdir=tmp_path / "missing")


def test_a_bwrap_that_cannot_start_raises(workdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sandbox_module, "BWRAP", "false")  # exits 1 before any sandbox exists
    with pytest.raises(SandboxUnavailableError, match="could not start"):
        Sandbox().run(["true"], workdir=workdir)


@needs_bwrap
def test_planted_symlinks_do_not_reach_host_files(sb: Sandbox, workdir: Path, tmp_path: Path) -> None:
    marker = new_marker()
    host_dir = tmp_path / "host"
    host_dir.mkdir()
    secret = f"host-secret-{secrets.token_hex(8)}"
    (host_dir / "secret.txt").write_text(secret)
    (workdir / "link").symlink_to(host_dir / "secret.txt")
    (workdir / "dirlink").symlink_to(host_dir)
    code = f"""
        import os
        for p in ("link", "dirlink/secret.txt", {str(host_dir / "secret.txt")!r}):
            try: print(open(p).read())
            except OSError as e: print("refused", p, e.strerror)
        os.symlink("/etc/shadow", "planted")
        os.symlink("../../../../../../etc/passwd", "planted_rel")
        os.mkfifo("fifo")
        open("ok.txt", "w").write("fine")
    """
    r = run(sb, py(code, marker), workdir, marker)
    assert r.returncode == 0, r.stderr
    assert secret not in r.stdout + r.stderr
    for rel in ("link", "dirlink/secret.txt", "planted", "planted_rel", "fifo", "../host/secret.txt"):
        with pytest.raises(InvalidInputError):
            read_file_nofollow(workdir, rel)
    assert read_file_nofollow(workdir, "ok.txt") == b"fine"
    assert read_file_nofollow(workdir, "ok.txt", max_bytes=2) == b"fi"
    with pytest.raises(FileNotFoundError):
        read_file_nofollow(workdir, "absent.txt")


# --- without bubblewrap --------------------------------------------------------------------------------------


def test_missing_bwrap_refuses_with_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sandbox_module, "BWRAP", "lle-no-such-bwrap-binary")
    assert not bwrap_available()
    with pytest.raises(SandboxUnavailableError) as err:
        Sandbox()
    message = str(err.value)
    for hint in ("sudo apt-get install bubblewrap", "make test", "unsafe_no_sandbox=True", "--unsafe-no-sandbox"):
        assert hint in message
    assert Sandbox(unsafe_no_sandbox=True).unsafe_no_sandbox


def test_unsafe_mode_says_so_and_still_kills_on_time(workdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sandbox_module, "BWRAP", "lle-no-such-bwrap-binary")
    monkeypatch.setenv("LLE_TEST_SECRET", "unsafe-secret")
    sb = Sandbox(SandboxLimits(wall_seconds=1.0), unsafe_no_sandbox=True)
    marker = new_marker()
    r = run(sb, py("import os; print(os.getcwd(), 'LLE_TEST_SECRET' in os.environ)", marker), workdir, marker)
    assert r.returncode == 0 and not r.sandboxed and r.stdout.split() == [str(workdir), "False"]
    r = run(sb, py("import time; time.sleep(60)", marker), workdir, marker)
    assert r.timed_out and r.returncode is None and not r.sandboxed and r.duration_ms < 3000
    daemon = """
        import os, time
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                os.closerange(0, 3)
                time.sleep(60)
            os._exit(0)
    """
    r = run(sb, py(daemon, marker), workdir, marker)  # `run` asserts the setsid daemon is gone too
    assert r.returncode == 0 and not r.sandboxed
