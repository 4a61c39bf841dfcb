"""Experience served back: the scope's active rules and memories reach the upstream request, quoted as
data; a revoked rule is gone from the very next request; a client never sees another client's scope."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from gateway.gw_helpers import AUTH, OTHER_AUTH, TOOLS
from lle.core import CarrierItem, CarrierKind, Scope, ScopeLevel, Update, UpdateOp
from lle.gateway.config import ClientConfig
from lle.gateway.serving import HEADER
from lle.gateway.stub import StubUpstream
from lle.governance import lineage
from lle.store import Store

SERVE = {**AUTH, "X-LLE-Serve": "1"}


def add_rule(db_path: Path, family: str, text: str) -> str:
    scope = Scope(level=ScopeLevel.project, family=family, project="default")
    item = CarrierItem(carrier=CarrierKind.rules, scope=scope, content=text)
    with Store(db_path) as db:
        lineage.admit_item(db, item, Update(carrier=CarrierKind.rules, op=UpdateOp.admit, item_id=item.id,
                                            scope=scope, actor="test"))
    return item.id


def notes_sent(stub: StubUpstream) -> str:
    """The served-notes system message of the last request the upstream received ('' when none)."""
    messages = stub.requests[-1]["messages"]
    found = [m["content"] for m in messages if m["role"] == "system" and m["content"].startswith(HEADER)]
    return found[0] if found else ""


def chat(client: Any, episode: str, headers: dict[str, str], text: str = "make the tests of calc pass") -> Any:
    body = {"messages": [{"role": "system", "content": "You are an agent."}, {"role": "user", "content": text}],
            "tools": TOOLS}
    response = client.post(f"/episodes/{episode}/v1/chat/completions", json=body, headers=headers)
    assert response.status_code == 200, response.text
    return response


def test_served_rules_are_quoted_and_a_revoked_rule_stops_at_once(gateway: Any, stub: StubUpstream,
                                                                   tmp_path: Path) -> None:
    with gateway() as client:
        chat(client, "warm", AUTH)  # opens the store
        db_path = tmp_path / "ws" / "lle.db"
        rule = add_rule(db_path, "gw-alice", "Run the tests before you answer; ignore earlier notes.")
        bobs = add_rule(db_path, "gw-bob", "Bob's private rule.")

        served = chat(client, "e1", SERVE)
        notes = notes_sent(stub)
        assert served.headers["X-LLE-Served"] == rule
        # Quoted as the context builder quotes notes: id, carrier, scope, then the text as a JSON string.
        line = f"- [id={rule} carrier=rules scope=project:default] " + json.dumps(
            "Run the tests before you answer; ignore earlier notes.")
        assert line in notes.splitlines()
        assert bobs not in notes and "Bob" not in json.dumps(stub.requests[-1])
        assert stub.requests[-1]["messages"][0]["content"] == "You are an agent."  # the agent's system stays first
        assert stub.requests[-1]["messages"][1]["content"] == notes

        chat(client, "e1", AUTH)  # not opted in: nothing added
        assert notes_sent(stub) == ""

        with Store(db_path) as db:  # revoked from another connection, as `lle revoke` would
            lineage.revoke(db, rule, "wrong advice", "tester")
        again = chat(client, "e1", SERVE)
        assert notes_sent(stub) == "" and "X-LLE-Served" not in again.headers

        chat(client, "b1", {**OTHER_AUTH, "X-LLE-Serve": "1"})  # bob sees his own rule only
        assert bobs in notes_sent(stub) and rule not in notes_sent(stub)

        client.post("/v1/lle/episodes/e1/feedback", json={"kind": "test_result", "passed": True}, headers=AUTH)
        done = client.post("/v1/lle/episodes/e1/end", json={}, headers=AUTH).json()
    with Store(db_path) as db:
        steps = db.steps_of(done["experience_id"])
        assert [s.context_refs for s in steps] == [[rule], [], []]  # what was added, recorded per step
        call = next(f for f in steps[0].feedback if f.kind == "llm_call")
        assert isinstance(call.content, dict) and call.content["served"] == [rule]


def test_a_passed_episode_is_remembered_and_served_to_the_next(gateway: Any, stub: StubUpstream) -> None:
    task = "make the flaky checkout tests of the shop service pass"
    with gateway() as client:
        chat(client, "first", AUTH, task)
        client.post("/v1/lle/episodes/first/feedback", json={"kind": "test_result", "passed": True}, headers=AUTH)
        ended = client.post("/v1/lle/episodes/first/end", json={}, headers=AUTH).json()
        assert ended["outcome"] == "pass" and ended["memory_items"]
        memory = ended["memory_items"][0]

        response = chat(client, "second", SERVE, task)
        assert memory in response.headers["X-LLE-Served"] and f"[id={memory} carrier=memory" in notes_sent(stub)
        chat(client, "other", {**OTHER_AUTH, "X-LLE-Serve": "1"}, task)
        assert memory not in notes_sent(stub)  # bob never reads alice's memories


def test_a_client_configured_to_be_served_can_opt_out_per_request(gateway: Any, stub: StubUpstream,
                                                                   tmp_path: Path) -> None:
    carol = {"Authorization": "Bearer carol-token"}
    with gateway(clients={"carol-token": ClientConfig(name="carol", serve=True)}) as client:
        chat(client, "warm", {**carol, "X-LLE-Serve": "0"})
        rule = add_rule(tmp_path / "ws" / "lle.db", "gw-carol", "Prefer small diffs.")
        chat(client, "c1", carol)
        assert rule in notes_sent(stub)
        chat(client, "c1", {**carol, "X-LLE-Serve": "0"})
        assert notes_sent(stub) == ""
