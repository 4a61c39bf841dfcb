"""W: what every world and task family provides, and `check_world`, the conformance check.

A world is Gymnasium-shaped (`reset(*, seed, options) -> (obs, info)`, `step(action) -> WorldStep`)
and also tells the runtime what it needs to ground actions: its `tools`, a JSON `state()` the
runtime diffs into `Change`s, and, for file worlds, the `workdir` whose files are hashed per step.
A `TaskFamily` is the big world's source of tasks: it cuts deterministic `SmallWorld`s for a split
and a seed, and builds the world instance a small world runs in.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import jsonschema
from pydantic import JsonValue

from lle.actions import action_schema
from lle.core import ActionRequest, Outcome, SmallWorld, Split, ToolSpec, World, WorldStep, canonical_json
from lle.errors import InvalidInputError, RegistryError, WorldError

__all__ = [
    "AnchorResult",
    "BaseWorld",
    "CheckReport",
    "SmallWorld",
    "TaskFamily",
    "ToolWorld",
    "World",
    "check_family",
    "check_world",
    "open_family",
    "open_world",
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


class TaskFamily(ABC):
    """Makes small worlds for a split and seed, and the world each one runs in.

    Registered under its versioned id (the entry point's value is the class); `options()` returns the
    constructor keywords, stored with each episode so `resume` builds the very same family.
    """

    id: str
    family: str
    version: str = "1"
    projects: tuple[str, ...] = ()

    @abstractmethod
    def small_world(self, split: Split, seed: int, *, project: str | None = None) -> SmallWorld:
        """The small world for (split, seed): equal inputs give equal small worlds; splits never share one."""

    @abstractmethod
    def make_world(self, small_world: SmallWorld) -> ToolWorld:
        """A fresh world instance for `small_world` (not yet reset)."""

    def options(self) -> dict[str, JsonValue]:
        """Constructor keywords that rebuild this family."""
        return {}

    def small_worlds(self, split: Split, n: int, *, start: int = 0, project: str | None = None) -> list[SmallWorld]:
        return [self.small_world(split, seed, project=project) for seed in range(start, start + n)]

    def check_small_world(self, small_world: SmallWorld) -> None:
        if small_world.world != self.id:
            raise WorldError(
                f"small world {small_world.id} belongs to {small_world.world}, not {self.id}; "
                f"open it with `open_world` (it picks the family from the small world)"
            )


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

    Worlds subclass it only to set their `anchor` kind and `checker` name.
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


def check_family(family: TaskFamily, *, seeds: Sequence[int] = (0, 1, 2, 3)) -> CheckReport:
    """`check_world` on one small world per project, plus the family's own promises.

    Small worlds are deterministic per (split, seed), splits never share an id or a seed, and
    different seeds give different layouts (first observations differ across `seeds`).
    """
    report = CheckReport()
    by_split: dict[Split, list[SmallWorld]] = {}
    for split in Split:
        worlds = [family.small_world(split, s) for s in seeds]
        if worlds != [family.small_world(split, s) for s in seeds]:
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
        sw = family.small_world(Split.train, seeds[0], project=project)
        sub = check_world(partial(family.make_world, sw), seeds=(sw.seed,))
        report.steps_probed += sub.steps_probed
    report.passed += [f"world:{p}" for p in family.projects]
    return report
