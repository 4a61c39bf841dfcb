"""A gateway killed with SIGKILL loses at most the call in flight: a gateway started on the same workspace
reads the open episode back from its journal, and the episode ends with the steps recorded before the kill.
The killed one is a real `lle serve` process; the one after it runs in-process (a second start costs seconds)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx2
import pytest

from gateway.gw_helpers import TOOLS
from lle.gateway.config import ClientConfig
from lle.gateway.stub import StubUpstream, free_port
from lle.store import Store

TOKEN = "crash-test-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def start(workspace: Path, upstream: str, port: int) -> subprocess.Popen[bytes]:
    env = {**os.environ, "LLE_GATEWAY_TOKEN": TOKEN}
    proc = subprocess.Popen([sys.executable, "-m", "lle.cli.main", "--workspace", str(workspace), "serve",
                             "--port", str(port), "--upstream", upstream, "--model", "stub"],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx2.get(f"http://127.0.0.1:{port}/v1/models", headers=AUTH, timeout=1).status_code == 200:
                return proc
        except httpx2.HTTPError:
            time.sleep(0.1)
    proc.kill()
    raise AssertionError("lle serve did not start")


@pytest.mark.slow
def test_a_killed_gateway_loses_at_most_the_call_in_flight(tmp_path: Path, stub: StubUpstream,
                                                           gateway: Any) -> None:
    workspace, port = tmp_path / "ws", free_port()
    root = f"http://127.0.0.1:{port}"
    proc = start(workspace, stub.base_url, port)
    messages = [{"role": "user", "content": "fix calc.py"}]
    try:
        for _ in range(3):
            r = httpx2.post(f"{root}/episodes/crashy/v1/chat/completions", headers=AUTH, timeout=30,
                            json={"messages": messages, "tools": TOOLS})
            assert r.status_code == 200
            reply = r.json()["choices"][0]["message"]
            messages = [*messages, reply, {"role": "tool", "tool_call_id": reply["tool_calls"][0]["id"],
                                           "content": "1 failed"}] if reply.get("tool_calls") else messages
    finally:
        os.kill(proc.pid, signal.SIGKILL)  # no shutdown, no flush: what is on disk is all there is
        proc.wait(timeout=10)
    with gateway(clients={TOKEN: ClientConfig(name="default")}) as client:  # the same workspace, tmp_path/ws
        state = client.get("/v1/lle/episodes/crashy", headers=AUTH).json()
        assert state["steps"] >= 2  # at most the last call, the one in flight at the kill, is gone
        client.post("/v1/lle/episodes/crashy/feedback", headers=AUTH, json={"kind": "test_result", "passed": False})
        ended = client.post("/v1/lle/episodes/crashy/end", headers=AUTH, json={}).json()
    assert ended["steps"] == state["steps"] and ended["outcome"] == "fail"
    with Store(workspace / "lle.db") as db:
        steps = db.steps_of(ended["experience_id"])
        assert steps[0].executed.allowed and steps[0].effect.observation == "1 failed"  # the effect survived too
