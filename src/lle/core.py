"""The shared types of lle, on one page (DESIGN §3).

Persisted types are pydantic models: frozen, strict about unknown fields, each with a `version`
and a one-line docstring per field (these become the JSON Schema descriptions). Protocols name
the one main verb of each moving part. Everything else in lle imports its vocabulary from here.
"""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, Literal, NamedTuple, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, JsonValue
from ulid import ULID

SCHEMA_VERSION = 1
"""Version of every persisted type below; bump per type when its shape changes."""

ID_PREFIXES = {"exp", "evd", "upd", "rev", "itm", "stp", "run", "snap", "msg"}


def new_id(prefix: str) -> str:
    """A prefixed ULID such as `exp_01J…`: sortable by creation time, unique without coordination."""
    if prefix not in ID_PREFIXES:
        raise ValueError(f"unknown id prefix {prefix!r}; use one of {sorted(ID_PREFIXES)}")
    return f"{prefix}_{ULID()}"


def utcnow() -> datetime:
    return datetime.now(UTC)


def canonical_json(value: Any) -> str:
    """One spelling per value, so equal content always hashes equal."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


class Record(BaseModel):
    """Base of every persisted type."""

    model_config = ConfigDict(
        frozen=True, extra="forbid", use_attribute_docstrings=True, allow_inf_nan=False
    )
    version: int = SCHEMA_VERSION
    """Schema version of this record."""


# --- enums -------------------------------------------------------------------------------------


class Split(StrEnum):
    train = "train"
    dev = "dev"
    test = "test"


class ScopeLevel(StrEnum):
    episode = "episode"
    task = "task"
    project = "project"
    family = "family"
    global_ = "global"


class Outcome(StrEnum):
    # `unknown` is a real value: a check that could not run is never rounded up to `pass`.
    passed = "pass"
    failed = "fail"
    unknown = "unknown"


class Strength(StrEnum):
    hard = "hard"
    soft = "soft"
    weak = "weak"


class ActionStatus(StrEnum):
    ok = "ok"
    denied = "denied"
    normalized = "normalized"
    error = "error"
    not_reported = "not_reported"
    """Left to the agent's own runtime, which sent no result back (the gateway): not denied, not known to have run."""


class VerificationLevel(StrEnum):
    """Ordered: compare with `.rank`, never with string order."""

    none = "none"
    self_report = "self_report"
    model_judge = "model_judge"
    hard_anchor = "hard_anchor"
    independent_anchors = "independent_anchors"
    reproduced = "reproduced"

    @property
    def rank(self) -> int:
        return list(VerificationLevel).index(self)


class CarrierKind(StrEnum):
    """Update carriers, from most to least revocable."""

    context = "context"
    memory = "memory"
    rules = "rules"
    skills = "skills"
    verifier_cases = "verifier_cases"
    dataset = "dataset"
    weights = "weights"


class UpdateOp(StrEnum):
    propose = "propose"
    admit = "admit"
    reject = "reject"
    activate = "activate"
    supersede = "supersede"
    retire = "retire"
    revoke = "revoke"


# --- the small world -----------------------------------------------------------------------------


class Scope(Record):
    level: ScopeLevel
    """How far the item reaches: one episode, one task, a project, a task family, or everywhere."""
    family: str | None = None
    """Task family id (e.g. `sql`) when the scope is family or narrower."""
    project: str | None = None
    """Project name when the scope is project or narrower."""
    task_id: str | None = None
    """Small-world id when the scope is task or episode."""


class Permissions(Record):
    readable: list[str] = Field(default_factory=list)
    """Paths (relative to the workdir) the agent may read; empty means all non-protected."""
    writable: list[str] = Field(default_factory=list)
    """Paths the agent may write."""
    protected: list[str] = Field(default_factory=list)
    """Paths that must never change (tests, fixtures); writes to them are denied."""
    network: bool = False
    """Whether tools may reach the network."""
    max_output_bytes: int = Field(default=65536, ge=0)
    """Tool output beyond this is truncated before the model sees it."""


class Limits(Record):
    max_steps: int = Field(default=20, ge=1)
    """Episode stops with `StepLimit` after this many steps."""
    max_seconds: float = Field(default=300.0, gt=0)
    """Episode stops with `TimeLimit` after this much wall-clock time."""


class SmallWorld(Record):
    id: str
    """Stable id of this task instance, e.g. `sql/shop-v1:train:17`."""
    world: str
    """Registry id of the world it was cut from, e.g. `sql/shop-v1`."""
    family: str
    """Task family, e.g. `sql`."""
    project: str
    """Project inside the family; project rules are scoped to it."""
    split: Split
    """train, dev or test; dev and test never feed carriers."""
    seed: int
    """Seed that makes the instance reproducible."""
    goal: str
    """What the agent is asked to do."""
    tools: list[str] = Field(default_factory=list)
    """Names of the tools the agent may call."""
    permissions: Permissions = Field(default_factory=Permissions)
    """What the runtime lets the agent touch."""
    verifiers: list[str] = Field(default_factory=list)
    """Registry ids of the verifiers (anchors) that judge this task."""
    inherits: list[Scope] = Field(default_factory=lambda: [Scope(level=ScopeLevel.global_)])
    """Scopes the agent may read carrier items from; each covers the scopes inside it (a family its projects
    and their tasks). Default: global, i.e. everything its task can see; `[]` reads nothing."""
    writeback: list[CarrierKind] = Field(default_factory=lambda: list(CarrierKind))
    """Carriers this task's experience may be routed to (each behind its gate). Default: every carrier;
    `[]` writes back nothing."""
    limits: Limits = Field(default_factory=Limits)
    """Step and time limits."""
    level: int | None = Field(default=None, ge=0, exclude_if=lambda v: v is None)
    """Difficulty level it was cut at (an index into its family's `levels`); None (left out of dumps, so
    unlevelled records and their hashes stay as they were): the family's unlevelled task."""


def _empty_object_schema() -> dict[str, JsonValue]:
    return {"type": "object", "properties": {}}


class ToolSpec(Record):
    name: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    """Tool name the model writes in `tool`."""
    description: str
    """One line the model reads."""
    parameters: dict[str, JsonValue] = Field(default_factory=_empty_object_schema)
    """JSON Schema of the `args` object."""
    permissions: list[Literal["read", "write", "exec", "network"]] = Field(default_factory=list)
    """What the tool needs; grounding checks it against the small world's `Permissions`."""


# --- one step: requested, executed, effect ----------------------------------------------------------


class ActionRequest(Record):
    tool: str
    """Tool the model asked for."""
    args: dict[str, JsonValue] = Field(default_factory=dict)
    """Arguments as the model wrote them."""
    thought: str = ""
    """The model's stated reason."""
    expect: str = ""
    """The model's predicted effect (its internal world model M), compared later with the real one."""


class ExecutedAction(Record):
    tool: str
    """Tool the runtime really ran (may differ from the request when normalized)."""
    args: dict[str, JsonValue] = Field(default_factory=dict)
    """Arguments really used."""
    allowed: bool
    """False when the runtime denied the request."""
    denied_reason: str | None = None
    """Why the request was denied, in words."""
    duration_ms: float = Field(default=0.0, ge=0)
    """Time the runtime spent executing."""
    status: ActionStatus = ActionStatus.ok
    """ok, denied, normalized, error, or not_reported (no result came back: whether it ran is unknown)."""


class Change(Record):
    kind: Literal["file", "row", "state"]
    """What kind of thing changed in the world."""
    target: str
    """Path, table/row key, or state key."""
    before: JsonValue = None
    """Value or sha256 before the step (None when it did not exist)."""
    after: JsonValue = None
    """Value or sha256 after the step (None when it was removed)."""


class Effect(Record):
    observation: str = ""
    """What the world returned, as the model sees it."""
    changes: list[Change] = Field(default_factory=list)
    """Real diffs in the world."""
    error: str | None = None
    """Error raised by the tool or world, if any."""


class LLMCall(Record):
    model: str
    """Model id."""
    model_sha256: str | None = None
    """sha256 of the weights file, when local."""
    prompt_tokens: int = Field(default=0, ge=0)
    """Tokens in the prompt."""
    completion_tokens: int = Field(default=0, ge=0)
    """Tokens generated."""
    latency_ms: float = Field(default=0.0, ge=0)
    """Wall-clock time of the call."""
    token_ids: list[int] | None = None
    """Generated token ids, when recorded (for training)."""
    logprobs: list[float] | None = None
    """Log-probabilities of the accepted decode's tokens, when asked for (`completion_tokens` counts retries too)."""
    prompt: str | None = Field(default=None, exclude_if=lambda v: v is None)
    """The exact text the model was given for the accepted decode: the chat template's rendering when the
    policy renders it, else the chat messages as canonical JSON (a server renders those itself). None (left
    out of dumps, so records made before it and their hashes stay as they were): not recorded."""
    completion: str | None = Field(default=None, exclude_if=lambda v: v is None)
    """The exact text the model generated for the accepted decode (what a training row's target is). None
    (left out of dumps): not recorded."""


class Feedback(Record):
    source: str
    """Who gave it: a tool, a test runner, a human, a judge."""
    kind: str
    """e.g. `test_result`, `compiler`, `score`, `remark`."""
    content: JsonValue = None
    """The raw signal."""


class Step(Record):
    index: int = Field(ge=0)
    """Position in the episode, from 0."""
    context_refs: list[str] = Field(default_factory=list)
    """Ids of carrier items shown to the model at this step."""
    llm: LLMCall | None = None
    """The model call that produced the request (None for scripted policies)."""
    request: ActionRequest
    """What the model asked for."""
    executed: ExecutedAction
    """What the runtime really did."""
    effect: Effect
    """What changed."""
    feedback: list[Feedback] = Field(default_factory=list)
    """Raw signals observed at this step."""


# --- evidence and experience ---------------------------------------------------------------------


class Evidence(Record):
    id: str = Field(default_factory=lambda: new_id("evd"))
    """`evd_…`"""
    experience_id: str
    """Experience it is about."""
    step: int | None = None
    """Step index it is about, or None for the whole episode."""
    anchor: str
    """Kind of independent check: test, compiler, state, symbolic, rule, human, model_judge, …"""
    outcome: Outcome
    """pass, fail or unknown (could not run)."""
    strength: Strength
    """hard (independent anchor), soft (judge), weak (self-report)."""
    confidence: float = Field(default=1.0, ge=0.0, le=1.0)
    """How sure the anchor is."""
    scope: Scope
    """How far this evidence generalizes."""
    risk_tags: list[str] = Field(default_factory=list)
    """e.g. `reward_hacking_suspected`, `untrusted_instruction`."""
    detail: JsonValue = None
    """Anchor-specific detail (per-test results, diff, score)."""


class PolicyInfo(Record):
    model: str
    """Model id or `scripted`."""
    sha256: str | None = None
    """sha256 of the weights."""
    params: dict[str, JsonValue] = Field(default_factory=dict)
    """Sampling parameters (temperature, seed, …)."""


class Experience(Record):
    """One episode made into a typed, hashed, provenance-carrying record."""

    id: str = Field(default_factory=lambda: new_id("exp"))
    """`exp_…`"""
    small_world: SmallWorld
    """The task it came from."""
    policy: PolicyInfo
    """The policy that acted."""
    runtime_version: str = ""
    """Version of the runtime that grounded the actions."""
    world_version: str = ""
    """Version of the world implementation."""
    steps: list[Step] = Field(default_factory=list)
    """The trajectory."""
    evidence: list[Evidence] = Field(default_factory=list)
    """Anchored evidence about the outcome."""
    outcome: Outcome = Outcome.unknown
    """Verdict from the evidence; unknown until verified."""
    score: float | None = None
    """Optional scalar projection of the evidence (a reward is made late, never instead of it)."""
    verification: VerificationLevel = VerificationLevel.none
    """Strongest verification reached."""
    credit: list[float] = Field(default_factory=list)
    """Credit per step."""
    attribution: dict[str, JsonValue] | None = None
    """Where a failure went wrong, when known."""
    risk_tags: list[str] = Field(default_factory=list)
    """Risks found in the episode."""
    hygiene: dict[str, JsonValue] = Field(default_factory=dict)
    """What hygiene did (redactions, flags)."""
    content_hash: str = ""
    """sha256 of the content (all but ids, hash and time); set by `sealed()`."""
    created_at: datetime = Field(default_factory=utcnow)
    """When it was recorded (UTC)."""

    def compute_hash(self) -> str:
        # Identity is left out so that the same episode recorded twice hashes the same (dedupe).
        body = self.model_dump(mode="json", exclude={
            "id": True, "content_hash": True, "created_at": True,
            "evidence": {"__all__": {"id", "experience_id"}},
        })
        return "sha256:" + hashlib.sha256(canonical_json(body).encode()).hexdigest()

    def sealed(self) -> Experience:
        """This experience with its content hash filled in."""
        return self.model_copy(update={"content_hash": self.compute_hash()})


# --- routing ----------------------------------------------------------------------------------------


class GateResult(Record):
    name: str
    """Gate that decided."""
    passed: bool
    """Its decision."""
    reasons: list[str] = Field(default_factory=list)
    """Why, in words."""


class Update(Record):
    id: str = Field(default_factory=lambda: new_id("upd"))
    """`upd_…`"""
    carrier: CarrierKind
    """Carrier affected."""
    op: UpdateOp
    """What happened to the item."""
    item_id: str | None = None
    """Carrier item affected."""
    scope: Scope
    """Scope of the item."""
    experience_ids: list[str] = Field(default_factory=list)
    """Experiences it derives from."""
    evidence_ids: list[str] = Field(default_factory=list)
    """Evidence it rests on."""
    gate: GateResult | None = None
    """The gate decision, when a gate decided."""
    actor: str = "lle"
    """Who made it: the router, a person, a monitor."""
    at: datetime = Field(default_factory=utcnow)
    """When."""


class CarrierItem(Record):
    id: str = Field(default_factory=lambda: new_id("itm"))
    """`itm_…`"""
    carrier: CarrierKind
    """Carrier it lives in."""
    scope: Scope
    """Where it applies."""
    content: JsonValue
    """The memory, rule, skill, case or example itself."""
    experience_ids: list[str] = Field(default_factory=list)
    """Experiences it was derived from (lineage)."""
    evidence_ids: list[str] = Field(default_factory=list)
    """Evidence that admitted it."""
    derived_from: list[str] = Field(default_factory=list)
    """Other carrier items it was built from (a skill from memories, a rule from lessons)."""
    created_at: datetime = Field(default_factory=utcnow)
    """When."""


class Revocation(Record):
    id: str = Field(default_factory=lambda: new_id("rev"))
    """`rev_…`"""
    target: str
    """Id (or source selector) revoked."""
    reason: str = Field(min_length=1)
    """Why."""
    author: str
    """Who."""
    at: datetime = Field(default_factory=utcnow)
    """When."""
    cascade: list[str] = Field(default_factory=list)
    """Ids revoked along with the target because they derive from it."""


# --- what the policy sees ----------------------------------------------------------------------------


class Message(Record):
    role: Literal["system", "user", "assistant", "tool"]
    """Chat role."""
    content: str
    """Text."""


class Context(Record):
    messages: list[Message]
    """What the model sees, in order."""
    action_schema: dict[str, JsonValue]
    """JSON schema every action must satisfy (one branch per tool)."""
    refs: list[str] = Field(default_factory=list)
    """Carrier item ids shown."""


# --- protocols ---------------------------------------------------------------------------------------


class WorldStep(NamedTuple):
    """Gymnasium's step tuple."""

    observation: str
    reward: float
    terminated: bool
    truncated: bool
    info: dict[str, Any]


@runtime_checkable
class World(Protocol):
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]: ...

    def step(self, action: ActionRequest) -> WorldStep: ...


@runtime_checkable
class Policy(Protocol):
    def act(self, context: Context) -> tuple[ActionRequest, LLMCall | None]: ...


@runtime_checkable
class ContextBuilder(Protocol):
    def build(
        self, small_world: SmallWorld, tools: list[ToolSpec], history: list[Step], observation: str
    ) -> Context: ...


@runtime_checkable
class Verifier(Protocol):
    def verify(self, small_world: SmallWorld, trajectory: list[Step]) -> list[Evidence]: ...


@runtime_checkable
class Carrier(Protocol):
    kind: CarrierKind

    def admit(self, item: CarrierItem, update: Update) -> None: ...

    def retrieve(self, query: str, scope: Scope, k: int = 5) -> list[CarrierItem]: ...

    def revoke(self, item_id: str, revocation: Revocation) -> None: ...


@runtime_checkable
class Router(Protocol):
    def route(self, experience: Experience) -> list[Update]: ...


PERSISTED_TYPES: dict[str, type[Record]] = {
    cls.__name__: cls
    for cls in (
        Scope, Permissions, Limits, SmallWorld, ToolSpec, ActionRequest, ExecutedAction, Change, Effect,
        LLMCall, Feedback, Step, Evidence, PolicyInfo, Experience, GateResult, Update, CarrierItem,
        Revocation, Message, Context,
    )
}
"""Every persisted type of this module by name; `lle.config.PERSISTED_TYPES` adds the run config (`lle schema`)."""
