"""A tool-using agent written with the plain `openai` client, recorded by `lle serve`.

    export LLE_GATEWAY_TOKEN=$(python -c "import secrets; print(secrets.token_hex(16))")
    lle serve &                                   # embedded SmolLM2; or --upstream http://HOST:PORT/v1
    python examples/gateway_agent.py              # one episode: calls, a test result, the end

The agent knows nothing of lle except its base URL: every call through it becomes a step. The test
result it posts is what lle learns from (a hard `test` anchor); `end` assesses, scrubs, stores and
routes the episode, and prints what happened to it.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import openai

from lle.gateway.client import GatewayEpisode

TOOLS = [
    {"type": "function", "function": {"name": "read_file", "description": "Read a file of the project.",
                                      "parameters": {"type": "object", "properties": {"path": {"type": "string"}},
                                                     "required": ["path"]}}},
    {"type": "function", "function": {"name": "run_tests", "description": "Run the project's unit tests.",
                                      "parameters": {"type": "object", "properties": {}}}},
]


def run_tool(name: str, args: dict[str, Any], project: Path) -> str:
    if name == "read_file":
        path = project / str(args.get("path", "")).lstrip("./")
        return path.read_text() if path.is_file() else f"no such file {args.get('path')!r}; files: calc.py"
    namespace: dict[str, Any] = {}
    exec(compile((project / "calc.py").read_text(), "calc.py", "exec"), namespace)
    return "1 passed" if namespace["multiply"](6, 7) == 42 else "1 failed: multiply(6, 7) != 42"


def main() -> None:
    gateway = os.environ.get("LLE_GATEWAY", "http://127.0.0.1:8770")
    token = os.environ.get("LLE_GATEWAY_TOKEN") or sys.exit("set LLE_GATEWAY_TOKEN to the token lle serve uses")
    project = Path(tempfile.mkdtemp())
    (project / "calc.py").write_text("def multiply(a, b):\n    return a * b\n")

    episode = GatewayEpisode(gateway, token, project="calc")
    llm = openai.OpenAI(base_url=episode.base_url, api_key=token, default_headers=episode.default_headers)
    messages: list[Any] = [{"role": "system", "content": "You are a careful coding agent. Use the tools."},
                           {"role": "user", "content": "Check that calc.py's multiply works: read calc.py, "
                                                       "then run the tests."}]
    for tool in ("read_file", "run_tests"):  # a small model needs the plan spelled out: one forced tool a step
        reply = llm.chat.completions.create(model="smollm2-135m", messages=messages, tools=TOOLS, max_tokens=48,
                                            tool_choice={"type": "function", "function": {"name": tool}})
        message = reply.choices[0].message
        messages.append(message.model_dump(exclude_none=True))
        for call in message.tool_calls or []:
            try:
                args = json.loads(call.function.arguments)
            except ValueError:
                args = {}
            result = run_tool(call.function.name, args if isinstance(args, dict) else {}, project)
            print(f"{call.function.name}({call.function.arguments}) -> {result!r}")
            messages.append({"role": "tool", "tool_call_id": call.id, "content": result})

    outcome = run_tool("run_tests", {}, project)  # the agent's own check, independent of what the model said
    episode.feedback("test_result", tests=[{"name": "test_multiply", "passed": outcome == "1 passed",
                                            "detail": outcome}])
    print(json.dumps(episode.end(goal="Check that calc.py's multiply works"), indent=2))


if __name__ == "__main__":
    main()
