"""The viewer's one form refuses what it cannot read: bytes that are not UTF-8 (raw or percent-encoded) are a
one-line 400 and nothing is written; a form body that stalls is a 408 within the read timeout."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from gateway.gw_helpers import stalled_answer
from lle.gateway.stub import free_port, serve_in_thread
from lle.viewer.app import create_app

FORM = {"content-type": "application/x-www-form-urlencoded"}


@pytest.mark.parametrize("body", [b"target=itm_1&reason=\xff&token=t&confirm=yes", b"target=itm_1&reason=%FF%FE"])
def test_a_revoke_form_not_utf8_is_a_one_line_400(tmp_path: Path, body: bytes) -> None:
    client = TestClient(create_app(tmp_path, "t"))  # re-raises what the app let through
    answer = client.post("/runs/workspace/main/revoke", content=body, headers=FORM)
    assert answer.status_code == 400, answer.text
    title = re.search(r"<title>(.*?)</title>", answer.text, re.S)
    assert title and "UTF-8" in title.group(1) and "\n" not in title.group(1).strip()
    assert not (tmp_path / "lle.db").exists()  # nothing written, not even an empty store


def test_a_stalled_form_is_408_within_the_read_timeout(tmp_path: Path) -> None:
    port = free_port()
    server = serve_in_thread(create_app(tmp_path, "t", body_timeout_s=1.0), port)
    try:
        head = (b"POST /runs/workspace/main/revoke HTTP/1.1\r\nHost: x\r\n"
                b"Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 500\r\n\r\ntarget=")
        answer, took = stalled_answer(port, head)
        assert answer.startswith(b"HTTP/1.1 408 ") and 0.9 < took < 3.0, (answer[:200], took)
    finally:
        server.should_exit = True
