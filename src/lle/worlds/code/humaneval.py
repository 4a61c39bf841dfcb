"""`code/humaneval-v1`: repair a HumanEval function into which one bug of a named family was injected.

Each small world is (problem, bug family, site): the canonical solution with one injected bug
(`bugs.py`; only injections that make the visible tests fail, per the shipped catalog), laid out as
`src/<function>.py` plus `tests/test_<function>.py`. The anchor runs the visible cases plus hidden
variants on a fresh copy of `src/<function>.py` only (`repo.verify`).

Problems are split 100 / 32 / 32 into train / dev / test by the sha256 of their task id, so the
split never depends on the machine or on Python's `hash()`. The test split is for release
evaluation only.
"""

from __future__ import annotations

import ast
import hashlib
import re
from functools import cache
from typing import Any

from pydantic import JsonValue

from lle.core import ActionRequest, CarrierKind, Limits, Permissions, Scope, ScopeLevel, SmallWorld, Split
from lle.errors import WorldError
from lle.sandbox import Sandbox
from lle.worlds.base import TaskFamily, stable_order
from lle.worlds.code.bugs import FAMILIES, find_function, inject
from lle.worlds.code.catalog import Problem, load_catalog, load_problems, module_path, problem_spec, source_hash
from lle.worlds.code.repo import TOOL_NAMES, RepoSpec, RepoWorld

WORLD_ID = "code/humaneval-v1"
PROJECT = "humaneval"
SPLIT_SIZES = {Split.train: 100, Split.dev: 32, Split.test: 32}
SPLIT_OFFSET = {Split.train: 0, Split.dev: 1, Split.test: 2}
SITES_PER_PAIR = 8


def _key(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


@cache
def problem_splits() -> dict[str, Split]:
    """task id -> split: in `stable_order` (sha256 of `code/humaneval-v1:<task id>`), 100 train, 32 dev, 32 test.

    Fixed sizes, not `split_of`'s percentages: the catalog is small, and each split needs its count.
    """
    ordered = stable_order(list(load_problems()), WORLD_ID)
    out: dict[str, Split] = {}
    start = 0
    for split, size in SPLIT_SIZES.items():
        out.update(dict.fromkeys(ordered[start:start + size], split))
        start += size
    return out


@cache
def pairs(split: Split) -> tuple[tuple[str, str, tuple[int, ...]], ...]:
    """(task id, bug family, catalogued sites) of a split, in a stable shuffled order."""
    catalog = load_catalog()["problems"]
    found = [(task_id, family, tuple(site for site, _digest in catalog[task_id]["injections"][family]))
             for task_id, s in problem_splits().items() if s == split
             for family in FAMILIES if catalog[task_id]["injections"].get(family)]
    return tuple(sorted(found, key=lambda p: _key(f"{WORLD_ID}:{p[0]}:{p[1]}")))


def task_of(split: Split, seed: int) -> tuple[str, str, int]:
    """(task id, bug family, site) for a split's seed: pairs in turn, then the next site of each pair."""
    ps = pairs(split)
    if seed < 0:
        raise WorldError(f"{WORLD_ID}: seed {seed} is negative; use 0, 1, 2, …")
    task_id, family, sites = ps[seed % len(ps)]
    return task_id, family, sites[(seed // len(ps)) % len(sites)]


def decode_world_seed(world_seed: int) -> tuple[Split, int]:
    offset = world_seed % len(SPLIT_OFFSET)
    split = next(s for s, o in SPLIT_OFFSET.items() if o == offset)
    return split, world_seed // len(SPLIT_OFFSET)


def summary(problem: Problem) -> str:
    """The first sentence of the function's docstring (at most ~120 characters), for the goal."""
    tree = ast.parse(problem.source)
    doc = ast.get_docstring(find_function(tree, problem.entry_point)) or ""
    line = " ".join(doc.split(" >>>")[0].split())
    first = re.split(r"(?<=[.!?:])\s", line, maxsplit=1)[0]
    return first if len(first) <= 120 else first[:117].rsplit(" ", 1)[0] + "…"


def goal(problem: Problem) -> str:
    name, about = problem.entry_point, summary(problem)
    documented = f' Its docstring begins: "{about}"' if about else ""
    return (f"The function `{name}` in src/{name}.py has a bug: its tests in tests/test_{name}.py fail.{documented} "
            "Fix the bug without changing the tests, check with run_tests, then call submit.")


class HumanEvalWorld(RepoWorld):
    """A repo holding one HumanEval function with one injected bug; `reset(seed)` decodes the task."""

    def build(self, seed: int) -> tuple[RepoSpec, dict[str, Any]]:
        split, index = decode_world_seed(seed)
        task_id, family, site = task_of(split, index)
        problem = load_problems()[task_id]
        entry = load_catalog()["problems"][task_id]
        injection = inject(problem.source, problem.entry_point, family, site)
        digests = dict(entry["injections"][family])
        if injection is None or source_hash(injection.source) != digests.get(site):
            raise WorldError(f"{WORLD_ID}: injection {family}#{site} no longer applies to {task_id}; the catalog "
                             "is stale, rebuild it with `python -m lle.worlds.code.catalog`")
        spec = problem_spec(problem, injection.source, [(a, e) for a, e in entry["visible"]],
                            [(a, e) for a, e in entry["hidden"]])
        return spec, {"problem": task_id, "bug_family": family, "split": split.value}


class HumanEvalFamily(TaskFamily):
    """Task family `code/humaneval-v1` (one project, `humaneval`)."""

    id = WORLD_ID
    family = "code"
    version = "1"
    quick_reset = True
    projects = (PROJECT,)
    description = "repair a HumanEval function with one injected bug; hidden tests decide"
    tools = tuple(TOOL_NAMES)
    anchor = "test"

    def __init__(self, *, sandbox: Sandbox | None = None) -> None:
        self.sandbox = sandbox

    def small_world(self, split: Split, seed: int, *, project: str | None = None,
                    level: int | None = None) -> SmallWorld:
        split = Split(split)
        self.check_level(level)  # no levels here: only None passes
        if project not in (None, PROJECT):
            raise WorldError(f"{WORLD_ID} has one project, {PROJECT!r}, not {project!r}")
        task_id, _family, _site = task_of(split, seed)
        # Interleaved seeds keep train, dev and test world seeds disjoint.
        world_seed = seed * len(SPLIT_OFFSET) + SPLIT_OFFSET[split]
        return SmallWorld(
            id=f"{WORLD_ID}:{PROJECT}:{split.value}:{seed}", world=WORLD_ID, family=self.family, project=PROJECT,
            split=split, seed=world_seed,
            goal=goal(load_problems()[task_id]),
            tools=list(TOOL_NAMES),
            permissions=Permissions(writable=["."], protected=["tests"]),
            inherits=[Scope(level=ScopeLevel.family, family=self.family)],
            writeback=[CarrierKind.memory, CarrierKind.skills, CarrierKind.verifier_cases, CarrierKind.dataset]
            if split == Split.train else [],
            limits=Limits(max_steps=30, max_seconds=300.0),
        )

    def make_world(self, small_world: SmallWorld) -> HumanEvalWorld:
        self.check_small_world(small_world)
        return HumanEvalWorld(seed=small_world.seed, sandbox=self.sandbox)

    def options(self) -> dict[str, JsonValue]:
        return {}

    @classmethod
    def split_sizes(cls, project: str | None = None) -> dict[Split, int | None]:
        """Distinct small worlds (problem, bug family, site) per split (from the catalog); seeds beyond wrap around."""
        return {Split(split): c["tasks"] for split, c in counts().items()}


def spec_for(small_world: SmallWorld) -> RepoSpec:
    """The repo (with its visible and hidden cases) of a small world, for calling `repo.verify` directly."""
    return HumanEvalWorld(seed=small_world.seed).build(small_world.seed)[0]


def reference_actions(small_world: SmallWorld) -> list[ActionRequest]:
    """Write the canonical solution back, run the tests, submit (for tests and demos; holds the gold)."""
    split, index = decode_world_seed(small_world.seed)
    problem = load_problems()[task_of(split, index)[0]]
    path = module_path(problem)
    return [
        ActionRequest(tool="read_file", args={"path": path}, thought="Read the buggy function."),
        ActionRequest(tool="write_file", args={"path": path, "content": problem.source},
                      thought="Restore the correct implementation.", expect="the tests pass"),
        ActionRequest(tool="run_tests", expect="all visible tests pass"),
        ActionRequest(tool="submit", expect="success"),
    ]


def counts() -> dict[str, dict[str, int]]:
    """Problems, (problem, family) pairs and distinct (problem, family, site) tasks per split."""
    out = {}
    for split in Split:
        ps = pairs(split)
        out[split.value] = {"problems": SPLIT_SIZES[split], "usable_problems": len({p[0] for p in ps}),
                            "pairs": len(ps), "tasks": sum(len(p[2]) for p in ps)}
    return out
