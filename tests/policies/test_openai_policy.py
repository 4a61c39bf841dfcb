"""OpenAIPolicy against real HTTP servers on 127.0.0.1: unreachable, garbage, slow, picky, and invalid replies."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from lle.actions import action_schema
from lle.core import Context, Message, ToolSpec
from lle.errors import InvalidInputError, PolicyBackendError
from lle.policies.openai import OpenAIPolicy, extract_json
from lle.policies.prompt import messages_text

TOOLS = [
    ToolSpec(name="look", description="Look."),
    ToolSpec(name="take", description="Take an item.",
             parameters={"type": "object", "properties": {"item": {"type": "string"}}, "required": ["item"]}),
]
CONTEXT = Context(messages=[Message(role="system", content="act"), Message(role="user", content="go")],
                  action_schema=action_schema(TOOLS))
VALID = {"thought": "see", "tool": "take", "args": {"item": "key"}, "expect": "I hold the key"}

Handler = Callable[[dict[str, Any]], tuple[int, str, str]]
"""request body -> (status, content type, body)"""


def completion(content: str | None, tool_calls: list[dict[str, Any]] | None = None) -> str:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = tool_calls
    return json.dumps({
        "id": "x", "object": "chat.completion", "created": 0, "model": "m",
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18},
    })


class Server:
    def __init__(self, handler: Handler) -> None:
        self.requests: list[dict[str, Any]] = []
        outer = self

        class H(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                outer.requests.append(body)
                status, ctype, text = handler(body)
                data = text.encode()
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"


@pytest.fixture
def serve() -> Iterator[Callable[[Handler], Server]]:
    servers: list[Server] = []

    def start(handler: Handler) -> Server:
        server = Server(handler)
        server.thread.start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.httpd.shutdown()
        server.httpd.server_close()


def policy(url: str, **kw: Any) -> OpenAIPolicy:
    kw.setdefault("timeout", 2.0)
    kw.setdefault("max_retries", 0)
    return OpenAIPolicy("m", base_url=url, **kw)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_unreachable_server_is_a_clear_error_quickly() -> None:
    start = time.monotonic()
    with pytest.raises(PolicyBackendError, match=r"cannot reach .*start the server or fix base_url"):
        policy(f"http://127.0.0.1:{free_port()}/v1", max_retries=1).act(CONTEXT)
    assert time.monotonic() - start < 10


@pytest.mark.parametrize(("ctype", "body"), [
    ("text/plain", "garbage \x00\x01 not json"),
    ("application/json", '{"hello": "world"}'),
    ("application/json", '{"choices": []}'),
    ("application/json", "[1, 2, 3]"),
    ("text/html", "<html>proxy error</html>"),
])
def test_garbage_answers_are_clear_errors(serve: Callable[[Handler], Server], ctype: str, body: str) -> None:
    server = serve(lambda req: (200, ctype, body))
    with pytest.raises(PolicyBackendError, match=r"not a chat completion|no message content|unusable"):
        policy(server.url).act(CONTEXT)


def test_slow_server_times_out(serve: Callable[[Handler], Server]) -> None:
    def slow(req: dict[str, Any]) -> tuple[int, str, str]:
        time.sleep(3)
        return 200, "application/json", completion(json.dumps(VALID))

    server = serve(slow)
    start = time.monotonic()
    with pytest.raises(PolicyBackendError, match=r"did not answer within 0\.5s"):
        policy(server.url, timeout=0.5).act(CONTEXT)
    assert time.monotonic() - start < 3


def test_server_errors_are_retried_then_reported(serve: Callable[[Handler], Server]) -> None:
    server = serve(lambda req: (503, "application/json", '{"error": {"message": "overloaded"}}'))
    with pytest.raises(PolicyBackendError, match="HTTP 503"):
        policy(server.url, max_retries=2).act(CONTEXT)
    assert len(server.requests) == 3  # one call + two retries with backoff


def test_json_schema_mode_first(serve: Callable[[Handler], Server]) -> None:
    server = serve(lambda req: (200, "application/json", completion(json.dumps(VALID))))
    p = policy(server.url, seed=7)
    request, call = p.act(CONTEXT)
    assert (request.tool, request.args, request.expect) == ("take", {"item": "key"}, "I hold the key")
    assert (call.model, call.prompt_tokens, call.completion_tokens) == ("openai:m", 11, 7)
    sent = server.requests[0]
    assert sent["response_format"]["type"] == "json_schema" and sent["seed"] == 7
    assert call.prompt == messages_text(sent["messages"])  # the server renders them: what was sent is recorded
    assert sent["response_format"]["json_schema"]["schema"] == CONTEXT.action_schema


def test_falls_back_to_forced_tool_calls(serve: Callable[[Handler], Server]) -> None:
    def picky(req: dict[str, Any]) -> tuple[int, str, str]:
        if "response_format" in req:
            return 400, "application/json", '{"error": {"message": "response_format not supported"}}'
        assert req["tool_choice"] == "required" and [t["function"]["name"] for t in req["tools"]] == ["look", "take"]
        call = {"id": "c1", "type": "function",
                "function": {"name": "take", "arguments": json.dumps({"thought": "t", "args": {"item": "key"},
                                                                      "expect": "e"})}}
        return 200, "application/json", completion(None, [call])

    server = serve(picky)
    p = policy(server.url)
    request, _ = p.act(CONTEXT)
    assert request.tool == "take" and request.args == {"item": "key"} and p.mode == "tools"
    p.act(CONTEXT)  # the accepted mode is remembered: no more rejected requests
    assert [("response_format" in r, "tools" in r) for r in server.requests] == [
        (True, False), (True, False), (False, True), (False, True)]


def test_prompt_mode_parses_and_retries_with_the_error(serve: Callable[[Handler], Server]) -> None:
    replies = iter(["Sure! Here is my action.",
                    '```json\n{"thought": "t", "tool": "fly", "args": {}, "expect": ""}\n```',
                    f"ok: {json.dumps(VALID)} done"])
    server = serve(lambda req: (200, "application/json", completion(next(replies))))
    request, call = policy(server.url, mode="prompt", parse_retries=2).act(CONTEXT)
    assert request.tool == "take" and call.prompt_tokens == 33
    last = server.requests[-1]["messages"]
    assert last[-1]["role"] == "user" and "does not match the tool schema" in last[-1]["content"]
    assert call.prompt == messages_text(last)  # the accepted request's messages, re-asks included


def test_invalid_replies_end_in_a_recorded_failure(serve: Callable[[Handler], Server]) -> None:
    server = serve(lambda req: (200, "application/json", completion('{"tool": "look"}')))
    with pytest.raises(PolicyBackendError, match="no valid action in 2 tries"):
        policy(server.url, parse_retries=1).act(CONTEXT)
    assert len(server.requests) == 2


def test_needs_a_key_or_a_server(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("OPENAI_API_KEY", "LLE_API_KEY", "LLE_BASE_URL", "OPENAI_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    with pytest.raises(InvalidInputError, match="OPENAI_API_KEY"):
        OpenAIPolicy("gpt-4o-mini")
    monkeypatch.setenv("LLE_API_KEY", "k")
    assert OpenAIPolicy("gpt-4o-mini").client.api_key == "k"


def test_extract_json() -> None:
    assert extract_json('x {"a": {"b": 1}} y {"c": 2}') == {"a": {"b": 1}}
    assert extract_json("[1] {bad {\"ok\": true}") == {"ok": True}
    with pytest.raises(ValueError, match="no JSON object"):
        extract_json("nothing here")


def test_unreachable_server_is_a_recorded_failed_step(tmp_path: Path) -> None:
    from lle.context import BudgetedContextBuilder
    from lle.core import Split
    from lle.runtime.harness import run_episode, stop_of
    from lle.store import Store
    from lle.worlds.base import open_family

    sw = open_family("toy/keys-v1").small_world(Split.train, 0)
    with Store(tmp_path / "lle.db") as store:
        exp = run_episode(sw, policy(f"http://127.0.0.1:{free_port()}/v1"), BudgetedContextBuilder(), store=store)
        stored = store.get_experience(exp.id)
    assert len(stored.steps) == 1
    assert stored.steps[0].effect.error is not None and "cannot reach" in stored.steps[0].effect.error
    stop = stop_of(stored.steps[0])
    assert stop is not None and stop.reason == "PolicyFailed"
