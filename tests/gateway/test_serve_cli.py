"""`lle serve` refuses to start open or against a bad upstream: one line naming the input and the fix, exit 2."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest


def serve(workspace: Path, *args: str, token: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "LLE_GATEWAY_TOKEN"}
    if token:
        env["LLE_GATEWAY_TOKEN"] = token
    return subprocess.run([sys.executable, "-m", "lle.cli.main", "--workspace", str(workspace), "serve", *args],
                          capture_output=True, text=True, timeout=60, env=env)


@pytest.mark.parametrize(("args", "token", "needles"), [
    ((), None, ("no client token", "--token", "LLE_GATEWAY_TOKEN")),
    (("--upstream", "ftp://x"), "t0ken", ("--upstream", "http://127.0.0.1:8080/v1")),
])
def test_serve_refuses_bad_setup_in_one_line(tmp_path: Path, args: tuple[str, ...], token: str | None,
                                             needles: tuple[str, ...]) -> None:
    result = serve(tmp_path / "ws", *args, token=token)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert all(n in line for n in needles), line
    assert not (tmp_path / "ws" / "lle.db").exists()


def test_a_clients_file_that_does_not_parse_is_named(tmp_path: Path) -> None:
    bad = tmp_path / "clients.json"
    bad.write_text('{"clients": {"T": {"name": "has space"}}}')
    result = serve(tmp_path / "ws", "--clients", str(bad))
    assert result.returncode == 2 and "--clients" in result.stderr and "has space" in result.stderr
