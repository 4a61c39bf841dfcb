"""Every request is bounded: JSON nested too deep, a lone surrogate or bytes that are not UTF-8 are a one-line
400 (nothing forwarded, nothing recorded, no traceback anywhere), and a body that stalls or trickles is a 408
within the configured read timeout, the connection closed; normal calls still work."""

from __future__ import annotations

import json
import logging
import socket
import time
from pathlib import Path
from typing import Any

import httpx2
import pytest

from gateway.conftest import config
from gateway.gw_helpers import AUTH, TOKEN, stalled_answer
from gateway.test_bad_input import CHAT, error_of, nothing_recorded
from lle.gateway.app import create_app
from lle.gateway.bounds import HeadersInTime
from lle.gateway.stub import StubUpstream, free_port, serve_in_thread
from lle.gateway.upstream import HttpUpstream

JSON = {**AUTH, "content-type": "application/json"}


def test_json_nested_30000_deep_is_a_one_line_400_without_a_traceback(
        gateway: Any, tmp_path: Path, stub: StubUpstream, caplog: pytest.LogCaptureFixture) -> None:
    sent = len(stub.requests)
    with caplog.at_level(logging.WARNING), gateway() as client:  # TestClient re-raises what the app let through
        for body in (b"[" * 30_000, b'{"messages": ' + b"[" * 30_000 + b"]" * 30_000 + b"}",
                     b'{"messages": [{"role": "user", "content": "x", "deep": ' + b"[" * 65 + b"]" * 65 + b"}]}"):
            message = error_of(client.post(CHAT, content=body, headers=JSON), 400)
            assert "deep" in message and "64" in message and "Traceback" not in message
        for path in ("/v1/lle/episodes/ep-1/feedback", "/v1/lle/episodes/ep-1/end"):
            assert "deep" in error_of(client.post(path, content=b"[" * 30_000, headers=JSON), 400)
        ok = {"messages": [{"role": "user", "content": "hi", "x": json.loads("[" * 60 + "]" * 60)}]}
        assert client.post(CHAT, json=ok, headers=AUTH).status_code == 200  # deep, but within the bound
    assert not [r for r in caplog.records if r.exc_info or "Traceback" in r.getMessage()]
    assert len(stub.requests) == sent + 1  # only the good call went upstream
    nothing_recorded_but(tmp_path / "ws", episodes=1)


def nothing_recorded_but(workspace: Path, episodes: int) -> None:
    assert len(list((workspace / "gateway" / "open").glob("*/*.jsonl"))) == episodes


@pytest.mark.parametrize(("body", "word"), [
    (b'{"messages": [{"role": "user", "content": "\\ud800"}]}', "surrogate"),
    (b'{"messages": [{"role": "user", "content": "a\\udfffb"}]}', "surrogate"),
    (b'{"messages": [{"role": "user", "\\ud83d": "x"}]}', "surrogate"),  # a key, a high half without its low
    (b'{"messages": [{"role": "user", "content": "\xed\xa0\x80"}]}', "UTF-8"),  # a surrogate encoded raw
    (b'{"messages": [{"role": "user", "content": "\xff"}]}', "UTF-8"),
])
def test_a_lone_surrogate_or_bytes_not_utf8_are_400_and_never_forwarded(
        gateway: Any, tmp_path: Path, stub: StubUpstream, body: bytes, word: str) -> None:
    sent = len(stub.requests)
    with gateway() as client:
        message = error_of(client.post(CHAT, content=body, headers=JSON), 400)
        assert word in message
        paired = b'{"messages": [{"role": "user", "content": "\\ud83d\\ude00 \xc3\xa9"}]}'  # a pair, and UTF-8
        answered = client.post("/v1/chat/completions", content=paired, headers=JSON)
        assert answered.status_code == 200, answered.text
    assert len(stub.requests) == sent + 1 and stub.requests[-1]["messages"][-1]["content"] == "\U0001f600 é"
    nothing_recorded(tmp_path / "ws")


@pytest.mark.parametrize("trickle", [False, True], ids=["stalled", "trickled"])
def test_a_body_that_does_not_arrive_is_408_within_the_read_timeout(
        tmp_path: Path, stub: StubUpstream, trickle: bool, caplog: pytest.LogCaptureFixture) -> None:
    app = create_app(config(tmp_path / "ws", upstream=stub.base_url, model="stub", body_timeout_s=1.0),
                     HttpUpstream(stub.base_url, "stub"))
    port = free_port()
    server = serve_in_thread(app, port)
    log = logging.getLogger("uvicorn.error")  # the server's own log, where a traceback would land
    log.addHandler(caplog.handler)
    try:
        head = (f"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\n"
                "Content-Type: application/json\r\nContent-Length: 100000\r\n\r\n{\"messages\"").encode()
        with socket.create_connection(("127.0.0.1", port)) as gone:  # a client gone half-way: nothing logged
            gone.sendall(head)
        answer, took = stalled_answer(port, head, trickle=trickle)
        assert answer.startswith(b"HTTP/1.1 408 "), answer[:200]
        assert 0.9 < took < 3.0, took  # answered at the timeout, and the connection closed then
        status, _, body = answer.partition(b"\r\n\r\n")
        assert b"connection: close" in status.lower()
        message = json.loads(body)["error"]["message"]
        assert "1 s" in message and "--body-timeout" in message and "\n" not in message
        good = httpx2.post(f"http://127.0.0.1:{port}/v1/chat/completions", headers=AUTH, timeout=10,
                           json={"messages": [{"role": "user", "content": "hi"}]})
        assert good.status_code == 200, good.text
    finally:
        server.should_exit = True
        log.removeHandler(caplog.handler)
    assert not [r for r in caplog.records if r.exc_info or "Traceback" in r.getMessage()]


def test_headers_that_do_not_arrive_close_the_connection_at_the_timeout(tmp_path: Path, stub: StubUpstream) -> None:
    app = create_app(config(tmp_path / "ws", upstream=stub.base_url, model="stub"), HttpUpstream(stub.base_url, "stub"))
    port = free_port()
    server = serve_in_thread(app, port, http=HeadersInTime, timeout_keep_alive=1)
    try:
        # Nothing at all, then half a request line: no app runs, and the connection ends at the timeout.
        for head in (b"", b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthoriz"):
            answer, took = stalled_answer(port, head, within_s=6.0)
            assert answer == b"" and 0.9 < took < 3.0, (answer, took)
        with socket.create_connection(("127.0.0.1", port), timeout=6.0) as sock:  # a header line every 0.2 s
            sock.sendall(b"GET /v1/models HTTP/1.1\r\nHost: x\r\n")
            started, closed = time.monotonic(), False
            while not closed and time.monotonic() - started < 6.0:
                time.sleep(0.2)
                try:
                    sock.sendall(b"X-Slow: 1\r\n")
                except OSError:
                    closed = True
            assert closed and 0.9 < time.monotonic() - started < 3.5
        good = httpx2.post(f"http://127.0.0.1:{port}/v1/chat/completions", headers=AUTH, timeout=10,
                           json={"messages": [{"role": "user", "content": "hi"}]})
        assert good.status_code == 200, good.text  # a request whose headers came in time is served
    finally:
        server.should_exit = True
