"""Suites: which worlds a run draws its small worlds from, and how the draw is made.

A suite is data: a small TOML file (world ids, optional projects and levels per world, the step
budget, train and eval sizes, a description). The built-in ones ship in `suites/` beside this
module; `lle run --suite FILE.toml` reads any other, naming any registered world (a plugin's too).
A run keeps the suite it started with as `runs/RUN/suite.json`, so `--resume` and the report use
exactly that suite even if the file changes later.

The draw is a pure function of (suite, seed, round, split, n): every strategy of a run, and a
resumed run, see exactly the same small worlds. Worlds are taken in turn, one family after another
(so the first draws of a suite cover its families before a family's second world). Train draws walk
a seeded shuffle of each world's whole train split (its real size, from `split_sizes()`), so a round
never repeats a task while the split has enough, and a run covers the split before anything repeats.
Evaluation always uses the same dev small worlds — the first of each world, stratified over its
projects — and the test split is never touched (it is for release evaluation).
"""

from __future__ import annotations

import hashlib
import json
import tomllib
from dataclasses import asdict, dataclass, field
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

from lle.core import Limits, RunConfig, SmallWorld, Split
from lle.errors import InvalidInputError, LleError, RegistryError
from lle.worlds.base import TaskFamily, open_family

BUILTIN_DIR = Path(__file__).parent / "suites"
"""The suites shipped in the package (`starter.toml`, `toy.toml`): the same format as a user's file."""
UNBOUNDED_SPAN = 5_000
"""Train tasks drawn from a family whose train size is unbounded or unknown (`split_sizes()` gives None)."""
FALLBACK_SPAN = 100
"""Such a family that has fewer tasks than `UNBOUNDED_SPAN` after all: the index is folded into its first 100."""
SNAPSHOT = "suite.json"
"""The parsed suite a run started with, in its run folder."""
KEYS = {"name", "description", "max_steps", "max_seconds", "train", "eval", "worlds"}
WORLD_KEYS = {"id", "projects", "levels"}


@dataclass(frozen=True)
class SuiteWorld:
    """One world of a suite; `projects` empty means all of the world's projects (its own choice per task)."""

    id: str
    projects: tuple[str, ...] = ()
    levels: tuple[str, ...] = ()
    """Difficulty levels to draw from (for the curriculum, later); empty: the family's default."""


@dataclass(frozen=True)
class Suite:
    name: str
    entries: tuple[SuiteWorld, ...]
    max_steps: int
    description: str = ""
    train_per_round: int = 8
    eval_tasks: int = 8
    max_seconds: float | None = None
    """Wall-clock safety cap per episode; None keeps each world's own. Steps, not time, end episodes."""
    source: str = field(default="", compare=False)
    """Where it was read from: a built-in name or a file's absolute path."""

    @property
    def worlds(self) -> tuple[str, ...]:
        return tuple(e.id for e in self.entries)

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


# --- reading suites ----------------------------------------------------------------------------------------


def builtin_names() -> list[str]:
    return sorted(p.stem for p in BUILTIN_DIR.glob("*.toml"))


def is_file_ref(ref: str) -> bool:
    return ref.endswith(".toml") or "/" in ref or "\\" in ref


def suite_ref(ref: str) -> str:
    """What a run stores as its suite: a built-in name as is, a file as its absolute path."""
    return str(Path(ref).expanduser().resolve()) if is_file_ref(ref) else ref


def load_suite(ref: str) -> Suite:
    """A built-in suite by name, or a suite file (`*.toml` or a path); one-line errors name the input and the fix."""
    if is_file_ref(ref):
        path = Path(ref).expanduser()
        if not path.is_file():
            raise InvalidInputError(f"suite file {ref} does not exist; pass the path of a .toml suite "
                                    f"(see docs/90-flywheel.md) or one of {', '.join(builtin_names())}")
        return parse_suite(path.read_text(encoding="utf-8"), origin=str(path.resolve()), default_name=path.stem)
    path = BUILTIN_DIR / f"{ref}.toml"
    if not path.is_file():
        raise InvalidInputError(f"no suite {ref!r}; choose one of {', '.join(builtin_names())} or pass a FILE.toml")
    return parse_suite(path.read_text(encoding="utf-8"), origin=ref, default_name=ref)


get_suite = load_suite


def parse_suite(text: str, *, origin: str, default_name: str) -> Suite:
    """Validate a suite's TOML text; every world id is checked against the registry (plugins included)."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise InvalidInputError(f"suite {origin} is not valid TOML ({err}); fix the file") from None
    unknown = sorted(set(data) - KEYS)
    if unknown:
        raise InvalidInputError(f"suite {origin}: unknown key {unknown[0]!r}; the keys are {', '.join(sorted(KEYS))}")
    for key in ("max_steps", "worlds"):
        if key not in data:
            raise InvalidInputError(f"suite {origin} has no {key!r}; add it (e.g. max_steps = 6 and "
                                    "[[worlds]] tables with id = \"toy/keys-v1\")")
    name = _typed(origin, data, "name", str, default_name)
    max_steps = _positive(origin, data, "max_steps", None)
    train = _positive(origin, data, "train", 8)
    eval_ = _positive(origin, data, "eval", 8)
    max_seconds = data.get("max_seconds")
    if max_seconds is not None and (isinstance(max_seconds, bool) or not isinstance(max_seconds, int | float)
                                    or max_seconds <= 0):
        raise InvalidInputError(f"suite {origin}: max_seconds must be a positive number of seconds; fix the file")
    worlds = data["worlds"]
    if not isinstance(worlds, list) or not worlds or not all(isinstance(w, dict) for w in worlds):
        raise InvalidInputError(f"suite {origin}: 'worlds' must be one or more [[worlds]] tables with an id; "
                                "fix the file")
    entries = tuple(_entry(origin, w) for w in worlds)
    if len({e.id for e in entries}) != len(entries):
        raise InvalidInputError(f"suite {origin} lists a world twice; list each world once (projects go in its "
                                "'projects')")
    return Suite(name=name, entries=entries, max_steps=max_steps,
                 description=_typed(origin, data, "description", str, ""), train_per_round=train,
                 eval_tasks=eval_, max_seconds=float(max_seconds) if max_seconds is not None else None,
                 source=origin)


def _typed(origin: str, data: dict[str, Any], key: str, kind: type, default: Any) -> Any:
    value = data.get(key, default)
    if not isinstance(value, kind):
        raise InvalidInputError(f"suite {origin}: {key!r} must be a {kind.__name__}; fix the file")
    return value


def _positive(origin: str, data: dict[str, Any], key: str, default: int | None) -> int:
    value = data.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidInputError(f"suite {origin}: {key!r} must be a whole number of at least 1; fix the file")
    return value


def _entry(origin: str, table: dict[str, Any]) -> SuiteWorld:
    from lle import registry

    unknown = sorted(set(table) - WORLD_KEYS)
    if unknown:
        raise InvalidInputError(f"suite {origin}: unknown key {unknown[0]!r} in a [[worlds]] table; "
                                f"the keys are {', '.join(sorted(WORLD_KEYS))}")
    world = table.get("id")
    if not isinstance(world, str):
        raise InvalidInputError(f"suite {origin}: a [[worlds]] table has no id; add id = \"family/name-v1\"")
    try:
        cls = registry.spec(world).load()
    except RegistryError:
        cls = None
    if not (isinstance(cls, type) and issubclass(cls, TaskFamily)):
        raise InvalidInputError(f"suite {origin}: unknown world {world!r}; use a world id from `lle worlds list` "
                                "(a plugin's world needs its package installed)")
    projects = _names(origin, world, table, "projects", cls.projects)
    levels = _names(origin, world, table, "levels", cls.levels)
    return SuiteWorld(world, projects, levels)


def _names(origin: str, world: str, table: dict[str, Any], key: str, known: tuple[str, ...]) -> tuple[str, ...]:
    value = table.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise InvalidInputError(f"suite {origin}: {key} of {world} must be a list of names; fix the file")
    for name in value:
        if name not in known:
            choices = ", ".join(known) or "none"
            raise InvalidInputError(f"suite {origin}: {world} has no {key[:-1]} {name!r}; its {key}: {choices}")
    return tuple(dict.fromkeys(value))


def for_run(config: RunConfig, folder: Path) -> Suite:
    """The suite of a run: the snapshot in its folder, written from `config.suite` the first time."""
    snapshot = folder / SNAPSHOT
    if snapshot.exists():
        try:
            data = json.loads(snapshot.read_text(encoding="utf-8"))
            entries = tuple(SuiteWorld(e["id"], tuple(e["projects"]), tuple(e["levels"])) for e in data["entries"])
            return Suite(**{**data, "entries": entries})
        except (ValueError, KeyError, TypeError) as err:
            raise InvalidInputError(f"{snapshot} is not a suite snapshot ({err}); it was edited by hand or is "
                                    "damaged") from err
    loaded = load_suite(config.suite)
    folder.mkdir(parents=True, exist_ok=True)
    snapshot.write_text(json.dumps(loaded.as_json(), indent=2), encoding="utf-8")
    return loaded


# --- the draw ----------------------------------------------------------------------------------------------


@cache
def family(world_id: str) -> TaskFamily:
    return open_family(world_id)


def train_size(world_id: str) -> int | None:
    """The world's number of train tasks; None when unbounded or unknown."""
    size = family(world_id).split_sizes().get(Split.train)
    if size is not None and size < 1:
        raise InvalidInputError(f"{world_id} has no train tasks; remove it from the suite")
    return size


def strata(suite: Suite) -> list[SuiteWorld]:
    """The suite's worlds in drawing order: one world of each family in turn, then the next of each."""
    by_family: dict[str, list[SuiteWorld]] = {}
    for entry in suite.entries:
        by_family.setdefault(family(entry.id).family, []).append(entry)
    columns = list(by_family.values())
    return [col[i] for i in range(max(len(c) for c in columns)) for col in columns if i < len(col)]


@lru_cache(maxsize=64)
def _shuffle(seed: int, salt: str, size: int) -> tuple[int, ...]:
    """A seeded permutation of range(size), from sha256 (the same on every machine and Python)."""
    return tuple(sorted(range(size), key=lambda i: hashlib.sha256(f"{seed}/{salt}/{i}".encode()).digest()))


def _train_index(world_id: str, seed: int, salt: str, position: int) -> int:
    size = train_size(world_id)
    order = _shuffle(seed, f"{salt}{world_id}", size or UNBOUNDED_SPAN)
    return order[position % len(order)]  # the same cycle each pass: any len(order) positions in a row are distinct


def _project_and_rank(projects: tuple[str, ...], position: int) -> tuple[str | None, int]:
    """Positions of a world spread over its projects in turn: (project, the position within that project)."""
    if not projects:
        return None, position
    return projects[position % len(projects)], position // len(projects)


def draw(suite: Suite, split: Split, n: int, *, seed: int, round_: int,
         max_steps: int | None = None) -> list[SmallWorld]:
    """`n` small worlds of `split`, the suite's worlds taken in turn (see the module docstring)."""
    if split is Split.test:
        raise InvalidInputError("the test split is for release evaluation only; the flywheel draws train and dev")
    order = strata(suite)
    out = []
    for i in range(n):
        if split is Split.train:
            # Draw t of the run, round by round from round 1 (round 0 has no training; a benchmark drawing
            # train at round 0 gets round 1's); each world walks its own shuffled train split.
            t = max(round_ - 1, 0) * n + i
            entry = order[t % len(order)]
            project, rank = _project_and_rank(entry.projects, t // len(order))
            index = _train_index(entry.id, seed, "", rank)
        else:
            # The same first dev tasks every round, spread over each world's projects.
            entry = order[i % len(order)]
            projects = entry.projects or family(entry.id).projects
            project, index = _project_and_rank(projects, i // len(order))
            dev_size = family(entry.id).split_sizes().get(split)
            if dev_size is not None and index >= dev_size:
                raise InvalidInputError(f"{entry.id} has {dev_size} {split.value} tasks, fewer than the run asks of "
                                        "it; lower --eval")
        out.append(_small_world(suite, entry.id, split, index, project, max_steps or suite.max_steps))
    return out


def draw_for_skill(suite: Suite, family_name: str, n: int, *, seed: int, round_: int,
                   max_steps: int | None = None) -> list[SmallWorld]:
    """`n` train small worlds of the suite's worlds of `family_name`, for an A/B replay (skill or recipe),
    drawn apart from the round's train draw; empty when the suite has no world of that family."""
    worlds = [e for e in strata(suite) if family(e.id).family == family_name]
    if not worlds:
        return []
    out = []
    for i in range(n):
        t = max(round_ - 1, 0) * n + i
        entry = worlds[t % len(worlds)]
        project, rank = _project_and_rank(entry.projects, t // len(worlds))
        out.append(_small_world(suite, entry.id, Split.train, _train_index(entry.id, seed, "skills/", rank),
                                project, max_steps or suite.max_steps))
    return out


def _small_world(suite: Suite, world: str, split: Split, index: int, project: str | None,
                 max_steps: int) -> SmallWorld:
    fam = family(world)
    bounded = fam.split_sizes().get(split) is not None
    candidates = (index,) if bounded or split is not Split.train else (index, index % FALLBACK_SPAN)
    error: LleError | None = None
    for candidate in candidates:
        try:
            sw = fam.small_world(split, candidate, project=project)
        except LleError as err:
            error = err
            continue
        # Steps end episodes; time is only a safety cap (the suite's, else the world's own).
        limits = Limits(max_steps=max_steps, max_seconds=suite.max_seconds or sw.limits.max_seconds)
        return sw.model_copy(update={"limits": limits})
    raise InvalidInputError(f"{world} gives no {split.value} small world {index} ({error}); "
                            f"check `lle worlds show {world}`")
