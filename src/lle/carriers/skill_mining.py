"""Skill descriptors and the miner: frequent tool-call patterns in verified successes, abstracted.

A trajectory is cut into segments of calls that really ran (a denied or failed call, or a call that
a skill expanded, ends a segment: a macro never spans a failure, and a skill never counts as
support for itself). Every contiguous run of 2..`max_len` calls is grouped by its *shape*: the tools,
their argument names, and the values of *categorical* arguments (few distinct values family-wide,
such as `open(target=door|chest)`), so `open door` and `open chest` are different patterns while
directions or file paths are not. Inside a pattern an argument whose value never varies stays a
constant; one that varies becomes a slot, and two arguments that always carry the same value share
one slot (`read_file(path)` then `edit_file(path)`). Preconditions are the observation words present
before the first call in every occurrence; postconditions the changes and observation words that
every occurrence produced. Composite skills are two atomic skills that follow each other directly.
Everything is sorted before it is counted, so the same experiences always mine the same skills.
"""

from __future__ import annotations

import functools
import hashlib
import re
import textwrap
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, ValidationInfo, field_validator, model_validator
from pydantic_core import PydanticCustomError

from lle.context import binding as skill_binding
from lle.context.binding import SlotBinding
from lle.core import ActionStatus, Context, Experience, canonical_json

FORMAT = "lle-skill/1"
MIN_BINDING_READS = 3
"""Distinct small worlds a binding that holds only where its anchors are found must read its value in."""
SKILL_FEEDBACK = "skill"
"""`Feedback.kind` the harness writes on every step a skill expanded (content: skill id, call, of; `of` is null
for a program, whose number of calls is known only once it ends)."""
FIRED_FEEDBACK = "skill_fired"
"""`Feedback.kind` on the first step of a program skill the runtime ran before the policy acted (the fast path)."""
MAX_PROGRAM_CHARS = 20_000
NAME_PATTERN = r"^[a-z][a-z0-9_]{0,47}$"
_STOPWORDS = frozenset({
    "the", "and", "you", "are", "with", "this", "that", "for", "from", "into", "your", "there", "here", "has",
    "have", "was", "were", "not", "but", "can", "its", "than", "then", "see", "what", "when", "which", "who"})


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class SkillCall(_Model):
    tool: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    """Tool the call runs."""
    args: dict[str, JsonValue] = Field(default_factory=dict)
    """Arguments that are the same in every occurrence (constants)."""
    slots: dict[str, str] = Field(default_factory=dict)
    """Argument name -> slot name, filled from the skill call's arguments."""


class SkillSlot(_Model):
    name: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    """Parameter name of the skill tool."""
    type: Literal["string", "integer", "number", "boolean"] | None = None
    """JSON type seen in every occurrence (None when it varied)."""
    examples: list[JsonValue] = Field(default_factory=list)
    """Up to five values seen, most frequent first."""
    bind: SlotBinding | None = None
    """Where the runtime reads this slot (the goal, an earlier observation); the model is not asked for it."""


class SkillEvidence(_Model):
    support: int = Field(ge=0)
    """Distinct small worlds with a hard-verified success that contains the pattern."""
    projects: list[str] = Field(default_factory=list)
    """`family/project` of the supporting small worlds."""
    level: str = "none"
    """Weakest verification level among the supporters."""
    experience_ids: list[str] = Field(default_factory=list)
    """Supporting experiences (in the workspace named by `origin`, when imported)."""
    origin: str | None = None
    """Skill id this descriptor was exported from, when it came from elsewhere."""


class SkillDescriptor(_Model):
    """A skill as JSON: what another agent or workspace needs to import it (as a candidate)."""

    format: Literal["lle-skill/1"] = "lle-skill/1"
    """Descriptor format."""
    id: str | None = None
    """Carrier item id in the workspace that exported it."""
    name: str = Field(pattern=NAME_PATTERN)
    """Short name; the policy sees the skill as the tool `skill_<name>`."""
    version: int = Field(default=1, ge=1)
    """Version of this name; a newer active version supersedes the older."""
    family: str
    """Task family whose tools the calls use."""
    kind: Literal["atomic", "composite", "program"] = "atomic"
    """Mined directly, two atomic skills in a row, or a program (written by an extractor, run by the runtime)."""
    program: str | None = Field(default=None, max_length=MAX_PROGRAM_CHARS)
    """A program skill's Python source: `def skill(goal, call)`, where `call(tool, **args)` returns the
    observation; the runtime runs it in the sandbox, re-executed from the observations (`lle.runtime.programs`)."""
    tools: list[str] = Field(default_factory=list)
    """The world tools a program may call (the family's when it was written); it is offered only where the
    small world allows them all."""
    world: str | None = Field(default=None, exclude_if=lambda v: v is None)
    """A program's world (registry id): written from one world's success, it is offered there only."""
    description: str = ""
    """One line for the policy (regenerated from the calls, never taken from an import)."""
    calls: list[SkillCall] = Field(default_factory=list, validate_default=True)
    """The macro: tool calls in order (at least one; none for a program, which makes its own)."""
    slots: list[SkillSlot] = Field(default_factory=list)
    """Parameters of the skill tool."""
    preconditions: list[str] = Field(default_factory=list)
    """`observation:WORD`: what the observation showed before the first call, every time."""
    postconditions: list[str] = Field(default_factory=list)
    """`change:KIND:TARGET` and `observation:WORD`: what every occurrence produced."""
    parts: list[str] = Field(default_factory=list)
    """Keys of the atomic skills a composite is made of."""
    key: str = ""
    """Hash of family and calls: the same macro has the same key everywhere."""
    evidence: SkillEvidence = Field(default_factory=lambda: SkillEvidence(support=0))
    """Summary of the support it was mined from."""
    expires_at: datetime | None = None
    """After this moment the skill is no longer offered."""

    @field_validator("calls")
    @classmethod
    def _a_macro_has_calls(cls, calls: list[SkillCall], info: ValidationInfo) -> list[SkillCall]:
        if not calls and info.data.get("program") is None and info.data.get("kind") != "program":
            raise PydanticCustomError("too_short", "List should have at least 1 item after validation, not 0")
        return calls

    @model_validator(mode="after")
    def _program_or_calls(self) -> SkillDescriptor:
        if self.program is None and self.kind != "program":
            return self
        if self.kind != "program" or self.program is None or not self.program.strip():
            raise ValueError("a program skill has kind 'program' and its source in `program`")
        if self.calls or self.slots or self.parts:
            raise ValueError("a program skill has no calls, slots or parts: its program makes its own calls "
                             "(give either `calls` or `program`, not both)")
        if not self.tools or not all(re.fullmatch(r"[a-z][a-z0-9_]*", t) for t in self.tools):
            raise ValueError(f"a program skill names the world tools it may call in `tools` (got {self.tools})")
        return self

    @model_validator(mode="after")
    def _slots_match(self) -> SkillDescriptor:
        used = {s for c in self.calls for s in c.slots.values()}
        declared = [s.name for s in self.slots]
        if used != set(declared) or len(declared) != len(set(declared)):
            raise ValueError(f"slots {sorted(declared)} do not match the slots the calls use {sorted(used)}")
        for call in self.calls:
            if set(call.args) & set(call.slots):
                raise ValueError(f"{call.tool}: an argument is both a constant and a slot")
        return self

    def finished(self) -> SkillDescriptor:
        """This descriptor with its key and description computed from its calls (or its program)."""
        key = macro_key(self.family, self.calls) if self.program is None else program_key(self.family, self.program)
        return self.model_copy(update={"key": key, "description": describe(self)})

    def body(self) -> list[dict[str, JsonValue]]:
        """What the skill does, as JSON (what revocation by meaning compares): its calls, or its program."""
        if self.program is not None:
            return [{"program": normalized_program(self.program)}]
        return [c.model_dump(mode="json") for c in self.calls]


def macro_key(family: str, calls: Sequence[SkillCall]) -> str:
    body = canonical_json([family, [c.model_dump(mode="json") for c in calls]])
    return hashlib.sha256(body.encode()).hexdigest()[:16]


def normalized_program(source: str) -> str:
    """`source` dedented, each line without trailing whitespace, blank lines dropped: a re-indented or re-spaced
    copy of a program is the same program."""
    lines = textwrap.dedent(source.expandtabs(4)).splitlines()
    return "\n".join(line.rstrip() for line in lines if line.strip())


def program_key(family: str, source: str) -> str:
    body = canonical_json([family, "program", normalized_program(source)])
    return hashlib.sha256(body.encode()).hexdigest()[:16]


def skill_lines(desc: SkillDescriptor) -> list[str]:
    """What the skill does, a line each (the viewer, `lle skills`): its calls, or its program's source lines."""
    return desc.program.splitlines() if desc.program is not None else [render_call(c) for c in desc.calls]


def render_call(call: SkillCall) -> str:
    parts = [f"{k}={canonical_json(v)}" for k, v in sorted(call.args.items())]
    parts += [f"{k}=${s}" for k, s in sorted(call.slots.items())]
    return f"{call.tool}({', '.join(parts)})"


def describe(desc: SkillDescriptor) -> str:
    if desc.program is not None:  # the source is never shown: an imported program's text is not an instruction
        return (f"Runs a checked program over {', '.join(desc.tools)} by itself: it reads the goal and every "
                f"observation and picks each next call until it is done (seen in {desc.evidence.support} "
                "verified successes).")
    macro = " -> ".join(render_call(c) for c in desc.calls)
    when = [p.split(":", 1)[1] for p in desc.preconditions if p.startswith("observation:")][:4]
    text = f"Runs {macro} as one action"
    bound = [f"${s.name} from {s.bind.describe()}" + ("" if s.bind.always else f" where it says {s.bind.left!r}")
             for s in desc.slots if s.bind is not None]
    if bound:
        text += f" (it reads {', '.join(bound)} by itself)"
    if when:
        text += f"; fits when the observation mentions {', '.join(when)}"
    return text + f" (seen in {desc.evidence.support} verified successes)."


# --- traces -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Act:
    """One call that really ran, with what was seen before and after it."""

    tool: str
    args: dict[str, JsonValue]
    before: str | None
    after: str
    changes: tuple[str, ...]


@dataclass(frozen=True)
class Trace:
    """The minable part of one experience: its segments of acts, and who it is."""

    experience_id: str
    small_world_id: str
    project: str
    segments: tuple[tuple[Act, ...], ...]
    goal: str = ""


def trace_of(exp: Experience, initial_observation: str | None = None) -> Trace:
    segments: list[tuple[Act, ...]] = []
    current: list[Act] = []
    before = initial_observation
    for step in exp.steps:
        expanded = any(f.kind == SKILL_FEEDBACK and f.source == "runtime" for f in step.feedback)
        ran = step.executed.allowed and step.executed.status in (ActionStatus.ok, ActionStatus.normalized)
        repeat = bool(current) and (current[-1].tool, current[-1].args, current[-1].after) == (
            step.executed.tool, step.executed.args, step.effect.observation)
        if repeat and ran and not expanded and step.effect.error is None:
            pass  # the same call seeing the same result again (a model's loop) adds nothing to the macro
        elif ran and not expanded and step.effect.error is None:
            changes = tuple(sorted({f"{c.kind}:{c.target}" for c in step.effect.changes}))
            current.append(Act(step.executed.tool, dict(step.executed.args), before, step.effect.observation, changes))
        elif current:
            segments.append(tuple(current))
            current = []
        before = step.effect.observation
    if current:
        segments.append(tuple(current))
    sw = exp.small_world
    return Trace(exp.id, sw.id, f"{sw.family}/{sw.project}", tuple(segments), sw.goal)


# --- mining -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MiningConfig:
    min_support: int = 3
    """Distinct supporting small worlds a pattern needs (the skills gate decides for real)."""
    min_projects: int = 2
    min_len: int = 2
    max_len: int = 3
    """Longest atomic pattern; longer macros arise as composites of two atomic ones."""
    max_categories: int = 3
    """An argument with at most this many distinct values family-wide is part of a pattern's shape."""
    max_skills: int = 12
    """Most atomic skills kept per mining pass (best supported first)."""
    window: int = 400
    """The library mines the family's latest this many supporting experiences (bounds the cost per pass)."""
    composites: bool = True


@dataclass
class Mined:
    """A mined skill before it becomes a carrier item."""

    descriptor: SkillDescriptor
    experience_ids: list[str]
    small_worlds: list[str]
    parts: list[str] = field(default_factory=list)
    places: list[tuple[Trace, int, int]] = field(default_factory=list)
    """(trace, segment, start) of every occurrence."""


Occurrence = tuple[Trace, tuple[Act, ...]]
Atom = tuple[str, tuple[str, ...], tuple[tuple[str, tuple[str, object]], ...]]


@functools.lru_cache(maxsize=8192)
def _words(text: str) -> frozenset[str]:
    return frozenset(w for w in re.findall(r"[a-z][a-z0-9_]+", text.lower()) if len(w) > 2 and w not in _STOPWORDS)


def _norm(value: JsonValue) -> tuple[str, object]:
    """A hashable stand-in for a JSON value (cheaper than canonical JSON for the usual scalars)."""
    if isinstance(value, str | int | float | bool) or value is None:
        return type(value).__name__, value
    return "json", canonical_json(value)


def _json_type(value: JsonValue) -> Literal["string", "integer", "number", "boolean"] | None:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    return "string" if isinstance(value, str) else None


def _categorical(traces: Sequence[Trace], max_categories: int) -> set[tuple[str, str]]:
    values: dict[tuple[str, str], set[tuple[str, object]]] = defaultdict(set)
    for trace in traces:
        for seg in trace.segments:
            for act in seg:
                for k, v in act.args.items():
                    values[(act.tool, k)].add(_norm(v))
    return {k for k, seen in values.items() if len(seen) <= max_categories}


def _atom(act: Act, categorical: set[tuple[str, str]]) -> Atom:
    names = tuple(sorted(act.args))
    return act.tool, names, tuple((k, _norm(act.args[k])) for k in names if (act.tool, k) in categorical)


def abstract(family: str, occurrences: Sequence[Occurrence], *, kind: Literal["atomic", "composite"] = "atomic",
             parts: Sequence[str] = ()) -> Mined:
    """The skill that covers every occurrence: constants, shared slots, pre- and postconditions."""
    first = occurrences[0][1]
    columns: dict[tuple[int, str], list[JsonValue]] = {}
    for i, act in enumerate(first):
        for k in sorted(act.args):
            columns[(i, k)] = [acts[i].args[k] for _, acts in occurrences]
    slot_of: dict[tuple[tuple[str, object], ...], str] = {}  # column of values -> slot name
    worlds_of = [t.small_world_id for t, _ in occurrences]
    slots: list[SkillSlot] = []
    calls: list[SkillCall] = []
    for i, act in enumerate(first):
        consts: dict[str, JsonValue] = {}
        slotted: dict[str, str] = {}
        for k in sorted(act.args):
            column = columns[(i, k)]
            signature = tuple(_norm(v) for v in column)
            if len(set(signature)) == 1:
                consts[k] = column[0]
                continue
            if signature not in slot_of:
                taken = {s.name for s in slots}
                name = k if k not in taken else next(f"{k}_{n}" for n in range(2, 99) if f"{k}_{n}" not in taken)
                slot_of[signature] = name
                counts: dict[tuple[str, object], int] = defaultdict(int)
                first_seen: dict[tuple[str, object], JsonValue] = {}
                for norm, v in zip(signature, column, strict=True):
                    counts[norm] += 1
                    first_seen.setdefault(norm, v)
                examples = [first_seen[c] for c in sorted(counts, key=lambda c: (-counts[c], repr(c)))[:5]]
                types = {_json_type(v) for v in column}
                slots.append(SkillSlot(name=name, type=types.pop() if len(types) == 1 else None, examples=examples,
                                       bind=skill_binding.find(column, _sources(occurrences, i), worlds=worlds_of,
                                                               min_reads=MIN_BINDING_READS)))
            slotted[k] = slot_of[signature]
        calls.append(SkillCall(tool=act.tool, args=consts, slots=slotted))
    befores = [_words(acts[0].before) for _, acts in occurrences if acts[0].before is not None]
    pre = sorted(frozenset.intersection(*befores))[:8] if befores else []
    changed = [set(c for a in acts for c in a.changes) for _, acts in occurrences]
    common = set.intersection(*changed)
    kinds = set.intersection(*[{c.split(":", 1)[0] for c in s} for s in changed])
    post = [f"change:{c}" for c in sorted(common)]
    post += [f"change:{k}:*" for k in sorted(kinds) if not any(c.startswith(k + ":") for c in common)]
    post += [f"observation:{w}" for w in sorted(frozenset.intersection(*[_words(acts[-1].after)
                                                                         for _, acts in occurrences]))[:6]]
    traces = {t.experience_id: t for t, _ in occurrences}
    worlds = sorted({t.small_world_id for t in traces.values()})
    name = _name(calls)
    desc = SkillDescriptor(
        name=name, family=family, kind=kind, calls=calls, slots=slots, preconditions=[f"observation:{w}" for w in pre],
        postconditions=post, parts=list(parts),
        evidence=SkillEvidence(support=len(worlds), projects=sorted({t.project for t in traces.values()}),
                               experience_ids=sorted(traces)),
    ).finished()
    return Mined(desc, sorted(traces), worlds, list(parts))


def _sources(occurrences: Sequence[Occurrence], call: int) -> dict[str, list[str | None]]:
    """The texts a slot first used by call `call` (0-based) could be read from, per occurrence, in the order
    tried: the latest observation first, then the goal, then the observation before the macro."""
    sources: dict[str, list[str | None]] = {}
    for n in range(call, 0, -1):
        sources[f"observation:{n}"] = [acts[n - 1].after for _, acts in occurrences]
    sources[skill_binding.GOAL] = [t.goal or None for t, _ in occurrences]
    sources["observation:0"] = [acts[0].before for _, acts in occurrences]
    return sources


def _name(calls: Sequence[SkillCall]) -> str:
    words = []
    for call in calls:
        words.append(call.tool)
        words += [re.sub(r"[^a-z0-9]+", "_", str(v).lower()).strip("_") for _, v in sorted(call.args.items())]
    name = re.sub(r"_+", "_", "_".join(w for w in words if w)).strip("_")[:48].rstrip("_")
    return name if re.match(NAME_PATTERN, name) else "s_" + hashlib.sha256(name.encode()).hexdigest()[:12]


def _projects(occurrences: Iterable[Occurrence]) -> int:
    return len({t.project for t, _ in occurrences})


def _worlds(occurrences: Iterable[Occurrence]) -> int:
    return len({t.small_world_id for t, _ in occurrences})


def mine(family: str, traces: Sequence[Trace], config: MiningConfig = MiningConfig()) -> list[Mined]:
    """Atomic skills (and, with `config.composites`, composites of two) found in `traces`, best first."""
    traces = sorted(traces, key=lambda t: t.experience_id)
    categorical = _categorical(traces, config.max_categories)
    groups: dict[tuple[Atom, ...], list[tuple[Trace, int, int, tuple[Act, ...]]]] = defaultdict(list)
    for trace in traces:
        for s, seg in enumerate(trace.segments):
            atoms = [_atom(a, categorical) for a in seg]
            for n in range(config.min_len, config.max_len + 1):
                for start in range(len(seg) - n + 1):
                    shape = tuple(atoms[start:start + n])
                    if len({a[0] for a in shape}) >= 2:  # `go, go` is a walk, not a skill
                        groups[shape].append((trace, s, start, seg[start:start + n]))
    frequent = {shape: occ for shape, occ in groups.items()
                if _worlds((t, a) for t, _, _, a in occ) >= config.min_support
                and _projects((t, a) for t, _, _, a in occ) >= config.min_projects}
    support = {shape: frozenset(o[0].experience_id for o in occ) for shape, occ in frequent.items()}
    # Closed patterns only: one inside a longer pattern with the same support says nothing more.
    subsumed = {inner for shape in frequent for inner in (shape[1:], shape[:-1])
                if inner in frequent and support[inner] == support[shape]}
    kept = sorted((s for s in frequent if s not in subsumed),
                  key=lambda s: (-len(support[s]), -len(s), repr(s)))[:config.max_skills]
    atomic = []
    for shape in kept:
        mined = abstract(family, [(t, acts) for t, _, _, acts in frequent[shape]])
        mined.places = [(t, s, start) for t, s, start, _ in frequent[shape]]
        atomic.append(mined)
    if not config.composites:
        return atomic
    return atomic + composites(family, atomic, config)


def match(calls: Sequence[SkillCall],
          acts: Sequence[Act | tuple[str, dict[str, JsonValue]]]) -> dict[str, JsonValue] | None:
    """The slot values under which `calls` are exactly `acts` (tool, constants, same args), or None."""
    if len(acts) < len(calls):
        return None
    bound: dict[str, JsonValue] = {}
    for call, act in zip(calls, acts, strict=False):
        tool, args = (act.tool, act.args) if isinstance(act, Act) else act
        if tool != call.tool or set(args) != set(call.args) | set(call.slots):
            return None
        if any(_norm(args[k]) != _norm(v) for k, v in call.args.items()):
            return None
        for k, slot in call.slots.items():
            if slot in bound and _norm(bound[slot]) != _norm(args[k]):
                return None
            bound[slot] = args[k]
    return bound


def composites(family: str, atomic: Sequence[Mined], config: MiningConfig) -> list[Mined]:
    """Pairs of atomic skills where the second starts right where the first ends, often enough."""
    places = {m.descriptor.key: m.places for m in atomic}
    known = {m.descriptor.key for m in atomic}
    found: list[Mined] = []
    for a in atomic:
        ends = {(t.experience_id, s, start + len(a.descriptor.calls)) for t, s, start in places[a.descriptor.key]}
        for b in atomic:
            occ: list[Occurrence] = []
            for t, s, start in places[b.descriptor.key]:
                if (t.experience_id, s, start) in ends:
                    begin = start - len(a.descriptor.calls)
                    occ.append((t, t.segments[s][begin:start + len(b.descriptor.calls)]))
            if _worlds(occ) >= config.min_support and _projects(occ) >= config.min_projects:
                mined = abstract(family, occ, kind="composite", parts=[a.descriptor.key, b.descriptor.key])
                if mined.descriptor.key not in known:
                    known.add(mined.descriptor.key)
                    found.append(mined)
    return sorted(found, key=lambda m: (-len(m.small_worlds), m.descriptor.key))


def used_skills(exp: Experience) -> list[str]:
    """Ids of the skills `exp` called (from the runtime's `skill` feedback on the steps they expanded)."""
    found = {str(f.content.get("skill")) for s in exp.steps for f in s.feedback
             if f.source == "runtime" and f.kind == SKILL_FEEDBACK and isinstance(f.content, dict)}
    return sorted(found)


def ran_cleanly(exp: Experience, skill_id: str) -> bool:
    """Whether every call the skill made in `exp` was allowed and ran (a program's denied call, or its failure,
    which the runtime records as a denied step, fails its check by execution whatever the policy did next)."""
    return all(s.executed.allowed and s.executed.status is not ActionStatus.error for s in exp.steps
               if any(f.source == "runtime" and f.kind == SKILL_FEEDBACK and isinstance(f.content, dict)
                      and f.content.get("skill") == skill_id for f in s.feedback))


def offered_tools(context: Context) -> set[str]:
    """Tool names in the context's action schema (one `anyOf` branch per tool)."""
    branches = context.action_schema.get("anyOf")
    names = set()
    for branch in branches if isinstance(branches, list) else []:
        props = branch.get("properties") if isinstance(branch, dict) else None
        tool = props.get("tool") if isinstance(props, dict) else None
        if isinstance(tool, dict) and isinstance(tool.get("const"), str):
            names.add(str(tool["const"]))
    return names
