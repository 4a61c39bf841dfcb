"""The workdir's cap is the kernel's: a run writes into a tmpfs that holds `workdir_mb` and `workdir_files`
more than the workdir did, and what it holds at the end is copied back to the host. An outside battery
had put 6.4 GB on the host in 0.09 s with fallocate, overshot the cap 1.6-2.4x with plain writes, and
made 78,909 files; here each attack runs for real inside bubblewrap and is judged on the host."""

from __future__ import annotations

import os
import stat
import textwrap
from pathlib import Path

import pytest

from lle.errors import InvalidInputError
from lle.sandbox import Sandbox, SandboxLimits, bwrap_available

PY = "/usr/bin/python3"  # Debian's, under /usr, so it exists inside the sandbox
MB = 1 << 20

pytestmark = pytest.mark.skipif(not bwrap_available(), reason="bubblewrap is not installed; "
                                "install it with `sudo apt-get install bubblewrap`")


def py(code: str) -> list[str]:
    return [PY, "-c", textwrap.dedent(code)]


def host_bytes(root: Path) -> int:
    """Disk blocks under `root`, as the host's filesystem counts them."""
    return sum(os.lstat(os.path.join(d, n)).st_blocks * 512 for d, dirs, files in os.walk(root) for n in dirs + files)


def host_entries(root: Path) -> int:
    return sum(len(dirs) + len(files) for _, dirs, files in os.walk(root))


def disk_free() -> int:
    return os.statvfs("/").f_bavail * os.statvfs("/").f_frsize


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    path = tmp_path / "work"
    path.mkdir()
    return path


def test_fallocate_puts_no_more_than_the_cap_on_the_host(workdir: Path) -> None:
    sb = Sandbox(SandboxLimits(workdir_mb=20, file_size_mb=8192, wall_seconds=10.0))
    free = disk_free()
    r = sb.run(py("import os; fd = os.open('big', os.O_CREAT | os.O_WRONLY); os.posix_fallocate(fd, 0, 6 << 30)"),
               workdir=workdir)
    # Refused whole (nothing is left behind, so the workdir is not full): the run fails on the kernel's ENOSPC.
    assert r.returncode not in (0, None) and "No space left on device" in r.stderr, r.stderr
    assert host_bytes(workdir) <= 20 * MB
    # The battery's way to 6.4 GB: many files, each under the per-file limit. Two fit; the third is refused.
    r = sb.run(py("""
        import os
        for i in range(800):
            fd = os.open(f"f{i}", os.O_CREAT | os.O_WRONLY)
            os.posix_fallocate(fd, 0, 8 << 20)
    """), workdir=workdir)
    assert r.returncode not in (0, None) and "No space left on device" in r.stderr, r.stderr
    sizes = {p.name: p.stat().st_size for p in workdir.iterdir()}
    assert sizes == {"big": 0, "f0": 8 * MB, "f1": 8 * MB, "f2": 0}, sizes
    assert host_bytes(workdir) <= 20 * MB  # (allocated, never written: zeros, which the host keeps as holes)
    assert free - disk_free() < 20 * MB + 256 * MB  # slack: other writers on the host


def test_plain_writes_stop_at_the_cap_exactly(workdir: Path) -> None:
    (workdir / "before.bin").write_bytes(b"b" * (5 * MB))  # the cap is on growth: a repo may start large
    sb = Sandbox(SandboxLimits(workdir_mb=20, file_size_mb=64, wall_seconds=10.0))
    r = sb.run(py("""
        with open("out", "wb") as fh:
            for i in range(100):
                fh.write(b"x" * (1 << 20))
                fh.flush()
        print("WROTE-ALL")
    """), workdir=workdir)
    assert r.returncode not in (0, None) and "WROTE-ALL" not in r.stdout
    assert "over its cap of 20 MB (SandboxLimits.workdir_mb)" in r.stderr, r.stderr
    # What was written within the cap is on the host; not a byte past it.
    assert (workdir / "out").stat().st_size == 20 * MB
    assert host_bytes(workdir) <= (5 + 20) * MB and (workdir / "before.bin").read_bytes() == b"b" * (5 * MB)


def test_many_files_stop_at_the_inode_cap(workdir: Path) -> None:
    (workdir / "keep.txt").write_text("kept")
    sb = Sandbox(SandboxLimits(wall_seconds=20.0))
    r = sb.run(py("""
        import os
        for i in range(100_000):
            open(f"f{i}", "w").close()
    """), workdir=workdir)
    assert r.returncode not in (0, None)
    assert "over its cap of 10000 files (SandboxLimits.workdir_files)" in r.stderr, r.stderr
    assert host_entries(workdir) == 1 + 10_000
    assert (workdir / "keep.txt").read_text() == "kept"


def test_the_host_gets_back_what_the_run_left(workdir: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("host")
    for name, text in (("keep.txt", "same"), ("edit.txt", "old!"), ("gone.txt", "x"), ("kind", "file")):
        (workdir / name).write_text(text)
    (workdir / "olddir" / "sub").mkdir(parents=True)
    os.link(outside, workdir / "linked.txt")  # a host file hard-linked in: never written through
    (tmp_path / "outdir").mkdir()  # symlinks left by an earlier run, which this run turns into real entries
    (workdir / "to_dir").symlink_to(tmp_path / "outdir")
    (workdir / "to_file").symlink_to(outside)
    keep_inode = (workdir / "keep.txt").stat().st_ino
    code = """
        import os
        st = os.stat("edit.txt")
        open("edit.txt", "w").write("new!")  # same size, and its mtime put back: still copied back
        os.utime("edit.txt", ns=(st.st_atime_ns, st.st_mtime_ns))
        os.remove("gone.txt")
        os.remove("kind"); os.mkdir("kind"); open("kind/inner", "w").write("in")
        import shutil; shutil.rmtree("olddir")
        os.remove("linked.txt"); open("linked.txt", "w").write("mine")
        os.remove("to_dir"); os.mkdir("to_dir"); open("to_dir/x", "w").write("x")
        os.remove("to_file"); open("to_file", "w").write("pwned")
        with open("sparse", "wb") as fh:
            fh.seek(6 << 20); fh.write(b"end")
        os.symlink("/etc/passwd", "link"); os.mkfifo("fifo"); os.chmod("keep.txt", 0o600); os.chmod("keep.txt", 0o644)
        os.makedirs("/".join(["d"] * 60)); open("/".join(["d"] * 60 + ["deep.txt"]), "w").write("deep")
    """
    r = Sandbox(SandboxLimits(file_size_mb=8)).run(py(code), workdir=workdir)
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in workdir.iterdir()) == [
        "d", "edit.txt", "fifo", "keep.txt", "kind", "link", "linked.txt", "sparse", "to_dir", "to_file"]
    assert (workdir / "keep.txt").stat().st_ino == keep_inode  # unchanged files are left alone
    assert (workdir / "edit.txt").read_text() == "new!"
    assert (workdir / "kind" / "inner").read_text() == "in"
    assert outside.read_text() == "host" and (workdir / "linked.txt").read_text() == "mine"
    assert list((tmp_path / "outdir").iterdir()) == [] and (workdir / "to_dir" / "x").read_text() == "x"
    assert not (workdir / "to_file").is_symlink() and (workdir / "to_file").read_text() == "pwned"
    sparse = (workdir / "sparse").stat()
    assert sparse.st_size == (6 << 20) + 3 and sparse.st_blocks * 512 < MB  # still sparse on the host
    assert os.readlink(workdir / "link") == "/etc/passwd" and stat.S_ISFIFO(os.lstat(workdir / "fifo").st_mode)
    assert Path(workdir, *["d"] * 60, "deep.txt").read_text() == "deep"
    assert (workdir / "link").lstat().st_uid != 0  # as root: the run's uid owns what it made


def test_a_run_killed_by_the_wall_clock_keeps_its_writes(workdir: Path) -> None:
    sb = Sandbox(SandboxLimits(wall_seconds=1.0))
    r = sb.run(py("import time; open('partial.txt', 'w').write('so far'); time.sleep(60)"), workdir=workdir)
    assert r.timed_out and r.returncode is None
    assert (workdir / "partial.txt").read_text() == "so far"


def test_a_cap_of_zero_is_refused_not_read_as_no_limit() -> None:
    for limits in (SandboxLimits(workdir_mb=0), SandboxLimits(workdir_files=0)):  # tmpfs takes 0 as unlimited
        with pytest.raises(InvalidInputError, match="at least 1"):
            Sandbox(limits)
