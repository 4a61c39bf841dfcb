"""A multi-step agent (the plain `openai` client, with tools) through `lle serve` in front of the embedded
SmolLM2: its calls become steps, its test-result feedback becomes evidence, and the ended episode is in the
store and routed to memory. The model is loaded once for the module."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lle.core import CarrierKind, UpdateOp
from lle.gateway.app import create_app
from lle.gateway.client import GatewayEpisode
from lle.gateway.config import ClientConfig, GatewayConfig
from lle.gateway.stub import free_port, serve_in_thread
from lle.gateway.upstream import EmbeddedUpstream
from lle.store import Store

openai = pytest.importorskip("openai")
TOKEN = "embedded-test-token"
TOOLS = [
    {"type": "function", "function": {"name": "read_file", "description": "Read a file of the project.",
                                      "parameters": {"type": "object", "properties": {"path": {"type": "string"}},
                                                     "required": ["path"]}}},
    {"type": "function", "function": {"name": "run_tests", "description": "Run the project's unit tests.",
                                      "parameters": {"type": "object", "properties": {}}}},
]
CALC = "def multiply(a, b):\n    return a * b\n"


@pytest.fixture(scope="module")
def smollm_path() -> Path:
    pytest.importorskip("llama_cpp", reason="the llama extra is not installed (make test installs it)")
    from lle.errors import ModelError
    from lle.policies.catalog import DEFAULT_MODEL, locate
    from lle.policies.doctor import check_model

    path = locate(DEFAULT_MODEL)
    try:  # a llama.cpp build that does not fit this CPU fails here with its reason, not with a segfault
        check_model(path, tokens=2)
    except ModelError as err:
        pytest.fail(f"the embedded model does not run on this machine: {err}")
    return path


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, smollm_path: Path) -> Iterator[tuple[str, Path]]:
    workspace = tmp_path_factory.mktemp("gateway") / "ws"
    upstream = EmbeddedUpstream("smollm2-135m", n_ctx=2048, n_threads=1)  # loaded once per module
    config = GatewayConfig(workspace=workspace, clients={TOKEN: ClientConfig(name="agent", project="calc")},
                           upstream="embedded", model="smollm2-135m")
    port = free_port()
    server = serve_in_thread(create_app(config, upstream), port)
    yield f"http://127.0.0.1:{port}", workspace
    server.should_exit = True


def run_tool(name: str, args: dict[str, Any], project: Path) -> str:
    """The agent's own tools: the gateway only ever sees what it reports back."""
    if name == "read_file":
        path = project / str(args.get("path", "")).lstrip("./")
        return path.read_text() if path.is_file() else f"no such file {args.get('path')!r}; files: calc.py"
    namespace: dict[str, Any] = {}
    exec(compile((project / "calc.py").read_text(), "calc.py", "exec"), namespace)  # the project's one test
    return "1 passed" if namespace["multiply"](6, 7) == 42 else "1 failed: multiply(6, 7) != 42"


@pytest.mark.slow
def test_an_agent_through_lle_serve_is_recorded_assessed_and_remembered(served: tuple[str, Path],
                                                                        tmp_path: Path) -> None:
    gateway, workspace = served
    project = tmp_path / "project"
    project.mkdir()
    (project / "calc.py").write_text(CALC)
    episode = GatewayEpisode(gateway, TOKEN, "calc-1")
    llm = openai.OpenAI(base_url=episode.base_url, api_key=TOKEN, max_retries=0)
    messages: list[Any] = [
        {"role": "system", "content": "You are a careful coding agent. Use the tools."},
        {"role": "user", "content": "Check that calc.py's multiply works: read calc.py, then run the tests."},
    ]
    for tool in ("read_file", "run_tests"):  # the agent's plan: each step forces one tool
        response = llm.chat.completions.create(model="smollm2-135m", messages=messages, tools=TOOLS, max_tokens=32,
                                               temperature=0.0, tool_choice={"type": "function",
                                                                             "function": {"name": tool}})
        message = response.choices[0].message
        assert message.tool_calls and message.tool_calls[0].function.name == tool
        messages.append(message.model_dump(exclude_none=True))
        for call in message.tool_calls:
            try:
                args = json.loads(call.function.arguments)
            except ValueError:
                args = {}  # a small model cut off mid-object: the tool gets no arguments
            messages.append({"role": "tool", "tool_call_id": call.id,
                             "content": run_tool(call.function.name, args if isinstance(args, dict) else {},
                                                 project)})
    messages.append({"role": "user", "content": "Say in one sentence whether multiply works."})
    stream = llm.chat.completions.create(model="smollm2-135m", messages=messages, max_tokens=16, temperature=0.0,
                                         stream=True)
    answer = "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)
    test_output = run_tool("run_tests", {}, project)
    episode.feedback("test_result", tests=[{"name": "test_multiply", "passed": test_output == "1 passed",
                                            "detail": test_output}])
    ended = episode.end(goal="Check that calc.py's multiply works")
    episode.close()

    assert ended["steps"] == 3 and ended["outcome"] == "pass" and ended["verification"] == "hard_anchor"
    with Store(workspace / "lle.db") as db:
        exp = db.get_experience(ended["experience_id"])
        assert [s.request.tool for s in exp.steps] == ["read_file", "run_tests", "<none>"]
        assert exp.steps[1].effect.observation == "1 passed" and exp.steps[1].executed.allowed
        assert all(s.llm is not None and s.llm.latency_ms > 0 and s.llm.model == "smollm2-135m" for s in exp.steps)
        # Token counts as the upstream reports them (llama.cpp's stream carries no usage: the last step has none).
        assert all(s.llm is not None and s.llm.completion_tokens > 0 for s in exp.steps[:2])
        assert exp.steps[2].request.thought == answer  # the streamed answer, joined
        tests = [e for e in db.evidence_for(exp.id) if e.anchor == "test"]
        assert [(e.outcome.value, e.strength.value) for e in tests] == [("pass", "hard")]
        memory = [u for u in db.list_updates(carrier="memory") if exp.id in u.experience_ids]
        assert [u.op for u in memory] == [UpdateOp.admit]
        (item,) = db.items_by_id([str(memory[0].item_id)], CarrierKind.memory.value)
        assert item.scope.family == "gw-agent" and item.scope.project == "calc"
