"""`lle run --model openai:NAME --base-url URL` end to end: the toy suite against a local OpenAI-compatible
server (llama-cpp-python's, serving SmolLM2-135M), started by the test. Slow: a small model on the CPU."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from lle.flywheel import loop
from lle.store import Store

# A small model on a shared CPU: minutes, not seconds (the `raw` strategy: no A/B replays of skills or recipes).
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    pytest.importorskip("llama_cpp.server", reason="llama-cpp-python's server extra is not installed")
    from lle.policies.catalog import locate

    try:
        model = locate("smollm2-135m")
    except Exception as err:  # any reason the weights are not here skips the test
        pytest.skip(f"SmolLM2-135M is not available: {err}")
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "llama_cpp.server", "--model", str(model), "--host", "127.0.0.1",
                             "--port", str(port), "--n_ctx", "4096"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(url + "/models", timeout=2):
                    break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("llama_cpp.server did not start") from None
                time.sleep(0.5)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_the_toy_suite_runs_against_a_local_openai_server(server: str, tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    result = subprocess.run(
        [sys.executable, "-m", "lle.cli.main", "--workspace", str(workspace), "run", "--suite", "toy",
         "--model", "openai:smollm2", "--base-url", server, "--strategy", "raw", "--rounds", "1", "--train", "1",
         "--eval", "2",
         "--max-steps", "2", "--workers", "1", "--json"],
        capture_output=True, text=True, timeout=1100)
    assert result.returncode == 0, result.stderr[-2000:]
    out = json.loads(result.stdout)
    assert {row["strategy"] for row in out["table"]} == {"none", "raw"}
    with Store(loop.strategy_db(loop.run_folder(out["run"], workspace), "raw")) as db:
        rows = db.list_experiences(limit=100)
        assert rows
        exp = db.get_experience(rows[0].id)
    assert exp.policy.model == "openai:smollm2" and exp.policy.params["base_url"] == server
    # The model really answered: each step has its call (tokens counted by the server), not a backend error.
    assert exp.steps and all(s.llm is not None and s.llm.completion_tokens > 0 for s in exp.steps)
