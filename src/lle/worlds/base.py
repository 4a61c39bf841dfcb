"""W: what every world and task family provides, and `check_world`, the conformance check.

A world is Gymnasium-shaped (`reset(*, seed, options) -> (obs, info)`, `step(action) -> WorldStep`)
and also tells the runtime what it needs to ground actions: its `tools`, a JSON `state()` the
runtime diffs into `Change`s, and, for file worlds, the `workdir` whose files are hashed per step.
A `TaskFamily` is the big world's source of tasks: it cuts deterministic `SmallWorld`s for a split
and a seed, and builds the world instance a small world runs in.
"""

from __future__ import annotations

import hashlib
import inspect
import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, ClassVar, Protocol, runtime_checkable

import jsonschema
from pydantic import JsonValue

from lle.actions import action_schema
from lle.core import ActionRequest, Outcome, SmallWorld, Split, ToolSpec, World, WorldStep, canonical_json
from lle.errors import InvalidInputError, RegistryError, WorldError

__all__ = [
    "SPLIT_PERCENTS",
    "AnchorResult",
    "BaseWorld",
    "CheckReport",
    "FamilyInfo",
    "SmallWorld",
    "TaskFamily",
    "ToolWorld",
    "World",
    "check_family",
    "check_world",
    "contract_problem",
    "cut",
    "open_family",
    "open_world",
    "sizes_of",
    "split_of",
    "stable_order",
    "stable_percent",
]


@runtime_checkable
class ToolWorld(Protocol):
    """A `World` the runtime can ground actions in."""

    tools: list[ToolSpec]
    version: str
    workdir: Path | None

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]: ...

    def step(self, action: ActionRequest) -> WorldStep: ...

    def state(self) -> dict[str, JsonValue]: ...

    def close(self) -> None: ...


class BaseWorld(ABC):
    """Defaults for a `ToolWorld`: no workdir, empty state, nothing to close."""

    tools: list[ToolSpec]
    version: str = "1"
    workdir: Path | None = None

    @abstractmethod
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        """Start over; the same seed must give the same observation, info and state."""

    @abstractmethod
    def step(self, action: ActionRequest) -> WorldStep:
        """Apply one already grounded action."""

    def state(self) -> dict[str, JsonValue]:
        """Flat JSON view of what can change (key -> value); the runtime diffs it into `Change`s."""
        return {}

    def close(self) -> None:  # noqa: B027  (optional hook: most worlds hold nothing)
        """Release what the world holds (processes, temp folders)."""


@dataclass(frozen=True)
class FamilyInfo:
    """What a task family is, read from its class alone: nothing is built, loaded or started."""

    id: str
    family: str
    version: str
    description: str
    projects: tuple[str, ...]
    tools: tuple[str, ...]
    """The tools its small worlds allow (a world may define more that are never allowed)."""
    anchor: str
    """The kind of check that decides success (`test`, `execution`, `symbolic`, `state`, …)."""
    levels: tuple[str, ...]
    """Difficulty levels, easiest first; empty when the family has none."""
    splits: dict[Split, int | None]
    """Tasks per split; None means unbounded (generated per seed) or not known without loading data."""

    def as_json(self) -> dict[str, JsonValue]:
        return {"id": self.id, "family": self.family, "version": self.version, "description": self.description,
                "projects": list(self.projects), "tools": list(self.tools), "anchor": self.anchor,
                "levels": list(self.levels), "splits": {s.value: n for s, n in self.splits.items()}}


class TaskFamily(ABC):
    """Makes small worlds for a split and seed, and the world each one runs in.

    Registered under its versioned id: the entry point's name must equal the class's `id` and its value
    is the class. The class attributes and `split_sizes()` are static metadata (`info()`), read by
    `lle worlds list` without building the family (a class that breaks it is rejected when loaded, see
    `contract_problem`); `options()` returns the constructor keywords, stored with each episode so `resume`
    builds the very same family.
    """

    id: ClassVar[str]
    family: ClassVar[str]
    version: ClassVar[str] = "1"
    projects: ClassVar[tuple[str, ...]] = ()
    description: ClassVar[str] = ""
    """One line for `lle worlds list`; empty means the class docstring's first line."""
    tools: ClassVar[tuple[str, ...]] = ()
    anchor: ClassVar[str] = "state"
    quick_reset: ClassVar[bool | None] = None
    """Whether building a small world's world and its first observation takes milliseconds. The contamination
    index (`lle.governance.hygiene`) then makes the first observation part of each held-out item where goals
    repeat across splits. None (a family that does not say): measured once, which depends on the machine's load
    at that moment, so built-in families say it."""
    levels: ClassVar[tuple[str, ...]] = ()
    """Difficulty levels, easiest first, each in words (what makes it harder than the one before);
    `small_world(..., level=i)` cuts tasks at level i, `level=None` the family's unlevelled tasks."""

    @classmethod
    def split_sizes(cls, project: str | None = None) -> dict[Split, int | None]:
        """Tasks per split of `project` (None: of the tasks `small_world` cuts without a project), without building
        anything; None for unbounded (the default) or unknown. The flywheel draws seeds below a finite size."""
        return dict.fromkeys(Split)

    @classmethod
    def info(cls) -> FamilyInfo:
        """The static metadata of this family (a classmethod: nothing is instantiated)."""
        doc = (cls.__doc__ or "").strip().splitlines()
        sizes = cls.split_sizes()
        return FamilyInfo(id=cls.id, family=cls.family, version=cls.version,
                          description=cls.description or (doc[0] if doc else ""), projects=tuple(cls.projects),
                          tools=tuple(cls.tools), anchor=cls.anchor, levels=tuple(cls.levels),
                          splits={s: sizes.get(s) for s in Split})

    @abstractmethod
    def small_world(self, split: Split, seed: int, *, project: str | None = None,
                    level: int | None = None) -> SmallWorld:
        """The small world for (split, seed[, level]): equal inputs give equal small worlds; splits never share one.

        `level=None` is the family's unlevelled task (ids and goals as they always were); a family without
        `levels` refuses any other value (`check_level`).
        """

    @abstractmethod
    def make_world(self, small_world: SmallWorld) -> ToolWorld:
        """A fresh world instance for `small_world` (not yet reset)."""

    def options(self) -> dict[str, JsonValue]:
        """Constructor keywords that rebuild this family."""
        return {}

    def small_worlds(self, split: Split, n: int, *, start: int = 0, project: str | None = None,
                     level: int | None = None) -> list[SmallWorld]:
        return [cut(self, split, seed, project=project, level=level) for seed in range(start, start + n)]

    @classmethod
    def check_level(cls, level: int | None) -> int | None:
        """`level` if this family declares it (None stays None); otherwise a `WorldError` saying which exist."""
        if level is None or (isinstance(level, int) and 0 <= level < len(cls.levels)):
            return level
        if not cls.levels:
            raise WorldError(f"{cls.id} has no difficulty levels; leave level unset (None)")
        raise WorldError(f"{cls.id} has no level {level!r}; use 0..{len(cls.levels) - 1} "
                         f"(see `lle worlds show {cls.id}`)")

    def check_small_world(self, small_world: SmallWorld) -> None:
        if small_world.world != self.id:
            raise WorldError(
                f"small world {small_world.id} belongs to {small_world.world}, not {self.id}; "
                f"open it with `open_world` (it picks the family from the small world)"
            )


def sizes_of(family: type[TaskFamily] | TaskFamily, project: str | None = None) -> dict[Split, int | None]:
    """`family.split_sizes(project)`; a family whose `split_sizes` takes no `project` (written before sizes were per
    project) is asked without one, its sizes holding for each of its projects."""
    takes = project is not None and "project" in inspect.signature(family.split_sizes).parameters
    sizes = family.split_sizes(project=project) if takes else family.split_sizes()
    return {s: sizes.get(s) for s in Split}


def contract_problem(cls: type[TaskFamily]) -> str | None:
    """Why the class `cls` breaks the static contract `lle worlds list` reads (one line), or None. Cheap: reads the
    class attributes and calls `split_sizes()` and `info()`, catching what they raise."""
    missing = [n for n in ("id", "family") if not isinstance(getattr(cls, n, None), str)]
    if missing:
        return f"class attribute {' and '.join(missing)} is missing or not a string; set it on the class"
    if not all(isinstance(v, tuple | list) and all(isinstance(x, str) for x in v)
               for v in (cls.projects, cls.tools, cls.levels)):
        return "class attributes projects, tools and levels must be tuples of strings"
    if getattr(cls, "__abstractmethods__", None):
        return f"{', '.join(sorted(cls.__abstractmethods__))} not implemented; define them on the class"
    if not isinstance(inspect.getattr_static(cls, "split_sizes"), classmethod | staticmethod):
        return ("split_sizes is an instance method; declare it `@classmethod def split_sizes(cls, project=None)` "
                "(it is read from the class: nothing is built)")
    try:
        sizes = cls.split_sizes()
        if not isinstance(sizes, Mapping) or not all(
                v is None or (isinstance(v, int) and not isinstance(v, bool) and v >= 0) for v in sizes.values()):
            return f"split_sizes() gave {sizes!r:.80}; return a dict of Split to a task count (int) or None"
        cls.info()
    except Exception as err:  # a plugin's metadata call: whatever it raises rejects this plugin alone
        return f"split_sizes() or info() raised {type(err).__name__}: {err}".splitlines()[0]
    return None


def cut(family: TaskFamily, split: Split, seed: int, *, project: str | None = None,
        level: int | None = None) -> SmallWorld:
    """`family.small_world(...)`, passing `level` only when one is asked for (families written before levels
    existed, e.g. plugins, take no `level` keyword)."""
    if level is None:
        return family.small_world(split, seed, project=project)
    return family.small_world(split, seed, project=project, level=level)


# --- splits: one stable hash for every world ---------------------------------------------------------------

SPLIT_PERCENTS: tuple[tuple[Split, int], ...] = ((Split.train, 80), (Split.dev, 90), (Split.test, 100))
"""Cumulative percent per split: 80 % train, 10 % dev, 10 % test."""


def stable_percent(key: str) -> int:
    """0..99 from the sha256 of `key`: the same on every machine, whatever PYTHONHASHSEED is."""
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big") % 100


def split_of(key: str, percents: Sequence[tuple[Split, int]] = SPLIT_PERCENTS) -> Split:
    """The split of an item, from a stable hash of its key (never Python's `hash()`).

    Put in the key what makes the item distinct (its text, or its project and seed) plus a salt, so
    an item keeps its split for ever and equal items never land in two splits.
    """
    bucket = stable_percent(key)
    return next(split for split, upper in percents if bucket < upper)


def stable_order(keys: Sequence[str], salt: str) -> list[str]:
    """`keys` in a pseudo-random order that depends only on their text (so seed 0 is not always the easiest)."""
    return sorted(keys, key=lambda k: hashlib.sha256(f"{salt}:{k}".encode()).hexdigest())


def open_family(world_id: str, **options: Any) -> TaskFamily:
    """The task family registered under `world_id` (e.g. `toy/keys-v1`)."""
    from lle import registry  # the registry imports plugins lazily; keep this module importable alone

    factory = registry.spec(world_id).load()
    if isinstance(factory, type) and not issubclass(factory, TaskFamily):
        raise RegistryError(
            f"{world_id} is registered but is a {factory.__name__}, not a TaskFamily; "
            "pass the id of a world (see `lle worlds list`)"
        )
    family = factory(**options)
    if not isinstance(family, TaskFamily):
        raise RegistryError(
            f"{world_id} is registered but is a {type(family).__name__}, not a TaskFamily; "
            "point its entry point at a TaskFamily subclass"
        )
    return family


def open_world(small_world: SmallWorld, **options: Any) -> ToolWorld:
    """A fresh world instance for `small_world`, from the family it was cut from.

    `wrapper` names a registered world wrapper (Gymnasium's idea): a factory called with
    `world=` and `small_world=` that returns a `ToolWorld` around the real one.
    """
    from lle import registry

    wrapper = options.pop("wrapper", None)
    world = open_family(small_world.world, **options).make_world(small_world)
    return registry.make(wrapper, world=world, small_world=small_world) if wrapper else world


@dataclass(frozen=True)
class AnchorResult:
    """What a world's anchor found. Holds no gold: `info()` may be shown to the agent.

    The success contract: on the step that ends the episode (terminated), the world's `info` carries
    `success` (True/False; None when the anchor could not decide, never rounded up), `anchor` (the
    kind of check; a kind in `lle.evidence.verifiers.NON_GOAL_ANCHORS` never counts as reaching the
    goal) and `detail`. `info()` writes exactly that; `world_step()` wraps it in the final step.
    Worlds use it as is, passing `anchor` and `checker`, or subclass it to add fields of their own.
    """

    outcome: Outcome
    reason: str
    detail: dict[str, JsonValue] = field(default_factory=dict)
    anchor: str = "state"
    checker: str = ""

    @property
    def passed(self) -> bool:
        return self.outcome is Outcome.passed

    def info(self) -> dict[str, JsonValue]:
        """The world's step info: `success` is None when the anchor could not decide (never rounded up)."""
        success = None if self.outcome is Outcome.unknown else self.passed
        return {"success": success, "anchor": self.anchor, "outcome": self.outcome.value,
                "detail": {"checker": self.checker, "reason": self.reason, **self.detail}}

    def world_step(self, observation: str) -> WorldStep:
        """The step that ends the episode with this verdict: reward 1.0 only when it passed."""
        return WorldStep(observation, 1.0 if self.passed else 0.0, True, False, self.info())


# --- conformance ------------------------------------------------------------------------------------


@dataclass
class CheckReport:
    """What `check_world` ran: every name in `passed` is a check that held."""

    passed: list[str] = field(default_factory=list)
    steps_probed: int = 0


def _fail(check: str, what: str, fix: str) -> WorldError:
    return WorldError(f"check_world: {check} failed: {what}; {fix}")


def sample_args(schema: dict[str, JsonValue]) -> dict[str, JsonValue]:
    """Minimal arguments that satisfy a simple object schema (required properties only)."""
    props = schema.get("properties")
    required = schema.get("required")
    args: dict[str, JsonValue] = {}
    if not isinstance(props, dict) or not isinstance(required, list):
        return args
    for name in required:
        sub = props.get(str(name))
        if not isinstance(sub, dict):
            continue
        enum = sub.get("enum")
        kind = sub.get("type")
        defaults: dict[str, JsonValue] = {"string": "x", "integer": 0, "number": 0, "boolean": False, "array": [],
                                          "object": {}}
        if isinstance(enum, list) and enum:
            args[str(name)] = enum[0]
        elif "const" in sub:
            args[str(name)] = sub["const"]
        else:
            args[str(name)] = defaults.get(str(kind), "x")
    return args


def default_probe(tools: list[ToolSpec]) -> list[ActionRequest]:
    """Each tool once with minimal arguments, then `submit` (if there is one) to end the episode."""
    probe = [ActionRequest(tool=t.name, args=sample_args(t.parameters)) for t in tools if t.name != "submit"]
    probe += [ActionRequest(tool=t.name, args=sample_args(t.parameters)) for t in tools if t.name == "submit"]
    return probe


Trace = list[tuple[str, float, bool, bool, str, str]]


def _run_probe(world: ToolWorld, seed: int, probe: Sequence[ActionRequest], max_steps: int) -> tuple[str, Trace]:
    try:
        first = world.reset(seed=seed, options=None)
    except Exception as err:
        raise _fail("reset", f"reset(seed={seed}) raised {type(err).__name__}: {err}", "make reset total") from err
    if not (isinstance(first, tuple) and len(first) == 2):
        raise _fail("reset-types", f"reset returned {type(first).__name__}", "return a tuple (observation, info)")
    obs, info = first
    if not isinstance(obs, str):
        raise _fail("reset-types", f"observation is {type(obs).__name__}", "return the observation as str")
    _check_info("reset-types", info)
    trace: Trace = [(obs, 0.0, False, False, _json("info-json", info), _json("state-json", world.state()))]
    for action in list(probe)[:max_steps]:
        try:
            result = world.step(action)
        except Exception as err:
            raise _fail("robustness", f"step({action.tool} {canonical_json(action.args)}) raised "
                        f"{type(err).__name__}: {err}",
                        "answer schema-valid actions with an observation; raise only on real faults") from err
        if not (isinstance(result, tuple) and len(result) == 5):
            raise _fail("step-types", f"step returned {type(result).__name__}",
                        "return WorldStep(observation, reward, terminated, truncated, info)")
        o, reward, terminated, truncated, step_info = result
        if not isinstance(o, str):
            raise _fail("step-types", f"observation is {type(o).__name__}", "return the observation as str")
        if isinstance(reward, bool) or not isinstance(reward, int | float) or not math.isfinite(reward):
            raise _fail("step-types", f"reward is {reward!r}", "return a finite float reward")
        if not isinstance(terminated, bool) or not isinstance(truncated, bool):
            raise _fail("step-types", f"terminated/truncated are {terminated!r}/{truncated!r}", "return two bools")
        _check_info("step-types", step_info)
        trace.append((o, float(reward), terminated, truncated, _json("info-json", step_info),
                      _json("state-json", world.state())))
        if terminated or truncated:
            break
    return obs, trace


def _check_info(check: str, info: object) -> None:
    if not isinstance(info, dict) or not all(isinstance(k, str) for k in info):
        raise _fail(check, f"info is {type(info).__name__}", "return info as a dict with str keys")


def _json(check: str, value: object) -> str:
    try:
        return canonical_json(value)
    except (TypeError, ValueError) as err:
        raise _fail(check, f"{value!r:.80} is not plain JSON ({err})",
                    "keep info and state() to JSON values: the runtime records them") from err


def check_world(
    world_or_factory: ToolWorld | Callable[[], ToolWorld],
    *,
    seeds: Sequence[int] = (0, 1),
    probe: Sequence[ActionRequest] | None = None,
    max_steps: int = 200,
) -> CheckReport:
    """Check that a world keeps the contract the runtime relies on; raise `WorldError` naming the check.

    Checks: interface, tools (valid schemas via `action_schema`), reset/step types, JSON info and
    state, robustness (schema-valid actions never raise), determinism under a seed (same instance
    and, given a factory, a fresh one), termination (the probe ends the episode), reset after done.
    `probe` is the action sequence to play (default: each tool once, then `submit`).
    """
    factory: Callable[[], ToolWorld] | None = None
    if isinstance(world_or_factory, ToolWorld):
        world = world_or_factory
    elif callable(world_or_factory):
        factory = world_or_factory
        world = factory()
    else:
        raise InvalidInputError(f"check_world needs a world or a factory, got {type(world_or_factory).__name__}")
    report = CheckReport()
    if not isinstance(world, ToolWorld):
        missing = [n for n in ("tools", "version", "workdir", "reset", "step", "state", "close")
                   if not hasattr(world, n)]
        raise _fail("interface", f"{type(world).__name__} lacks {', '.join(missing)}",
                    "subclass lle.worlds.base.BaseWorld")
    report.passed.append("interface")
    tools = world.tools
    if not isinstance(tools, list) or not all(isinstance(t, ToolSpec) for t in tools):
        raise _fail("tools", "`tools` is not a list of ToolSpec", "declare tools as lle.core.ToolSpec")
    try:
        schema = action_schema(tools)
        for branch in schema["anyOf"]:
            jsonschema.Draft202012Validator.check_schema(branch)
    except (InvalidInputError, jsonschema.SchemaError) as err:
        raise _fail("tools", str(err).splitlines()[0], "give each tool a valid JSON Schema for its args") from err
    report.passed.append("tools")
    actions = list(probe) if probe is not None else default_probe(tools)
    for seed in seeds:
        first_obs, trace = _run_probe(world, seed, actions, max_steps)
        report.steps_probed += len(trace) - 1
        again_obs, again = _run_probe(world, seed, actions, max_steps)
        if again != trace:
            at = next(i for i, (a, b) in enumerate(zip(trace, again, strict=False)) if a != b) \
                if len(again) == len(trace) else min(len(again), len(trace))
            raise _fail("determinism", f"seed {seed}: the same actions gave a different result at step {at} "
                        "(observation, reward, flags, info or state)",
                        "draw all randomness from a generator seeded in reset(seed=...)")
        if factory is not None:
            fresh = factory()
            try:
                if _run_probe(fresh, seed, actions, max_steps)[1] != trace:
                    raise _fail("determinism", f"seed {seed}: a fresh instance diverged from the first",
                                "keep no state outside what reset(seed=...) rebuilds")
            finally:
                fresh.close()
        last = trace[-1]
        if not (last[2] or last[3]):
            raise _fail("termination", f"seed {seed}: {len(trace) - 1} probe actions did not end the episode",
                        "pass probe= actions that end it (e.g. a `submit` tool that terminates)")
        if again_obs != first_obs:
            raise _fail("reset-after-done", f"seed {seed}: reset after the episode ended gave another observation",
                        "let reset rebuild everything")
    report.passed += ["reset-types", "step-types", "info-json", "state-json", "robustness", "determinism",
                      "termination", "reset-after-done"]
    world.close()
    return report


def check_family(family: TaskFamily, *, seeds: Sequence[int] = (0, 1, 2, 3),
                 probe: Sequence[ActionRequest] | None = None, level: int | None = None) -> CheckReport:
    """Check a family's promises, then `check_world` on one small world per project; raise `WorldError`.

    - `family-metadata`: the static metadata (`info()`) holds: a well-formed id, a description, and
      `tools` equal to what the small worlds allow (so `lle worlds list` tells the truth unbuilt).
    - `family-determinism`: `small_world(split, seed)` gives the same small world on every call
      (resume and paired evaluation rebuild tasks from (split, seed) alone).
    - `family-splits`: across every split and every seed in `seeds`, no two small worlds share an id
      or a world seed (`SmallWorld.seed`, the number `reset` gets). A world seed in two splits would
      be one world in train and in test: held-out results would be contaminated.
    - `family-variety`: the train small worlds of `seeds` do not all give the same first observation:
      a family that ignores the seed would offer one task many times.
    - `world:<project>`: `check_world` (with `probe`, default each tool once then `submit`) on the
      first seed's small world of each project.

    `seeds` are task seeds to sample in each split (at least two for the variety check); `probe` is
    the action sequence `check_world` plays, for worlds whose tools need meaningful arguments; `level`
    checks the small worlds of one difficulty level (each must record it in `SmallWorld.level`).
    """
    from lle.registry import ID_PATTERN

    info = family.info()
    family.check_level(level)
    sample = cut(family, Split.train, seeds[0], level=level)
    if sample.level != level or not all(isinstance(d, str) and d.strip() for d in info.levels):
        raise _fail("family-metadata", f"{info.id!r}: level {level!r} was asked, the small world records "
                    f"{sample.level!r} (levels {list(info.levels)})",
                    "set SmallWorld.level to the level cut, and describe every level in words")
    if not ID_PATTERN.match(info.id) or not info.description or set(info.tools) != set(sample.tools):
        raise _fail("family-metadata", f"{info.id!r}: static metadata (id, description, tools {list(info.tools)}) "
                    f"disagrees with the small world (tools {sample.tools})",
                    "set the class attributes id (family/name-vN), description or a docstring, and tools")
    report = CheckReport(passed=["family-metadata"])
    by_split: dict[Split, list[SmallWorld]] = {}
    for split in Split:
        worlds = [cut(family, split, s, level=level) for s in seeds]
        if worlds != [cut(family, split, s, level=level) for s in seeds]:
            raise _fail("family-determinism", f"{family.id}: small_world({split}, seed) changed between calls",
                        "derive small worlds from (split, seed) only")
        by_split[split] = worlds
    keys = [(sw.id, sw.seed) for ws in by_split.values() for sw in ws]
    if len({k[0] for k in keys}) != len(keys) or len({k[1] for k in keys}) != len(keys):
        raise _fail("family-splits", f"{family.id}: two (split, seed) pairs share an id or a world seed",
                    "offset world seeds per split so train/dev/test never overlap")
    firsts = []
    for sw in by_split[Split.train]:
        world = family.make_world(sw)
        firsts.append(world.reset(seed=sw.seed)[0])
        world.close()
    if len(set(firsts)) < 2 and len(seeds) > 1:
        raise _fail("family-variety", f"{family.id}: seeds {list(seeds)} all gave the same first observation",
                    "make the layout depend on the seed")
    report.passed += ["family-determinism", "family-splits", "family-variety"]
    for project in family.projects or (None,):
        sw = cut(family, Split.train, seeds[0], project=project, level=level)
        sub = check_world(partial(family.make_world, sw), seeds=(sw.seed,), probe=probe)
        report.steps_probed += sub.steps_probed
    report.passed += [f"world:{p}" for p in family.projects]
    return report
