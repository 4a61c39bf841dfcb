"""Capture: proxied chat calls become steps; the agent's tool results become those steps' effects.

One call is one step. What the model asked for (its tool calls) is the step's `request`; what the
agent then reported back (the `tool` messages of its next call) is the step's `executed` and
`effect`, so a tool call the agent never answered is `not_reported` with an empty effect: neither
denied (nothing refused it) nor a made-up success. The exact messages, the response and what the
gateway served are kept on the step as a `Feedback(kind="llm_call")`; bodies are redacted (PII,
secrets) before anything is journaled.

Feedback posted by the caller (test results, a score, a person's remark) becomes hard, soft or weak
evidence through `GatewayAnchor`, which stands in for the world's own check: the gateway's world is
the caller's, and only the caller can say whether its tests passed.
"""

from __future__ import annotations

import functools
import json
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from lle.actions import NO_ACTION
from lle.core import (
    ActionRequest,
    ActionStatus,
    CarrierKind,
    Effect,
    Evidence,
    ExecutedAction,
    Feedback,
    LLMCall,
    Outcome,
    Scope,
    ScopeLevel,
    SmallWorld,
    Split,
    Step,
    Strength,
)
from lle.evidence import verifiers
from lle.governance.pii import find_instructions, redact

EPISODE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$")
WORLD = "gateway/openai-v1"
HARD_ANCHORS = frozenset({"test", "hidden_test", "execution", "state", "symbolic", "human", "compiler"})
SOFT_ANCHORS = frozenset({"model_judge"})
WRITEBACK_ALLOWED = (CarrierKind.memory, CarrierKind.rules, CarrierKind.skills)
"""The dataset and verifier-case carriers replay their world, which the gateway does not have."""


@functools.lru_cache(maxsize=8192)
def _redacted(text: str) -> tuple[str, tuple[tuple[str, int], ...]]:
    clean, found = redact(text)
    return clean, tuple(found.items())


# Fields the upstream or the protocol fills in (ids, names of things, enums): never personal data, and a fresh
# id on every call would otherwise cost a full redaction pass each time (0.1-0.4 ms a string).
PROTOCOL_KEYS = frozenset({"id", "tool_call_id", "object", "model", "role", "type", "finish_reason",
                           "system_fingerprint"})


def redact_json(value: Any, counts: Counter[str]) -> Any:
    """Every string inside `value` redacted (PII and secrets); counts of what was found go to `counts`.

    An agent resends its whole conversation on every call, so the same strings come back again and again:
    each distinct string is redacted once (cached), and strings too short to hold an address, a number or a
    key are left as they are."""
    if isinstance(value, str):
        if len(value) < 6:
            return value
        clean, found = _redacted(value)
        if found:
            counts.update(dict(found))
        return clean
    if isinstance(value, list):
        return [redact_json(v, counts) for v in value]
    if isinstance(value, dict):
        return {k: v if k in PROTOCOL_KEYS and isinstance(v, str) else redact_json(v, counts)
                for k, v in value.items()}
    return value


def message_text(message: Any) -> str:
    """The text of a chat message, whether its content is a string or a list of parts."""
    if not isinstance(message, dict):
        return ""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def tool_calls_of(response: dict[str, Any]) -> list[dict[str, str]]:
    """[{id, name, arguments}] the first choice asked for (legacy `function_call` too)."""
    choices = response.get("choices") or [{}]
    message = choices[0].get("message") or {} if isinstance(choices[0], dict) else {}
    out = []
    for i, call in enumerate(message.get("tool_calls") or []):
        fn = call.get("function") or {}
        out.append({"id": str(call.get("id") or f"call_{i}"), "name": str(fn.get("name") or ""),
                    "arguments": str(fn.get("arguments") or "")})
    if not out and isinstance(message.get("function_call"), dict):
        fn = message["function_call"]
        out.append({"id": "function_call", "name": str(fn.get("name") or ""), "arguments": str(fn.get("arguments"))})
    return out


def parse_args(arguments: str) -> dict[str, JsonValue]:
    """The call's arguments as an object; text that is not a JSON object is kept whole under `_raw`
    (a small model cut off by `max_tokens` writes half an object, and that is what it asked for)."""
    try:
        value = json.loads(arguments) if arguments.strip() else {}
    except ValueError:
        return {"_raw": arguments}
    return value if isinstance(value, dict) else {"_raw": arguments}


@dataclass
class CallRecord:
    """One proxied call, as journaled (already redacted)."""

    index: int
    messages: list[Any]
    params: dict[str, Any]
    response: dict[str, Any]
    model: str
    latency_ms: float
    served: list[str] = field(default_factory=list)
    results: dict[str, str] = field(default_factory=dict)
    """tool_call_id -> the content of the `tool` message the agent sent back."""

    @property
    def tool_calls(self) -> list[dict[str, str]]:
        return tool_calls_of(self.response)

    def step(self, feedback: list[Feedback]) -> Step:
        calls = self.tool_calls
        choice = (self.response.get("choices") or [{}])[0]
        message = choice.get("message") or {}
        text = message_text(message)
        usage = self.response.get("usage") or {}
        logprobs = _logprobs(choice)
        llm = LLMCall(model=self.model, prompt_tokens=int(usage.get("prompt_tokens") or 0),
                      completion_tokens=int(usage.get("completion_tokens") or 0), latency_ms=self.latency_ms,
                      logprobs=logprobs, token_ids=_token_ids(choice))
        first = calls[0] if calls else None
        request = ActionRequest(tool=first["name"] or NO_ACTION if first else NO_ACTION,
                                args=parse_args(first["arguments"]) if first else {}, thought=text)
        answered = [c for c in calls if c["id"] in self.results]
        if not calls:
            executed = ExecutedAction(tool=NO_ACTION, allowed=True)
            effect = Effect()
        elif answered:
            executed = ExecutedAction(tool=request.tool, args=request.args, allowed=True)
            many = len(calls) > 1
            effect = Effect(observation="\n".join(
                (f"[{c['name']}] " if many else "") + self.results[c["id"]] for c in answered))
        else:
            # Not denied (nothing refused it) and not a made-up success: no result was reported by the client.
            executed = ExecutedAction(tool=request.tool, args=request.args, status=ActionStatus.not_reported,
                                      allowed=True)
            effect = Effect()
        notes = [Feedback(source="gateway", kind="llm_call", content={
            "messages": self.messages, "params": self.params, "response": self.response,
            "tool_calls": calls, "served": self.served})]
        flagged = [s for c in answered for s in find_instructions(self.results[c["id"]])]
        if flagged:  # instructions inside tool output: data to quote, never to follow (hygiene quotes it)
            notes.append(Feedback(source="gateway", kind="untrusted_instruction", content=list(flagged)))
        return Step(index=self.index, context_refs=list(self.served), llm=llm, request=request, executed=executed,
                    effect=effect, feedback=notes + feedback)


def _logprobs(choice: dict[str, Any]) -> list[float] | None:
    content = (choice.get("logprobs") or {}).get("content") if isinstance(choice.get("logprobs"), dict) else None
    if not isinstance(content, list):
        return None
    return [float(t["logprob"]) for t in content if isinstance(t, dict) and isinstance(t.get("logprob"), int | float)]


def _token_ids(choice: dict[str, Any]) -> list[int] | None:
    # vLLM and Agent Lightning style servers return them beside the message when asked.
    ids = choice.get("token_ids")
    return [int(i) for i in ids] if isinstance(ids, list) and all(isinstance(i, int) for i in ids) else None


def link_results(calls: list[CallRecord], messages: list[Any]) -> dict[int, dict[str, str]]:
    """Tool results in `messages` that answer earlier steps' tool calls not yet answered: {step: {id: text}}.

    Matched by `tool_call_id`; a `tool` message without one answers the latest step's calls in order
    (some clients leave the id out)."""
    pending = {c["id"]: call.index for call in calls for c in call.tool_calls if c["id"] not in call.results}
    found: dict[int, dict[str, str]] = {}
    unnamed = [m for m in messages if isinstance(m, dict) and m.get("role") == "tool" and not m.get("tool_call_id")]
    for m in messages:
        if isinstance(m, dict) and m.get("role") == "tool" and m.get("tool_call_id") in pending:
            call_id = str(m["tool_call_id"])
            found.setdefault(pending.pop(call_id), {})[call_id] = message_text(m)
    if unnamed and calls:
        last = calls[-1]
        open_ids = [c["id"] for c in last.tool_calls if c["id"] in pending]
        for call_id, m in zip(open_ids, unnamed, strict=False):
            found.setdefault(last.index, {})[call_id] = message_text(m)
    return found


# --- feedback and the small world --------------------------------------------------------------------


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TestCase(_Body):
    name: str = Field(min_length=1, max_length=500)
    passed: bool
    detail: str = Field(default="", max_length=4000)


class FeedbackBody(_Body):
    """`POST /v1/lle/episodes/{id}/feedback`."""

    kind: Literal["test_result", "score", "remark"]
    """test_result (tests ran), score (a number), remark (a person's or a judge's word)."""
    anchor: str | None = Field(default=None, pattern=r"^[a-z_]{1,40}$")
    """Kind of check: test (default for test_result), human (default for remark), model_judge, self_report, …"""
    passed: bool | None = None
    """The verdict; for test_result it defaults to every test in `tests` passing."""
    tests: list[TestCase] = Field(default_factory=list, max_length=10_000)
    score: float | None = Field(default=None, allow_inf_nan=False)
    remark: str = Field(default="", max_length=20_000)
    source: str = Field(default="client", min_length=1, max_length=200)
    step: int | None = Field(default=None, ge=0)
    """Step it is about (default: the last one)."""

    def anchor_kind(self) -> str:
        return self.anchor or {"test_result": "test", "remark": "human", "score": "model_judge"}[self.kind]

    def verdict(self) -> bool | None:
        if self.passed is not None:
            return self.passed
        if self.kind == "test_result" and self.tests:
            return all(t.passed for t in self.tests)
        return None


class EndBody(_Body):
    """`POST /v1/lle/episodes/{id}/end`: the small world, where the configured mapping leaves it open."""

    goal: str | None = Field(default=None, max_length=20_000)
    """What the agent was asked to do (default: the first user message)."""
    family: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_.-]{1,80}$")
    project: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_.-]{1,80}$")
    split: Literal["train", "dev", "test"] = "train"
    writeback: list[CarrierKind] | None = None
    feedback: list[FeedbackBody] = Field(default_factory=list, max_length=100)
    """Feedback to record before ending (same as posting it first)."""


def feedback_record(body: FeedbackBody) -> Feedback:
    return Feedback(source=body.source, kind=body.kind, content=body.model_dump(mode="json", exclude_none=True))


class GatewayAnchor:
    """The caller's checks as evidence: each feedback with a verdict is one anchor. Stands in for the
    world's own check (`verifier/world-anchor-v1`, replaced through `assess(extra=…)`), since the
    gateway's world is the caller's; without a verdict the outcome stays `unknown`, never a guess."""

    verifier_id = "verifier/world-anchor-v1"
    cost = "cheap"

    def __init__(self, feedback: list[tuple[int, FeedbackBody]]) -> None:
        self.feedback = feedback

    def verify(self, small_world: SmallWorld, trajectory: list[Step]) -> list[Evidence]:
        out = []
        for step, body in self.feedback:
            verdict = body.verdict()
            if verdict is None:
                continue
            anchor = body.anchor_kind()
            strength = Strength.hard if anchor in HARD_ANCHORS else \
                Strength.soft if anchor in SOFT_ANCHORS else Strength.weak
            detail: dict[str, JsonValue] = {"source": body.source, "kind": body.kind, "from": "gateway feedback"}
            if body.tests:
                detail["tests"] = [t.model_dump(mode="json") for t in body.tests]
            if body.score is not None:
                detail["score"] = body.score
            if body.remark:
                detail["lesson"] = body.remark  # the memory keeps a verifier's own diagnosis
            out.append(verifiers.evidence(self, small_world, anchor=anchor, step=step, strength=strength,
                                          outcome=Outcome.passed if verdict else Outcome.failed, detail=detail))
        if not out:
            out.append(verifiers.evidence(self, small_world, anchor="test", outcome=Outcome.unknown,
                                          strength=Strength.hard,
                                          detail={"reason": "no feedback with a verdict was posted for this episode"}))
        return out


def small_world(*, episode: str, client: str, family: str, project: str, goal: str, tools: list[str],
                split: str, writeback: list[CarrierKind]) -> SmallWorld:
    project_scope = Scope(level=ScopeLevel.project, family=family, project=project)
    return SmallWorld(id=f"{WORLD}:{client}:{episode}", world=WORLD, family=family, project=project,
                      split=Split(split), seed=0, goal=goal or "(no user message)", tools=sorted(set(tools)),
                      inherits=[project_scope], writeback=writeback)
