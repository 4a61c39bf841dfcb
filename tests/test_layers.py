"""Imports point one way through the house (DESIGN §2), and no module imports itself round a circle.

Every `import` and `from … import` under src/lle counts, wherever it stands: at the top, inside a
function (a lazy import is still an arrow), or under `if TYPE_CHECKING:`. Each module belongs to
its package (`lle.worlds.code.repo` to `lle.worlds`); a package may import only from its own floor
or the floors below it in `ORDER`. On top of that, the carriers store and retrieve and never run
an episode, so they import neither the runtime nor the policies, though both sit below them.

The checker is tested on small made-up trees too, so that it cannot pass by seeing nothing.
"""

from __future__ import annotations

import ast
import itertools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"

ORDER: tuple[tuple[str, ...], ...] = (
    ("lle", "lle.core", "lle.config", "lle.errors", "lle.actions", "lle.registry"),
    ("lle.store", "lle.workspace"),
    ("lle.sandbox",),
    ("lle.context",),
    ("lle.policies",),
    ("lle.worlds",),
    ("lle.runtime",),
    ("lle.evidence",),
    ("lle.governance",),
    ("lle.carriers",),
    ("lle.router",),
    ("lle.train",),  # weights training: the CLI imports it on demand (the [train] extra)
    ("lle.flywheel", "lle.population"),  # a population reuses the flywheel's skill replays
    ("lle.cli", "lle.viewer", "lle.gateway"),  # the viewer and the gateway: servers beside the CLI
)
"""Floors, bottom first: a package imports from its own floor and those below, never above."""

FORBIDDEN: Mapping[str, frozenset[str]] = {
    "lle.carriers": frozenset({"lle.runtime", "lle.policies"}),  # carriers never run episodes
}


@dataclass(frozen=True)
class Arrow:
    """`source` imports `target` (both module names) at `line` of the source."""

    source: str
    line: int
    target: str

    def __str__(self) -> str:
        return f"{self.source}:{self.line} -> {self.target}"


@dataclass(frozen=True)
class Module:
    name: str
    is_package: bool
    source: str


def read_tree(root: Path = SRC) -> list[Module]:
    """Every module under root/lle, named as Python imports it."""
    out = []
    for path in sorted((root / "lle").rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        name = ".".join(parts[:-1] if is_package else parts)
        out.append(Module(name, is_package, path.read_text(encoding="utf-8")))
    return out


def _known(name: str, known: set[str]) -> str | None:
    """The module itself, else its nearest known parent (`lle.x.Name` -> `lle.x`); None outside lle."""
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def arrows(modules: Iterable[Module]) -> list[Arrow]:
    """Every import of an lle module by an lle module, function-local and TYPE_CHECKING ones included."""
    modules = list(modules)
    known = {m.name for m in modules}
    out = []
    for module in modules:
        for node in ast.walk(ast.parse(module.source, module.name)):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:  # relative: from the module's package, one level up per extra dot
                    package = module.name.split(".") if module.is_package else module.name.split(".")[:-1]
                    package = package[:len(package) - (node.level - 1)]
                    base = ".".join([*package, *([node.module] if node.module else [])])
                # `from lle.x import y` imports the module lle.x.y when there is one, else a name of lle.x
                targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base
                           for alias in node.names]
            for target in targets:
                found = _known(target, known)
                if found is not None and found != module.name:
                    out.append(Arrow(module.name, node.lineno, found))
    return out


def package_of(module: str) -> str:
    """`lle.worlds.code.repo` -> `lle.worlds`; `lle.core` -> `lle.core`; `lle` -> `lle`."""
    return ".".join(module.split(".")[:2])


def wrong_way(found: Iterable[Arrow], order: tuple[tuple[str, ...], ...] = ORDER,
              forbidden: Mapping[str, frozenset[str]] = FORBIDDEN) -> list[str]:
    """One line per arrow that points up the floors, or that a package must not draw at all."""
    floor = {package: i for i, packages in enumerate(order) for package in packages}
    problems = []
    for arrow in found:
        source, target = package_of(arrow.source), package_of(arrow.target)
        for package in (source, target):
            if package not in floor:
                problems.append(f"{arrow}: package {package} has no floor; add it to ORDER in tests/test_layers.py "
                                "(and DESIGN §2)")
        if source == target or source not in floor or target not in floor:
            continue
        if floor[target] > floor[source]:
            problems.append(f"{arrow}: {source} (floor {floor[source]}) imports {target} (floor {floor[target]}), "
                            "which is above it; move the code down or the import up")
        elif target in forbidden.get(source, frozenset()):
            problems.append(f"{arrow}: {source} must not import {target} at all")
    return sorted(set(problems))


def cycles(found: Iterable[Arrow]) -> list[str]:
    """One line per circle of modules (a strongly connected group), spelled out with its lines."""
    edges: dict[str, dict[str, int]] = {}
    for arrow in found:
        edges.setdefault(arrow.source, {}).setdefault(arrow.target, arrow.line)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def visit(root: str) -> None:  # Tarjan's algorithm, iterative: deep import chains need no recursion
        work = [(root, iter(sorted(edges.get(root, {}))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, todo = work[-1]
            step = next(todo, None)
            if step is not None:
                if step not in index:
                    index[step] = low[step] = len(index)
                    stack.append(step)
                    on_stack.add(step)
                    work.append((step, iter(sorted(edges.get(step, {})))))
                elif step in on_stack:
                    low[node] = min(low[node], index[step])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    groups.append(sorted(group))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return [_spell(group, edges) for group in sorted(groups)]


def _spell(group: list[str], edges: Mapping[str, Mapping[str, int]]) -> str:
    """The shortest circle through the group's first module, as `a:12 -> b:40 -> a`."""
    start, members = group[0], set(group)
    came_from: dict[str, str] = {}
    frontier = [start]
    while frontier and start not in came_from:
        following = []
        for node in frontier:
            for target in sorted(edges.get(node, {})):
                if target in members and target not in came_from:
                    came_from[target] = node
                    following.append(target)
        frontier = following
    path = [start]
    while len(path) == 1 or path[-1] != start:
        path.append(came_from[path[-1]])
    path.reverse()
    hops = " -> ".join(f"{a}:{edges[a][b]}" for a, b in itertools.pairwise(path))
    return f"circle of {len(group)} modules: {hops} -> {start}"


# --- the real tree ---------------------------------------------------------------------------------


def test_imports_point_down_the_floors() -> None:
    found = arrows(read_tree())
    assert any(a.source == "lle.runtime.harness" and a.target == "lle.runtime.recorder" for a in found)
    problems = wrong_way(found)
    assert not problems, "imports that point the wrong way:\n" + "\n".join(problems)


def test_no_module_imports_itself_round_a_circle() -> None:
    problems = cycles(arrows(read_tree()))
    assert not problems, "import circles (a lazy import is still an arrow):\n" + "\n".join(problems)


def test_every_package_has_a_floor() -> None:
    floors = {package for packages in ORDER for package in packages}
    missing = {package_of(m.name) for m in read_tree()} - floors
    assert not missing, f"packages without a floor in ORDER: {sorted(missing)}"


# --- the checker itself, on made-up trees -------------------------------------------------------------


def _tree(**sources: str) -> list[Module]:
    """Modules from keyword names: `lle__core` is lle.core; a trailing `__init` makes it a package."""
    out = []
    for key, text in sources.items():
        name = key.replace("__", ".")
        is_package = name.endswith(".init")
        out.append(Module(name.removesuffix(".init"), is_package, text))
    return out


def test_an_upward_lazy_import_is_caught_with_its_line() -> None:
    tree = _tree(lle__core="import json\n\n\ndef f():\n    from lle.runtime.harness import run\n    return run\n",
                 lle__runtime__init="", lle__runtime__harness="def run(): ...\n")
    problems = wrong_way(arrows(tree))
    assert len(problems) == 1 and problems[0].startswith("lle.core:5 -> lle.runtime.harness: lle.core (floor 0)")


def test_type_checking_and_relative_imports_count() -> None:
    tree = _tree(lle__context__init="", lle__context__builder="from typing import TYPE_CHECKING\n"
                 "if TYPE_CHECKING:\n    from ..worlds import base\n",
                 lle__worlds__init="", lle__worlds__base="from . import toy\n", lle__worlds__toy="")
    found = arrows(tree)
    assert Arrow("lle.context.builder", 3, "lle.worlds.base") in found
    assert Arrow("lle.worlds.base", 1, "lle.worlds.toy") in found
    assert [p.split(":")[0] for p in wrong_way(found)] == ["lle.context.builder"]


def test_carriers_may_not_import_the_runtime_or_policies_though_both_are_below() -> None:
    tree = _tree(lle__carriers__init="", lle__carriers__skills="import lle.policies.scripted\n",
                 lle__carriers__dataset="from lle.worlds.base import open_world\n",
                 lle__policies__init="", lle__policies__scripted="", lle__worlds__init="", lle__worlds__base="")
    problems = wrong_way(arrows(tree))
    assert problems == ["lle.carriers.skills:1 -> lle.policies.scripted: lle.carriers must not import lle.policies "
                        "at all"]


def test_a_package_without_a_floor_is_named() -> None:
    tree = _tree(lle__cli__init="", lle__cli__main="from lle.gadgets import x\n", lle__gadgets__init="x = 1\n")
    assert any("package lle.gadgets has no floor" in p for p in wrong_way(arrows(tree)))


def test_a_circle_is_spelled_out_even_inside_one_package() -> None:
    tree = _tree(lle__runtime__init="",
                 lle__runtime__harness="from lle.runtime.recorder import Recorder\n",
                 lle__runtime__recorder="def resume():\n    from lle.runtime.harness import Episode\n",
                 lle__runtime__parallel="from lle.runtime import harness\n")
    found = arrows(tree)
    assert not wrong_way(found)
    assert cycles(found) == ["circle of 2 modules: lle.runtime.harness:1 -> lle.runtime.recorder:2 -> "
                             "lle.runtime.harness"]


def test_a_longer_circle_and_a_clean_tree() -> None:
    circle = _tree(lle__a="import lle.b\n", lle__b="import lle.c\n", lle__c="import lle.a\n", lle__d="import lle.a\n")
    assert cycles(arrows(circle)) == ["circle of 3 modules: lle.a:1 -> lle.b:1 -> lle.c:1 -> lle.a"]
    clean = _tree(lle__a="import lle.b\n", lle__b="import lle.c\n", lle__c="import os\n")
    assert cycles(arrows(clean)) == []
