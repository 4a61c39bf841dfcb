"""Bad input gets a clear 4xx naming the input and the fix, and nothing is recorded."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gateway.gw_helpers import AUTH, OTHER_AUTH, TOOLS
from lle.store import Store

CHAT = "/episodes/ep-1/v1/chat/completions"
BODY = {"messages": [{"role": "user", "content": "hello"}], "tools": TOOLS}


def nothing_recorded(workspace: Path) -> None:
    journals = list((workspace / "gateway" / "open").glob("*/*.jsonl"))
    assert journals == [], f"journaled: {journals}"
    if (workspace / "lle.db").exists():
        with Store(workspace / "lle.db") as db:
            assert db.count("experiences") == 0 and db.count("steps") == 0 and db.count("episodes") == 0


def error_of(response: Any, status: int) -> str:
    assert response.status_code == status, response.text
    message = response.json()["error"]["message"]
    assert "\n" not in message and len(message) < 400
    return str(message)


@pytest.mark.parametrize(("headers", "word"), [({}, "missing"), ({"Authorization": "Bearer nope"}, "not a known"),
                                               ({"Authorization": "Basic abc"}, "not a known")])
def test_a_wrong_or_missing_token_is_401(gateway: Any, tmp_path: Path, headers: dict[str, str], word: str) -> None:
    with gateway() as client:
        for path in (CHAT, "/v1/lle/episodes/ep-1/feedback", "/v1/lle/episodes/ep-1/end"):
            message = error_of(client.post(path, json=BODY, headers=headers), 401)
            assert word in message and "Bearer" in message
        assert client.get("/v1/models", headers=headers).status_code == 401
    nothing_recorded(tmp_path / "ws")


def test_malformed_json_is_400(gateway: Any, tmp_path: Path) -> None:
    with gateway() as client:
        torn = client.post(CHAT, content=b'{"messages": [', headers={**AUTH, "content-type": "application/json"})
        message = error_of(torn, 400)
        assert "not valid JSON" in message
        assert "messages" in error_of(client.post(CHAT, json={"messages": []}, headers=AUTH), 400)
        assert "messages.0" in error_of(client.post(CHAT, json={"messages": ["hi"]}, headers=AUTH), 400)
        assert "JSON object" in error_of(client.post(CHAT, json=[1, 2], headers=AUTH), 400)
        bad_id = client.post("/episodes/bad%20id!/v1/chat/completions", json=BODY, headers=AUTH)
        assert "episode id" in error_of(bad_id, 400)
        assert "X-LLE-Project" in error_of(client.post(CHAT, json=BODY, headers={**AUTH, "X-LLE-Project": "a b"}), 400)
    nothing_recorded(tmp_path / "ws")


def test_an_oversized_body_is_413(gateway: Any, tmp_path: Path) -> None:
    with gateway(max_body_bytes=4096) as client:
        big = {"messages": [{"role": "user", "content": "x" * 10_000}]}
        assert "--max-body" in error_of(client.post(CHAT, json=big, headers=AUTH), 413)
    nothing_recorded(tmp_path / "ws")


def test_an_unknown_episode_is_404_and_bad_feedback_400(gateway: Any, tmp_path: Path) -> None:
    with gateway() as client:
        for path, body in (("feedback", {"kind": "test_result", "passed": True}), ("end", {})):
            message = error_of(client.post(f"/v1/lle/episodes/never/{path}", json=body, headers=AUTH), 404)
            assert "never" in message and "chat call" in message
        assert client.post(CHAT, json=BODY, headers=AUTH).status_code == 200
        # The episode is alice's: bob's token does not find it, nor can it end it.
        assert error_of(client.post("/v1/lle/episodes/ep-1/end", json={}, headers=OTHER_AUTH), 404)
        bad = [({"kind": "vibes"}, "kind"), ({"kind": "score", "score": "high"}, "score"),
               ({"kind": "test_result", "extra": 1}, "extra"), ({"kind": "test_result", "step": 5}, "step")]
        for body, word in bad:
            assert word in error_of(client.post("/v1/lle/episodes/ep-1/feedback", json=body, headers=AUTH), 400)
        assert "family" in error_of(client.post("/v1/lle/episodes/ep-1/end", json={"family": "gw-bob"},
                                                headers=AUTH), 403)
        assert "writeback" in error_of(client.post("/v1/lle/episodes/ep-1/end", json={"writeback": ["dataset"]},
                                                   headers=AUTH), 403)
        state = client.get("/v1/lle/episodes/ep-1", headers=AUTH).json()
        assert state["feedback"] == 0 and state["steps"] == 1 and not state["ended"]
    with Store(tmp_path / "ws" / "lle.db") as db:  # refused feedback and ends left no trace in the ledger
        assert db.count("experiences") == 0 and db.count("episodes") == 0


def test_the_rate_limit_is_429_with_retry_after(gateway: Any) -> None:
    with gateway(rate_per_s=0.01, burst=2) as client:
        assert client.get("/v1/models", headers=AUTH).status_code == 200
        assert client.get("/v1/models", headers=AUTH).status_code == 200
        refused = client.get("/v1/models", headers=AUTH)
        assert "rate" in error_of(refused, 429) and refused.headers["Retry-After"]
        assert client.get("/v1/models", headers=OTHER_AUTH).status_code == 200  # per client
