"""The population's shared types on one page: its config, its roles, its typed messages.

Agents never read each other's free text. What passes between them is a `Message`: an intent from a
closed list, ids of the experiences, skills and evidence it is about, and a small JSON payload whose
shape the intent fixes. A message is appended to the bus once and never changed; it stops counting
when its ttl has passed (the caller says what time it is, so tests need no clock).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from enum import StrEnum
from typing import Literal

from pydantic import Field, JsonValue, field_validator, model_validator

from lle.config import Levers
from lle.core import Record, canonical_json, new_id, utcnow

PAYLOAD_CHARS = 8192
"""Most characters of a message's payload as canonical JSON: a descriptor fits, a transcript does not."""
NAME = r"^[a-z][a-z0-9_-]{0,31}$"


class Role(StrEnum):
    explorer = "explorer"
    """Runs train small worlds; what it solves counts for the population."""
    validator = "validator"
    """Judges candidates before they are shared; it can block or delay, never promote."""


class Intent(StrEnum):
    """What a message asks for or reports; each intent fixes what its payload holds."""

    judge = "judge"
    """Ask a validator to judge a candidate (payload: `kind` — skill, rule, lesson —, `scope`, and a skill's
    `descriptor` or a note's `text`)."""
    verdict = "verdict"
    """A validator's answer (payload: `decision` and the model_judge `evidence`); `reply_to` the judge message."""
    share = "share"
    """A skill offered to the others (payload: `descriptor`; skill_ids: the source item), or a rule or lesson
    (payload: `kind`, `scope`, `text`; item_ids: the source item)."""
    adopted = "adopted"
    """The sender took a shared item behind its own gate (skill_ids or item_ids: source, copy; payload: `state`:
    a skill's replay activated it, a rule copy waits as a candidate, a lesson copy is active); `reply_to` the
    share."""
    declined = "declined"
    """The sender's own gate did not take it (payload: `state`, `reasons`); `reply_to` the share."""
    revoked = "revoked"
    """A source item was revoked (payload: `reason`; skill_ids: the source, then each copy revoked with it)."""
    solved = "solved"
    """An explorer solved a train task (experience_ids: the episode; payload: `small_world`)."""


class Decision(StrEnum):
    """A validator's verdict on a candidate, in the order of how far it lets it go."""

    block = "block"
    """Not shared."""
    delay = "delay"
    """Not shared yet: the judge could not decide (its evidence is `unknown`); ask again later."""
    allow = "allow"
    """May be offered to the others, who still run their own replay gate before using it."""


class Message(Record):
    """One typed message on the population's bus."""

    id: str = Field(default_factory=lambda: new_id("msg"))
    """`msg_…`"""
    sender: str = Field(pattern=NAME)
    """Agent that wrote it."""
    recipients: list[str] = Field(default_factory=list)
    """Agents it is for; empty: every agent but the sender."""
    intent: Intent
    """What it asks for or reports."""
    priority: int = Field(default=5, ge=0, le=9)
    """0..9; an inbox lists higher first, then oldest first."""
    ttl_s: float | None = Field(default=3600.0, gt=0)
    """Seconds after `created_at` when it stops counting; None: it never expires."""
    created_at: datetime = Field(default_factory=utcnow)
    """When it was written (UTC)."""
    reply_to: str | None = None
    """The message it answers; an agent that answered a message is done with it."""
    experience_ids: list[str] = Field(default_factory=list)
    """Experiences it is about."""
    skill_ids: list[str] = Field(default_factory=list)
    """Skill items it is about (in the stores of the agents named by the intent)."""
    item_ids: list[str] = Field(default_factory=list)
    """Rule and memory items it is about (`lle.population.notes`), as `skill_ids` are for skills."""
    evidence_ids: list[str] = Field(default_factory=list)
    """Evidence it rests on."""
    payload: dict[str, JsonValue] = Field(default_factory=dict)
    """Small structured data; its keys depend on the intent, never free instructions."""

    @field_validator("payload")
    @classmethod
    def _small(cls, value: dict[str, JsonValue]) -> dict[str, JsonValue]:
        size = len(canonical_json(value))
        if size > PAYLOAD_CHARS:
            raise ValueError(f"payload is {size} characters of JSON; keep it under {PAYLOAD_CHARS} (refer to "
                             "stored records by id instead)")
        return value

    @property
    def expires_at(self) -> datetime | None:
        return None if self.ttl_s is None else self.created_at + timedelta(seconds=self.ttl_s)

    def expired(self, now: datetime) -> bool:
        """True once `now` is at or past `created_at + ttl`."""
        return self.expires_at is not None and now >= self.expires_at

    def for_agent(self, agent: str) -> bool:
        return agent != self.sender and (not self.recipients or agent in self.recipients)


class AgentConfig(Record):
    """One agent of a population."""

    name: str = Field(pattern=NAME)
    """Unique within the population; its store is `agents/NAME.db`."""
    role: Role = Role.explorer
    """explorer or validator."""
    model: str = "smollm2-135m"
    """A catalog model (`lle models list`), a .gguf path, `openai:NAME`, `scripted:PATH` (fixed actions), or
    `oracle` (the toy world's solver)."""
    slow_model: str | None = None
    """With it the agent is fast/slow: `model` acts each step, this one when it is stuck or about to submit."""
    temperature: float = Field(default=0.0, ge=0.0, le=2.0)
    """Sampling temperature; 0 is greedy."""
    seed: int = Field(default=0, ge=0)
    """Sampling seed (above temperature 0, mixed with each small world's id)."""
    levers: Levers = Field(default_factory=Levers)
    """Its context recipe: the harness levers (`[agents.levers]`)."""
    train_start: int = Field(default=0, ge=0)
    """First train seed of the small worlds its own skill replays use (explorers share the round's tasks)."""


Shareable = Literal["skills", "rules", "lessons"]


class PopulationConfig(Record):
    """A population: who is in it, what they share, which tasks a round runs."""

    name: str = Field(pattern=NAME)
    """Its name; its workspace is `.lle/populations/NAME/`."""
    world: str | list[str] = "math/arith-v1"
    """The registered world its rounds draw train small worlds from, or several drawn in turn (worlds of one family
    with different projects let a skill be mined: the skills gate asks for >= 2 projects)."""
    level: int | None = Field(default=None, ge=0)
    """Difficulty level of the draws (e.g. 0, the easiest); left out: the family's unlevelled task."""
    train: int = Field(default=6, ge=1)
    """Train small worlds per round."""
    rounds: int = Field(default=1, ge=1)
    """Rounds to run."""
    max_steps: int = Field(default=6, ge=1)
    """Steps per episode."""
    budget: int | None = Field(default=None, ge=1)
    """Model calls each explorer may make per round (equal budgets); None: as many as its episodes take."""
    replay: int = Field(default=4, ge=1)
    """Train small worlds of an importer's own replay gate for a shared skill (from its `train_start`)."""
    shared: list[Shareable] = Field(default_factory=lambda: list[Shareable](["skills"]))
    """What crosses agents (explicitly): `skills`, `rules` (active project rules), `lessons` (memories' lessons);
    [] shares nothing."""
    actor: str | None = None
    """The explorer `lle run --population` evaluates on held-out tasks (greedy, with the pooled carriers); None:
    the first explorer."""
    agents: list[AgentConfig] = Field(min_length=1)
    """The agents (`[[agents]]`)."""

    @model_validator(mode="after")
    def _names(self) -> PopulationConfig:
        names = [a.name for a in self.agents]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"agent {twice[0]!r} is listed twice; give each agent its own name")
        if not self.worlds:
            raise ValueError("world is an empty list; name at least one registered world")
        if not any(a.role is Role.explorer for a in self.agents):
            raise ValueError("no agent is an explorer; give at least one agent role = \"explorer\"")
        if self.actor is not None and self.actor not in {a.name for a in self.explorers}:
            raise ValueError(f"actor {self.actor!r} is not one of the explorers; name one of "
                             f"{', '.join(a.name for a in self.explorers)}")
        return self

    @property
    def worlds(self) -> list[str]:
        """The registered worlds of its draws, in turn."""
        return [self.world] if isinstance(self.world, str) else list(self.world)

    @property
    def acting(self) -> AgentConfig:
        """The explorer evaluated on held-out tasks: `actor`, else the first explorer."""
        return self.agent(self.actor) if self.actor else self.explorers[0]

    def agent(self, name: str) -> AgentConfig:
        for agent in self.agents:
            if agent.name == name:
                return agent
        raise KeyError(name)

    @property
    def explorers(self) -> list[AgentConfig]:
        return [a for a in self.agents if a.role is Role.explorer]

    @property
    def validators(self) -> list[AgentConfig]:
        return [a for a in self.agents if a.role is Role.validator]
