"""A tiny OpenAI-compatible upstream for tests, the benchmark and trying the gateway without a model.

It answers at once and keeps every request it received (`StubUpstream.requests`), so a test can see
exactly what the gateway sent upstream. With tools offered and no tool result yet in the messages it
calls the first tool (a `tool_choice` naming a function: that one, always); otherwise it answers `ok`.
Streaming sends the same answer in two chunks.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections import deque
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route


def answer(body: dict[str, Any]) -> dict[str, Any]:
    messages = body.get("messages") or []
    tools = body.get("tools") or []
    message: dict[str, Any] = {"role": "assistant", "content": "ok"}
    finish = "stop"
    forced = body.get("tool_choice")
    named = (forced.get("function") or {}).get("name") if isinstance(forced, dict) else None
    if tools and (named or not any(isinstance(m, dict) and m.get("role") == "tool" for m in messages)):
        name = named or tools[0].get("function", {}).get("name", "tool")
        message = {"role": "assistant", "content": None, "tool_calls": [
            {"id": f"call_{len(messages)}", "type": "function", "function": {"name": name, "arguments": "{}"}}]}
        finish = "tool_calls"
    choice: dict[str, Any] = {"index": 0, "message": message, "finish_reason": finish}
    if body.get("logprobs"):  # as OpenAI, and token ids beside them as vLLM-style servers add when asked
        choice["logprobs"] = {"content": [{"token": "ok", "logprob": -0.25, "top_logprobs": []},
                                          {"token": "!", "logprob": -1.5, "top_logprobs": []}]}
        choice["token_ids"] = [564, 0]
    return {"id": f"stub-{time.monotonic_ns()}", "object": "chat.completion", "created": int(time.time()),
            "model": body.get("model") or "stub", "choices": [choice],
            "usage": {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12}}


class StubUpstream:
    """The stub as an ASGI app (`.app`), and a way to run it on a free localhost port in a thread."""

    def __init__(self) -> None:
        self.requests: deque[dict[str, Any]] = deque(maxlen=10_000)  # the latest, for tests; bounded for demos
        self.app = Starlette(routes=[Route("/v1/chat/completions", self.chat, methods=["POST"]),
                                     Route("/v1/models", self.models, methods=["GET"])])
        self.server: uvicorn.Server | None = None
        self.port = 0

    async def chat(self, request: Request) -> Response:
        body = json.loads(await request.body())
        self.requests.append(body)
        data = answer(body)
        if not body.get("stream"):
            return JSONResponse(data)
        message = data["choices"][0]["message"]

        async def chunks() -> Any:
            delta: dict[str, Any] = {"role": "assistant", "content": message.get("content") or ""}
            if message.get("tool_calls"):
                delta["tool_calls"] = [{"index": 0, **message["tool_calls"][0]}]
            for part in ({"delta": delta}, {"delta": {}, "finish_reason": data["choices"][0]["finish_reason"]}):
                event = {"id": data["id"], "object": "chat.completion.chunk", "model": data["model"],
                         "choices": [{"index": 0, **part}]}
                yield f"data: {json.dumps(event)}\n\n"
            yield "data: [DONE]\n\n"

        return StreamingResponse(chunks(), media_type="text/event-stream")

    async def models(self, request: Request) -> Response:
        return JSONResponse({"object": "list", "data": [{"id": "stub", "object": "model", "owned_by": "stub"}]})

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> StubUpstream:
        self.port = free_port()
        self.server = serve_in_thread(self.app, self.port)
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.server.should_exit = True


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def serve_in_thread(app: Any, port: int, *, timeout_s: float = 20.0, **options: Any) -> uvicorn.Server:
    """Run an ASGI app with uvicorn (and `options` for its Config) on 127.0.0.1:`port` in a daemon thread;
    returns once it listens."""
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", access_log=False,
                                           lifespan="on", **options))
    thread = threading.Thread(target=server.run, daemon=True, name=f"uvicorn-{port}")
    thread.start()
    deadline = time.monotonic() + timeout_s
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError(f"the server on port {port} did not start")
        time.sleep(0.01)
    return server


def main() -> None:
    """`python -m lle.gateway.stub [--port N]`: the stub on its own, e.g. as `lle serve --upstream` in a demo."""
    import argparse

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, default=8771)
    port = parser.parse_args().port
    print(f"stub upstream on http://127.0.0.1:{port}/v1", flush=True)
    uvicorn.run(StubUpstream().app, host="127.0.0.1", port=port, log_level="warning", access_log=False)


if __name__ == "__main__":
    main()
