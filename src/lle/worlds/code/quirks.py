"""`code/quirks-v1`: write or fix a money function in a generated project that has one quirk.

Projects and quirks are in `projects.py`. A task is (project, seed): the seed picks a template, the
mode (write a new function, or fix one that breaks the project's convention), the business
parameters and the inputs. The visible tests show the quirk (a Decimal result, an env var per case,
another config file, a camelCase import); the hidden ones use other inputs and other env/config
values, so neither hard-coded answers nor hard-coded digits or rates pass.
"""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Literal

from pydantic import JsonValue

from lle.core import ActionRequest, CarrierKind, Limits, Permissions, Scope, ScopeLevel, SmallWorld, Split
from lle.errors import WorldError
from lle.sandbox import Sandbox
from lle.worlds.base import TaskFamily
from lle.worlds.code.projects import (
    CONFIG_VAR,
    DEFAULT_RULES,
    DIGITS_VAR,
    PROJECTS,
    TEMPLATES,
    Project,
    Rules,
    Template,
    convert,
    expected,
    function_name,
    module_text,
    near_tie,
    render,
)
from lle.worlds.code.repo import TOOL_NAMES, Case, RepoSpec, RepoWorld
from lle.worlds.code.runner import encode

WORLD_ID = "code/quirks-v1"
PROJECT_NAMES = tuple(PROJECTS)
SPLIT_OFFSET = {Split.train: 0, Split.dev: 1, Split.test: 2}
ALT_CONFIG = "tests/fixtures/alt.json"
HIDDEN_CONFIG = "fixtures/anchor.json"
"""Only in the anchor's folder: the agent never sees these values."""
N_INPUTS = 4


@dataclass(frozen=True)
class QuirkTask:
    project: Project
    template: Template
    example: Template
    """Another template, already written in the module the project's way (the convention by example)."""
    mode: Literal["write", "fix"]
    params: dict[str, int]
    alt_params: dict[str, int]
    hidden_params: dict[str, int]
    visible: tuple[tuple[dict[str, str], tuple[Any, ...]], ...]
    """(env, exact args) per visible case."""
    hidden: tuple[tuple[dict[str, str], tuple[Any, ...]], ...]

    @property
    def module_path(self) -> str:
        return f"{self.project.package}/{self.project.module}.py"

    def params_for(self, env: dict[str, str]) -> dict[str, int]:
        return {ALT_CONFIG: self.alt_params, HIDDEN_CONFIG: self.hidden_params}.get(env.get(CONFIG_VAR, ""),
                                                                                   self.params)


def _other(rng: random.Random, choices: tuple[int, ...], avoid: set[int]) -> int:
    return rng.choice([c for c in choices if c not in avoid] or list(choices))


def _envs(project: Project, hidden: bool) -> list[dict[str, str]]:
    if project.rules.money == "digits_env":
        return [{DIGITS_VAR: d} for d in (("4", "0", "1", "3") if hidden else ("1", "3", "0", "2"))]
    if project.rules.params == "config":
        return [{CONFIG_VAR: HIDDEN_CONFIG}] * 3 + [{}] if hidden else [{}, {}, {CONFIG_VAR: ALT_CONFIG},
                                                                        {CONFIG_VAR: ALT_CONFIG}]
    return [{}] * N_INPUTS


@lru_cache(maxsize=4096)
def make_task(project_name: str, world_seed: int) -> QuirkTask:
    """The task for (project, world seed): a pure function of both, the same on every machine."""
    if project_name not in PROJECTS:
        raise WorldError(f"{WORLD_ID} has no project {project_name!r}; use one of {', '.join(PROJECT_NAMES)}")
    project = PROJECTS[project_name]
    rng = random.Random(f"{WORLD_ID}:{project_name}:{world_seed}")
    keys = sorted(TEMPLATES)
    choices = {k: v for t in TEMPLATES.values() for k, v in t.choices.items()}
    split = decode_world_seed(world_seed)
    for _ in range(1000):
        # Draw until the task's key falls in this seed's split: a goal never appears in two splits.
        template = TEMPLATES[rng.choice(keys)]
        mode: Literal["write", "fix"] = rng.choice(["write", "fix"])
        params = {k: rng.choice(v) for k, v in sorted(choices.items())}
        if split_of_key(project_name, template, mode, params) == split:
            break
    example = TEMPLATES[rng.choice([k for k in keys if k != template.key])]
    alt = {k: _other(rng, v, {params[k]}) for k, v in sorted(choices.items())}
    hidden = {k: _other(rng, v, {params[k], alt[k]}) for k, v in sorted(choices.items())}
    task = QuirkTask(project, template, example, mode, params, alt, hidden, (), ())
    for _ in range(200):
        visible = tuple(zip(_envs(project, False), (template.inputs(rng) for _ in range(N_INPUTS)), strict=True))
        held = tuple(zip(_envs(project, True), (template.inputs(rng) for _ in range(N_INPUTS)), strict=True))
        task = QuirkTask(project, template, example, mode, params, alt, hidden, visible, held)
        if _usable(task):
            return task
    raise WorldError(f"{WORLD_ID}: no usable inputs for {project_name} seed {world_seed}")  # pragma: no cover


def split_of_key(project: str, template: Template, mode: str, params: dict[str, int]) -> Split:
    """60/20/20 by sha256 of what the goal says (project, template, mode, the template's parameters)."""
    key = json.dumps([WORLD_ID, project, template.key, mode, {k: params[k] for k in sorted(template.choices)}])
    bucket = int(hashlib.sha256(key.encode()).hexdigest()[:8], 16) % 10
    return Split.train if bucket < 6 else Split.dev if bucket < 8 else Split.test


def _usable(task: QuirkTask) -> bool:
    """No rounding near a tie; both sides of the condition shown; the convention-breaking code fails."""
    t, rules = task.template, task.project.rules
    for env, args in (*task.visible, *task.hidden):
        if near_tie(t.compute(task.params_for(env), args), _digits(rules, env)):
            return False
    if t.branch is not None and len({t.branch(task.params_for(e), a) for e, a in task.visible}) < 2:
        return False
    return all(any(_violation_differs(task, env, args) for env, args in cases)
               for cases in (task.visible, task.hidden))


def _digits(rules: Rules, env: dict[str, str]) -> int:
    return int(env[DIGITS_VAR]) if rules.money == "digits_env" else 2


def _violation_differs(task: QuirkTask, env: dict[str, str], args: tuple[Any, ...]) -> bool:
    # The convention-breaking code uses the task's literal parameters and two digits.
    rules = task.project.rules
    if rules.money == "decimal" or rules.naming == "camel":
        return True  # a float result or a snake_case name fails every case
    right = expected(task.template.compute(task.params_for(env), args), rules, _digits(rules, env))
    wrong = expected(task.template.compute(task.params, args), rules, 2)
    return right != wrong


def cases(task: QuirkTask, hidden: bool) -> tuple[Case, ...]:
    rules, name = task.project.rules, function_name(task.template, task.project.rules)
    module = f"{task.project.package}.{task.project.module}"
    rows = task.hidden if hidden else task.visible
    return tuple(
        Case(f"{'h' if hidden else 'v'}{i}", module, name, encode(convert(args, rules)),
             encode(expected(task.template.compute(task.params_for(env), args), rules, _digits(rules, env))), env)
        for i, (env, args) in enumerate(rows))


def _config(values: dict[str, int]) -> str:
    return json.dumps(values, indent=2, sort_keys=True) + "\n"


def _test_file(task: QuirkTask, visible: tuple[Case, ...]) -> str:
    p, name = task.project, function_name(task.template, task.project.rules)
    rows = "\n".join(f"    ({json.dumps(dict(c.env), sort_keys=True)}, {c.args}, {c.expected})," for c in visible)
    return f'''"""Visible tests for {task.module_path}; the run_tests tool runs them.

Each case sets the environment variables shown, calls `{name}(*args)` and expects exactly the
result, type included. Grading runs these cases and hidden ones with other inputs and settings.
"""

import os
from decimal import Decimal

from {p.package}.{p.module} import {name}

CASES = [
    # (environment, args, expected)
{rows}
]


def test_{task.template.key}():
    for env, args, expected in CASES:
        os.environ.update(env)
        got = {name}(*args)
        assert type(got) is type(expected) and got == expected, (env, args, got, expected)
'''


def task_files(task: QuirkTask, module_source: str) -> dict[str, str]:
    p = task.project
    files = {
        "README.md": (f"# {p.name}\n\nMoney functions of the {p.name} project live in `{p.package}/`; their tests "
                      "are in `tests/` (run them with the run_tests tool). Read CONVENTIONS.md before changing "
                      "code.\n"),
        "CONVENTIONS.md": p.conventions,
        f"{p.package}/__init__.py": f'"""The {p.name} project."""\n',
        task.module_path: module_source,
        f"tests/test_{p.module}.py": _test_file(task, cases(task, hidden=False)),
    }
    if p.helper is not None:
        files[f"{p.package}/{p.helper[0]}"] = p.helper[1]
    if p.rules.params == "config":
        files["gateway.json"] = _config(task.params)
        files[ALT_CONFIG] = _config(task.alt_params)
    return files


def start_module(task: QuirkTask) -> str:
    p = task.project
    functions = [render(task.example, task.params, p.rules, p.package)]
    if task.mode == "fix":
        functions.append(render(task.template, task.params, DEFAULT_RULES, p.package))
    return module_text(p, functions)


def solution_module(task: QuirkTask, rules: Rules | None = None) -> str:
    """The module with the task's function written under `rules` (default: the project's own; the gold)."""
    p = task.project
    return module_text(p, [render(task.example, task.params, p.rules, p.package),
                           render(task.template, task.params, rules or p.rules, p.package)])


def task_spec(task: QuirkTask) -> RepoSpec:
    files = task_files(task, start_module(task))
    fixtures = {HIDDEN_CONFIG: _config(task.hidden_params)} if task.project.rules.params == "config" else {}
    protected = tuple(sorted({"tests", *(f for f in files if f != task.module_path and not f.startswith("tests/"))}))
    return RepoSpec(files=files, editable=(task.module_path,), protected=protected, import_paths=(".",),
                    visible=cases(task, hidden=False), hidden=cases(task, hidden=True), compare="strict",
                    fixtures=fixtures)


def goal(task: QuirkTask) -> str:
    what, where = task.template.describe(task.params), task.module_path
    if task.mode == "write":
        head = f"Add the *{task.template.words}* function to {where}: {what}."
    else:
        head = f"The *{task.template.words}* function in {where} fails its tests; fix it. What it must do: {what}."
    return head + " Follow the project's conventions (CONVENTIONS.md), check with run_tests, then call submit."


def decode_world_seed(world_seed: int) -> Split:
    return next(s for s, o in SPLIT_OFFSET.items() if o == world_seed % len(SPLIT_OFFSET))


class QuirksWorld(RepoWorld):
    """One project's repo; `reset(seed)` builds the task for that world seed."""

    def __init__(self, project: str, *, seed: int, sandbox: Sandbox | None = None) -> None:
        if project not in PROJECTS:
            raise WorldError(f"{WORLD_ID} has no project {project!r}; use one of {', '.join(PROJECT_NAMES)}")
        super().__init__(seed=seed, sandbox=sandbox)
        self.project = project

    def build(self, seed: int) -> tuple[RepoSpec, dict[str, Any]]:
        task = make_task(self.project, seed)
        return task_spec(task), {"project": self.project, "template": task.template.key, "mode": task.mode}


class QuirksFamily(TaskFamily):
    """Task family `code/quirks-v1`: projects ledger, storefront, gateway, legacy (see projects.py)."""

    id = WORLD_ID
    family = "code"
    version = "1"
    quick_reset = True
    projects = PROJECT_NAMES
    description = "write or fix a money function the project's way (each project has its own quirk)"
    tools = tuple(TOOL_NAMES)
    anchor = "test"

    def __init__(self, *, sandbox: Sandbox | None = None) -> None:
        self.sandbox = sandbox

    def small_world(self, split: Split, seed: int, *, project: str | None = None,
                    level: int | None = None) -> SmallWorld:
        split = Split(split)
        self.check_level(level)  # no levels here: only None passes
        if seed < 0:
            raise WorldError(f"{WORLD_ID}: seed {seed} is negative; use 0, 1, 2, …")
        project = project or PROJECT_NAMES[seed % len(PROJECT_NAMES)]
        # Interleaved seeds keep train, dev and test world seeds disjoint.
        world_seed = seed * len(SPLIT_OFFSET) + SPLIT_OFFSET[split]
        task = make_task(project, world_seed)
        return SmallWorld(
            id=f"{WORLD_ID}:{project}:{split.value}:{seed}", world=WORLD_ID, family=self.family, project=project,
            split=split, seed=world_seed, goal=goal(task), tools=list(TOOL_NAMES),
            permissions=Permissions(writable=["."], protected=list(task_spec(task).protected)),
            inherits=[Scope(level=ScopeLevel.project, family=self.family, project=project),
                      Scope(level=ScopeLevel.family, family=self.family)],
            writeback=[CarrierKind.memory, CarrierKind.rules, CarrierKind.skills, CarrierKind.verifier_cases,
                       CarrierKind.dataset] if split == Split.train else [],
            limits=Limits(max_steps=30, max_seconds=300.0),
        )

    def make_world(self, small_world: SmallWorld) -> QuirksWorld:
        self.check_small_world(small_world)
        return QuirksWorld(small_world.project, seed=small_world.seed, sandbox=self.sandbox)

    def options(self) -> dict[str, JsonValue]:
        return {}



def spec_for(small_world: SmallWorld) -> RepoSpec:
    """The repo (with its visible and hidden cases) of a small world, for calling `repo.verify` directly."""
    return task_spec(make_task(small_world.project, small_world.seed))


def reference_actions(small_world: SmallWorld) -> list[ActionRequest]:
    """Read the conventions, write the function the project's way, run the tests, submit (holds the gold)."""
    task = make_task(small_world.project, small_world.seed)
    return [
        ActionRequest(tool="read_file", args={"path": "CONVENTIONS.md"}, thought="Learn the project's rules."),
        ActionRequest(tool="write_file", args={"path": task.module_path, "content": solution_module(task)},
                      thought="Write the function the project's way.", expect="the tests pass"),
        ActionRequest(tool="run_tests", expect="all visible tests pass"),
        ActionRequest(tool="submit", expect="success"),
    ]
