"""Core types: JSON round trips through the store are exact, hashes are stable, ids are prefixed ULIDs."""

from __future__ import annotations

import json
from datetime import UTC
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from lle.config import PERSISTED_TYPES
from lle.core import (
    ActionRequest,
    ActionStatus,
    Change,
    Effect,
    Evidence,
    ExecutedAction,
    Experience,
    Feedback,
    LLMCall,
    Outcome,
    PolicyInfo,
    Scope,
    ScopeLevel,
    SmallWorld,
    Split,
    Step,
    Strength,
    VerificationLevel,
    new_id,
)
from lle.store import Store

text = st.text(max_size=40)
# Long texts exercise the content-addressed blobs; dicts shaped like blob references exercise escaping.
# (built by repetition: a few random characters, cheap to generate, still over the blob threshold)
long_text = st.text(min_size=1, max_size=8).map(lambda s: s * (4097 // len(s) + 1))
finite = st.floats(allow_nan=False, allow_infinity=False)
json_scalar = st.none() | st.booleans() | st.integers(-(2**53), 2**53) | finite | text
json_value = st.recursive(
    json_scalar | long_text,
    lambda inner: st.lists(inner, max_size=3)
    | st.dictionaries(st.sampled_from(["a", "b", "$lle_blob", "$lle_escaped"]) | text, inner, max_size=3),
    max_leaves=8,
)
scope = st.builds(Scope, level=st.sampled_from(list(ScopeLevel)), family=st.none() | text, project=st.none() | text)

steps = st.lists(
    st.builds(
        Step,
        index=st.just(0),
        context_refs=st.lists(text, max_size=2),
        llm=st.none() | st.builds(LLMCall, model=text, prompt_tokens=st.integers(0, 10_000),
                                  logprobs=st.none() | st.lists(st.floats(-50, 0), max_size=3)),
        request=st.builds(ActionRequest, tool=text, args=st.dictionaries(text, json_value, max_size=3),
                          thought=text | long_text, expect=text),
        executed=st.builds(ExecutedAction, tool=text, allowed=st.booleans(), denied_reason=st.none() | text,
                           duration_ms=st.floats(0, 1e6), status=st.sampled_from(list(ActionStatus))),
        effect=st.builds(Effect, observation=text | long_text,
                         changes=st.lists(st.builds(Change, kind=st.sampled_from(["file", "row", "state"]),
                                                    target=text, before=json_value, after=json_value), max_size=2),
                         error=st.none() | text),
        feedback=st.lists(st.builds(Feedback, source=text, kind=text, content=json_value), max_size=2),
    ),
    max_size=4,
).map(lambda ss: [s.model_copy(update={"index": i}) for i, s in enumerate(ss)])


@st.composite
def experiences(draw: st.DrawFn) -> Experience:
    sw = SmallWorld(id=draw(text), world="toy/keys-v1", family="toy", project=draw(text),
                    split=draw(st.sampled_from(list(Split))), seed=draw(st.integers(0, 2**31)),
                    goal=draw(text | long_text))
    exp = Experience(
        small_world=sw,
        policy=PolicyInfo(model=draw(text), params=draw(st.dictionaries(text, json_value, max_size=2))),
        steps=draw(steps),
        outcome=draw(st.sampled_from(list(Outcome))),
        score=draw(st.none() | st.floats(-1e9, 1e9)),
        verification=draw(st.sampled_from(list(VerificationLevel))),
        risk_tags=draw(st.lists(text, max_size=2)),
        hygiene=draw(st.dictionaries(text, json_value, max_size=2)),
        created_at=draw(st.datetimes(timezones=st.just(UTC))),
    )
    evidence = draw(st.lists(st.builds(
        Evidence, experience_id=st.just(exp.id), anchor=text, outcome=st.sampled_from(list(Outcome)),
        strength=st.sampled_from(list(Strength)), confidence=st.floats(0, 1), scope=scope, detail=json_value,
    ), max_size=3))
    return exp.model_copy(update={"evidence": evidence}).sealed()


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(exp=experiences())
def test_any_experience_round_trips_through_the_store_with_a_stable_hash(exp: Experience, tmp_path: Path) -> None:
    with Store(tmp_path / "lle.db") as db:
        db.append_experience(exp)
    with Store(tmp_path / "lle.db") as db:  # a fresh connection reads what is on disk
        back = db.get_experience(exp.id)
    assert back == exp
    assert back.compute_hash() == exp.content_hash
    # The hash survives a trip through plain JSON too (export/import).
    assert Experience.model_validate_json(exp.model_dump_json()).compute_hash() == exp.content_hash


def test_content_hash_ignores_id_and_time_but_not_content(make_experience) -> None:  # type: ignore[no-untyped-def]
    a = make_experience()
    b = make_experience()
    assert a.id != b.id and a.content_hash == b.content_hash
    assert make_experience(observation="different").content_hash != a.content_hash


def test_ids_are_prefixed_ulids_in_creation_order() -> None:
    ids = [new_id("exp") for _ in range(50)]
    assert all(i.startswith("exp_") and len(i) == 30 for i in ids)
    assert ids == sorted(ids)
    with pytest.raises(ValueError, match="unknown id prefix"):
        new_id("nope")


def test_records_are_frozen_and_reject_unknown_fields_and_nan() -> None:
    req = ActionRequest(tool="look")
    with pytest.raises(ValidationError):
        req.tool = "go"  # type: ignore[misc]
    with pytest.raises(ValidationError, match="extra"):
        ActionRequest.model_validate({"tool": "look", "surprise": 1})
    with pytest.raises(ValidationError):
        ExecutedAction(tool="x", allowed=True, duration_ms=float("nan"))


def test_every_persisted_type_has_a_version_and_documented_fields() -> None:
    for name, cls in PERSISTED_TYPES.items():
        schema = cls.model_json_schema()
        props = schema["properties"]
        assert props["version"]["default"] == 1, name
        undocumented = [f for f, p in props.items() if "description" not in p and "$ref" not in p and "allOf" not in p]
        assert not undocumented, f"{name}: fields without a docstring: {undocumented}"
        json.dumps(schema)


def test_verification_levels_are_ordered() -> None:
    ranks = [level.rank for level in VerificationLevel]
    assert ranks == sorted(ranks)
    assert VerificationLevel.hard_anchor.rank > VerificationLevel.model_judge.rank
