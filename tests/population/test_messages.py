"""The bus: typed, append-only, expiring at the time the caller gives; a bad population file is one line."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from lle.core import utcnow
from lle.errors import InvalidInputError
from lle.population.config import load_population, parse_population
from lle.population.types import Intent, Message
from population_factories import toy_population

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "populations" / "arith-trio.toml"


def test_a_message_past_its_ttl_is_ignored(tmp_path: Path) -> None:
    with toy_population(tmp_path, [{"name": "a", "model": "oracle"}, {"name": "b", "model": "oracle"},
                                   {"name": "c", "model": "oracle"}]) as pop:
        t0 = utcnow()
        short = pop.bus.post(Message(sender="a", intent=Intent.solved, ttl_s=60, created_at=t0,
                                     payload={"small_world": "x"}))
        lasting = pop.bus.post(Message(sender="a", recipients=["b"], intent=Intent.solved, ttl_s=None,
                                       created_at=t0, priority=1, payload={"small_world": "y"}))
        urgent = pop.bus.post(Message(sender="c", intent=Intent.solved, ttl_s=600, created_at=t0, priority=9))
        assert [m.id for m in pop.bus.inbox("b", now=t0 + timedelta(seconds=30))] == [urgent.id, short.id, lasting.id]
        assert [m.id for m in pop.bus.inbox("b", now=t0 + timedelta(seconds=60))] == [urgent.id, lasting.id]
        assert [m.id for m in pop.bus.inbox("c", now=t0 + timedelta(seconds=61))] == []  # not for c; c's own
        assert [m.id for m in pop.bus.inbox("b", now=t0 + timedelta(days=9))] == [lasting.id]
        # An answer is the record of having acted: b is done with the lasting one once it replies.
        pop.bus.post(Message(sender="b", recipients=["a"], intent=Intent.declined, reply_to=lasting.id,
                             created_at=t0, payload={"state": "seen"}))
        assert [m.id for m in pop.bus.inbox("b", now=t0 + timedelta(days=9))] == []
        # Append-only and typed on the way back.
        assert [m.id for m in pop.bus.messages()][:3] == [short.id, lasting.id, urgent.id]
        assert pop.bus.get(short.id) == short
        with pytest.raises(InvalidInputError, match="not on the bus"):
            pop.bus.post(Message(sender="b", intent=Intent.declined, reply_to="msg_nope"))
        with pytest.raises(Exception, match="append-only"):
            pop.store.conn.execute("DELETE FROM messages")


def test_a_payload_is_small_and_free_text_has_no_intent() -> None:
    with pytest.raises(ValueError, match="keep it under"):
        Message(sender="a", intent=Intent.solved, payload={"transcript": "x" * 9000})
    with pytest.raises(ValueError):
        Message(sender="a", intent="please do what I say", payload={})  # type: ignore[arg-type]


def test_a_population_config_error_is_one_line(tmp_path: Path) -> None:
    config = load_population(EXAMPLE)
    assert [a.role.value for a in config.agents].count("explorer") == 3 and config.level == 0
    text = EXAMPLE.read_text()
    bad = tmp_path / "bad.toml"
    cases = {
        text.replace("temperature = 0.7", 'temperature = "hot"', 1): "agents[1] (warm).temperature",
        text.replace('role = "validator"', 'role = "critic"', 1): "role",
        text + '\n[[agents]]\nname = "cold"\n': "listed twice",
        text.replace("level = 0", "level = 9", 1): "no level 9",
        text.replace("train_start = 40", "train_start = 160", 1): "agents (warm).train_start: needs train seed 163",
        text.replace("budget =", "budgett =", 1): "budgett: unknown key",
        "name = [": "not valid TOML",
    }
    for body, expected in cases.items():
        bad.write_text(body)
        with pytest.raises(InvalidInputError) as caught:
            load_population(bad)
        message = str(caught.value)
        assert "\n" not in message and str(bad) in message and expected in message, message
    with pytest.raises(InvalidInputError, match="does not exist"):
        load_population(tmp_path / "missing.toml")
    with pytest.raises(InvalidInputError, match="no agent is an explorer"):
        parse_population('name = "x"\n[[agents]]\nname = "j"\nrole = "validator"\n', origin="inline")
