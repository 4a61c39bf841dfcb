"""Sandbox edges an outside battery found: what a run leaves in the workdir, how big it may grow, what
environment it sees, and what it may add beside protected tests. Every verdict is read on the host."""

from __future__ import annotations

import os
import secrets
import stat
import textwrap
from pathlib import Path

import pytest

from lle.sandbox import Sandbox, SandboxLimits, SandboxResult, bwrap_available
from lle.sandbox.bubblewrap import BASE_ENV

PY = "/usr/bin/python3"  # Debian's, under /usr, so it exists inside the sandbox
LIMITS = SandboxLimits(cpu_seconds=5, memory_mb=256, file_size_mb=8, max_processes=32, wall_seconds=5.0)

pytestmark = pytest.mark.skipif(not bwrap_available(), reason="bubblewrap is not installed; "
                                "install it with `sudo apt-get install bubblewrap`")


def run(sb: Sandbox, code: str, workdir: Path, **kw: object) -> SandboxResult:
    marker = f"lle-sbx-{secrets.token_hex(6)}"
    return sb.run([PY, "-c", textwrap.dedent(code), marker], workdir=workdir, **kw)  # type: ignore[arg-type]


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    path = tmp_path / "work"
    path.mkdir()
    return path


def test_setuid_and_setgid_bits_are_dropped_after_the_run(workdir: Path, tmp_path: Path) -> None:
    # A host file with the bits, reachable only through a symlink the run plants: never followed.
    host_file = tmp_path / "host-suid"
    host_file.write_text("host")
    os.chmod(host_file, 0o6755)
    code = f"""
        import os, shutil
        shutil.copy("/usr/bin/id", "suid-id"); os.chmod("suid-id", 0o4755)
        open("sgid.sh", "w").write("echo hi"); os.chmod("sgid.sh", 0o2755)
        os.mkdir("d"); os.chmod("d", 0o2775)
        open("d/both", "w").write("x"); os.chmod("d/both", 0o6777)
        os.symlink({str(host_file)!r}, "link-to-host")
        print(oct(os.stat("suid-id").st_mode))
    """
    r = run(Sandbox(LIMITS), code, workdir)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().endswith("4755")  # the bit was set inside …
    for path in [workdir, *workdir.rglob("*")]:  # … and is gone on the host
        st = os.lstat(path)
        if not stat.S_ISLNK(st.st_mode):
            assert not st.st_mode & (stat.S_ISUID | stat.S_ISGID), f"{path} kept {oct(st.st_mode)}"
    assert stat.S_IMODE(host_file.stat().st_mode) == 0o6755, "the symlink was followed to a host file"
    assert stat.S_IMODE((workdir / "d" / "both").stat().st_mode) == 0o777


def test_workdir_growth_past_its_cap_fails_the_run(workdir: Path) -> None:
    limits = SandboxLimits(cpu_seconds=5, memory_mb=256, file_size_mb=4, max_processes=32, wall_seconds=20.0,
                           workdir_mb=16)
    code = """
        import time
        for i in range(50):  # 200 MiB in 4 MiB files (each under the file-size limit) if nothing stops it
            open(f"fill{i}", "wb").write(b"x" * (4 << 20))
            time.sleep(0.05)
        print("WROTE-ALL")
    """
    r = run(Sandbox(limits), code, workdir)
    used = sum(p.stat().st_size for p in workdir.iterdir())
    assert r.returncode not in (0, None) and "WROTE-ALL" not in r.stdout
    assert "workdir" in r.stderr and "16 MB" in r.stderr, r.stderr
    assert used <= 16 << 20, f"the workdir grew to {used / (1 << 20):.1f} MiB"  # the kernel's cap: no overshoot


def test_workdir_over_its_cap_at_exit_fails_the_run(workdir: Path) -> None:
    limits = SandboxLimits(cpu_seconds=5, memory_mb=256, file_size_mb=4, max_processes=32, wall_seconds=5.0,
                           workdir_mb=8)
    r = run(Sandbox(limits), 'for i in range(3): open(f"f{i}", "wb").write(b"x" * (4 << 20))', workdir)
    assert r.returncode not in (0, None) and "over its cap of 8 MB" in r.stderr, r.stderr


def test_environment_is_scrubbed_even_in_init(workdir: Path) -> None:
    code = """
        import json, os
        print(json.dumps({"init": open("/proc/1/environ", "rb").read().decode(), "self": dict(os.environ)}))
    """
    r = run(Sandbox(LIMITS), code, workdir, env={"GREETING": "hi"})
    assert r.returncode == 0, r.stderr
    import json

    seen = json.loads(r.stdout)
    init = dict(kv.split("=", 1) for kv in seen["init"].split("\0") if kv)
    host = os.path.realpath(workdir)
    assert "OLDPWD" not in init and "OLDPWD" not in seen["self"], init
    assert not any(host in v or str(workdir) in v for v in [*init.values(), *seen["self"].values()])
    assert set(seen["self"]) <= {*BASE_ENV, "GREETING", "PWD"} and seen["self"].get("PWD", "/work") == "/work"


def test_a_protected_test_file_protects_its_folder(workdir: Path) -> None:
    (workdir / "tests").mkdir()
    (workdir / "tests" / "test_app.py").write_text("def test_app():\n    assert False\n")
    (workdir / "tests" / "helper.py").write_text("X = 1\n")
    (workdir / "src").mkdir()
    code = """
        import os
        def attempt(name, fn):
            try: fn(); print("DID", name)
            except OSError as e: print("refused", name, e.strerror)
        attempt("conftest", lambda: open("tests/conftest.py", "w").write("collect_ignore = ['test_app.py']"))
        attempt("subfolder", lambda: os.mkdir("tests/sub"))
        attempt("helper", lambda: open("tests/helper.py", "w").write("X = 2"))
        attempt("src", lambda: open("src/app.py", "w").write("pass"))
        attempt("root", lambda: open("notes.txt", "w").write("x"))
    """
    r = run(Sandbox(LIMITS), code, workdir, protected=["tests/test_app.py"])
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in (workdir / "tests").iterdir()) == ["helper.py", "test_app.py"]
    assert (workdir / "tests" / "helper.py").read_text() == "X = 1\n"
    assert [line for line in r.stdout.splitlines() if line.startswith("DID")] == ["DID src", "DID root"], r.stdout
