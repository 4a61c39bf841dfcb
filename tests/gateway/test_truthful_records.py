"""Records that tell the truth (issue 44): a tool call whose result the agent never sent back is *not
reported*, never denied; a memory's lesson names the tools that ran and never `<none>`; the viewer shows
a gateway step's messages."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from gateway.gw_helpers import AUTH, TOOLS
from lle.core import ActionStatus, CarrierItem
from lle.store import Store
from lle.viewer.app import create_app

READ = {"type": "function", "function": {"name": "read_file", "description": "Read a file.",
                                         "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}}
PASSED = {"kind": "test_result", "tests": [{"name": "test_multiply", "passed": True, "detail": "1 passed"}]}


def chat(client: Any, episode: str, messages: list[Any], **extra: Any) -> dict[str, Any]:
    response = client.post(f"/episodes/{episode}/v1/chat/completions", headers=AUTH, json={"messages": messages,
                                                                                              **extra})
    assert response.status_code == 200, response.text
    message: dict[str, Any] = response.json()["choices"][0]["message"]
    return message


def lesson_of(db: Store, ended: dict[str, Any]) -> str:
    (item_id,) = ended["memory_items"]
    (item,) = db.items_by_id([item_id], "memory")
    assert isinstance(item, CarrierItem) and isinstance(item.content, dict)
    return str(item.content["lesson"])


def example_episode(client: Any, episode: str) -> dict[str, Any]:
    """As examples/gateway_agent.py: read_file (its result sent back), then run_tests, run by the agent
    but its result never sent (no call follows), then a passing test result and the end."""
    messages: list[Any] = [{"role": "user", "content": "Check that calc.py's multiply works"}]
    for tool in ("read_file", "run_tests"):
        message = chat(client, episode, messages, tools=[READ, *TOOLS],
                       tool_choice={"type": "function", "function": {"name": tool}})
        messages += [message, {"role": "tool", "tool_call_id": message["tool_calls"][0]["id"],
                               "content": "def multiply(a, b): return a * b" if tool == "read_file" else "1 passed"}]
    client.post(f"/v1/lle/episodes/{episode}/feedback", headers=AUTH, json=PASSED)
    ended: dict[str, Any] = client.post(f"/v1/lle/episodes/{episode}/end", headers=AUTH, json={}).json()
    return ended


def test_a_tool_call_without_a_result_is_not_reported_not_denied(gateway: Any, tmp_path: Path) -> None:
    with gateway() as client:
        ended = example_episode(client, "ex")
    assert ended["outcome"] == "pass"
    with Store(tmp_path / "ws" / "lle.db") as db:
        read, tests = db.steps_of(ended["experience_id"])
        lesson = lesson_of(db, ended)
    assert read.executed.tool == "read_file" and read.executed.status is ActionStatus.ok
    assert "multiply" in read.effect.observation
    assert tests.request.tool == "run_tests" and tests.executed.status is ActionStatus.not_reported
    assert tests.executed.allowed and tests.executed.denied_reason is None  # nothing refused it
    assert tests.effect.observation == "" and tests.effect.error is None  # no result made up either
    assert "read_file → run_tests (result not reported)" in lesson
    assert "<none>" not in lesson and "denied" not in lesson.lower()
    shown = subprocess.run([sys.executable, "-m", "lle.cli.main", "--workspace", str(tmp_path / "ws"), "experiences",
                            "show", ended["experience_id"]], capture_output=True, text=True, timeout=120, check=False)
    assert shown.returncode == 0, shown.stderr
    assert "NOT REPORTED: no result was reported by the client" in shown.stdout and "DENIED" not in shown.stdout


def test_an_episode_without_tool_calls_has_a_lesson_without_none(gateway: Any, tmp_path: Path) -> None:
    with gateway() as client:
        chat(client, "plain", [{"role": "user", "content": "What is 6 times 7?"}])
        bare = client.post("/v1/lle/episodes/plain/end", headers=AUTH, json={"feedback": [PASSED]}).json()
        messages: list[Any] = [{"role": "user", "content": "run the tests"}]
        first = chat(client, "mixed", messages, tools=TOOLS)  # run_tests, answered, then a text answer
        messages += [first, {"role": "tool", "tool_call_id": first["tool_calls"][0]["id"], "content": "1 passed"}]
        chat(client, "mixed", messages, tools=TOOLS)
        mixed = client.post("/v1/lle/episodes/mixed/end", headers=AUTH, json={"feedback": [PASSED]}).json()
    with Store(tmp_path / "ws" / "lle.db") as db:
        bare_lesson, mixed_lesson = lesson_of(db, bare), lesson_of(db, mixed)
    assert "<none>" not in bare_lesson and "by answering without tools" in bare_lesson
    assert "<none>" not in mixed_lesson and mixed_lesson.startswith("Succeeded (hard_anchor) by run_tests.")


def test_the_viewer_shows_a_gateway_steps_messages(gateway: Any, tmp_path: Path) -> None:
    with gateway() as client:
        ended = example_episode(client, "seen")
    page = TestClient(create_app(tmp_path / "ws", "t")).get(f"/runs/workspace/main/episodes/{ended['experience_id']}")
    assert page.status_code == 200
    assert "prompt not stored" not in page.text
    assert "── user ──" in page.text and "Check that calc.py&#39;s multiply works" in page.text
    assert "def multiply(a, b)" in page.text  # the tool result the agent sent in its second call
    assert "read_file" in page.text and "not reported" in page.text and "DENIED" not in page.text
