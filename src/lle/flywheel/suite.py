"""Suites: which worlds a run draws its small worlds from, and how the draw is made.

A suite is data: a small TOML file (world ids, optional projects and levels per world, the step
budget, train and eval sizes, a description). The built-in ones ship in `suites/` beside this
module; `lle run --suite FILE.toml` reads any other, naming any registered world (a plugin's too).
A run keeps the suite it started with as `runs/RUN/suite.json`, so `--resume` and the report use
exactly that suite even if the file changes later.

The draw is a pure function of (suite, seed, round, split, n): every strategy of a run, and a
resumed run, see exactly the same small worlds. Worlds are taken in turn, one family after another
(so the first draws of a suite cover its families before a family's second world). Train draws walk
a seeded shuffle of each world's whole train split (its real size, from `split_sizes(project)`: a world whose
tasks come from a project has a finite split per project, and no draw goes past it), so a round never repeats
a task while the split has enough, and a run covers the split before anything repeats.
Evaluation always uses the same dev small worlds — the first of each world, stratified over its
projects — and the test split is never touched (it is for release evaluation). The monitor's watch set is
drawn the same stratified way from the train split (`draw_watch`).
"""

from __future__ import annotations

import hashlib
import json
import tomllib
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

from lle.config import RunConfig
from lle.core import Limits, SmallWorld, Split
from lle.errors import InvalidInputError, LleError, RegistryError
from lle.worlds.base import TaskFamily, cut, open_family, sizes_of

BUILTIN_DIR = Path(__file__).parent / "suites"
"""The suites shipped in the package (`starter.toml`, `toy.toml`): the same format as a user's file."""
UNBOUNDED_SPAN = 5_000
"""Train tasks drawn from a family whose train size is unbounded or unknown (`split_sizes()` gives None)."""
LEVEL_SPAN = 1_000
"""Tasks a level's train split is probed for (a level declares no size): one with more counts as unbounded
and its train draws walk a shuffle of its first `LEVEL_SPAN` tasks."""
HELD_OUT_SPAN = 200
"""The same for a level's dev (and test) split: held-out sets take at most this many tasks of one level (finding
more would mean generating ten times as many tasks, most of them train)."""
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
    levels: tuple[int, ...] = ()
    """Difficulty levels the run may draw, easiest first (indices of the family's `levels`): the curriculum
    walks them on train and the held-out set is stratified over them; empty: the family's unlevelled tasks."""


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
    except RegistryError as err:
        if world in registry.ids():  # registered, but it failed to load or breaks the world contract
            raise InvalidInputError(f"suite {origin}: {str(err).splitlines()[0]}") from None
        cls = None
    if not (isinstance(cls, type) and issubclass(cls, TaskFamily)):
        raise InvalidInputError(f"suite {origin}: unknown world {world!r}; use a world id from `lle worlds list` "
                                "(a plugin's world needs its package installed)")
    projects = _names(origin, world, table, "projects", cls.projects)
    return SuiteWorld(world, projects, _levels(origin, world, table.get("levels", []), len(cls.levels)))


def _levels(origin: str, world: str, value: Any, declared: int) -> tuple[int, ...]:
    """Level indices, e.g. `levels = [0, 1]`; each must be one the world declares."""
    if not isinstance(value, list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        raise InvalidInputError(f"suite {origin}: levels of {world} must be a list of level numbers, e.g. "
                                "levels = [0, 1]; fix the file")
    for level in value:
        if not 0 <= level < declared:
            have = f"0..{declared - 1}" if declared else "none"
            raise InvalidInputError(f"suite {origin}: {world} has no level {level}; its levels: {have} "
                                    f"(`lle worlds show {world}`)")
    return tuple(sorted(set(value)))


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
            entries = tuple(SuiteWorld(e["id"], tuple(e["projects"]), tuple(int(v) for v in e["levels"]))
                            for e in data["entries"])
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


def split_size(world_id: str, split: Split, project: str | None = None) -> int | None:
    """The world's number of `split` tasks in `project` (None: the tasks it cuts without one); None when unbounded
    or unknown."""
    return sizes_of(family(world_id), project)[split]


def train_size(world_id: str, level: int | None = None, project: str | None = None) -> int | None:
    """The world's number of train tasks (at `level`, in `project`); None when unbounded or unknown."""
    size = split_size(world_id, Split.train, project) if level is None else level_size(world_id, level, Split.train)
    if size is not None and size < 1:
        where = ("" if level is None else f" at level {level}") + ("" if project is None else f" in {project}")
        raise InvalidInputError(f"{world_id} has no train tasks{where}; remove it from the suite")
    return size


@cache
def level_size(world_id: str, level: int, split: Split) -> int | None:
    """Tasks of `split` at `level`, found by probing (a level is a generator and declares no size): None when
    it has at least `UNBOUNDED_SPAN`, the draw's horizon."""
    fam = family(world_id)
    span = LEVEL_SPAN if split is Split.train else HELD_OUT_SPAN

    def exists(seed: int) -> bool:
        try:
            cut(fam, split, seed, level=level)
        except LleError:
            return False
        return True

    if exists(span - 1):
        return None
    low, high = 0, span - 1  # seeds below `low` exist, `high` does not
    while low < high:
        mid = (low + high) // 2
        low, high = (mid + 1, high) if exists(mid) else (low, mid)
    return low


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


def _train_index(world_id: str, seed: int, salt: str, position: int, level: int | None = None,
                 project: str | None = None) -> int:
    size = train_size(world_id, level, project)
    span = UNBOUNDED_SPAN if level is None else LEVEL_SPAN
    order = _shuffle(seed, f"{salt}{world_id}" + ("" if level is None else f"/L{level}"), size or span)
    return order[position % len(order)]  # the same cycle each pass: any len(order) positions in a row are distinct


def _project_and_rank(projects: tuple[str, ...], position: int) -> tuple[str | None, int]:
    """Positions of a world spread over its projects in turn: (project, the position within that project)."""
    if not projects:
        return None, position
    return projects[position % len(projects)], position // len(projects)


Levels = Mapping[str, int]
"""The curriculum's level per family for a train draw (families absent: their worlds' easiest suite level)."""


def train_level(entry: SuiteWorld, levels: Levels | None) -> int | None:
    """The level a train draw of `entry` takes: the curriculum's for its family, clamped to the suite's levels."""
    if not entry.levels:
        return None
    wanted = (levels or {}).get(family(entry.id).family)
    if wanted is None:
        return entry.levels[0]
    return min(entry.levels, key=lambda lv: (abs(lv - wanted), lv))


def held_out_cells(suite: Suite, entry: SuiteWorld, split: Split) -> list[tuple[int | None, str | None, int]]:
    """`entry`'s held-out tasks in drawing order, as (level, project, index): its levels and projects taken in
    turn (stratified), a cell that runs out of tasks skipped, so small levels give what they have."""
    projects: tuple[str | None, ...] = entry.projects or family(entry.id).projects or (None,)
    # Levels vary fastest: a small held-out set still spans the levels (where the learning shows).
    cells = [(lv, pr) for pr in projects for lv in (entry.levels or (None,))]
    sizes = [split_size(entry.id, split, pr) if lv is None
             else level_size(entry.id, lv, split) or HELD_OUT_SPAN for lv, pr in cells]
    out: list[tuple[int | None, str | None, int]] = []
    for rank in range(UNBOUNDED_SPAN):
        open_cells = [(c, size) for c, size in zip(cells, sizes, strict=True) if size is None or rank < size]
        if not open_cells:
            break
        out += [(lv, pr, rank) for (lv, pr), _ in open_cells]
        if len(out) >= MAX_HELD_OUT_PER_WORLD:
            break
    return out


MAX_HELD_OUT_PER_WORLD = 2_000
"""Held-out tasks listed per world at most (far above any eval size a run asks for)."""


def _held_out(suite: Suite, order: list[SuiteWorld], split: Split, n: int,
              fix: str | None = "lower --eval") -> list[tuple[SuiteWorld, tuple[int | None, str | None, int]]]:
    """The first `n` held-out tasks: the worlds taken in turn, each stratified over its levels and projects; a
    world out of tasks (a small level) is passed over, so the others fill its places. Fewer than `n` in all: an
    error saying `fix`, or (`fix=None`) all there are."""
    cells = {e.id: held_out_cells(suite, e, split) for e in order}
    out: list[tuple[SuiteWorld, tuple[int | None, str | None, int]]] = []
    for k in range(max(len(c) for c in cells.values())):
        out += [(e, cells[e.id][k]) for e in order if k < len(cells[e.id])]
        if len(out) >= n:
            return out[:n]
    if fix is None:
        return out
    raise InvalidInputError(f"the suite has {len(out)} {split.value} tasks at its levels, fewer than the run asks "
                            f"for ({n}); {fix}")


def draw(suite: Suite, split: Split, n: int, *, seed: int, round_: int,
         max_steps: int | None = None, levels: Levels | None = None) -> list[SmallWorld]:
    """`n` small worlds of `split`, the suite's worlds taken in turn (see the module docstring); train draws
    take each family's curriculum level from `levels`."""
    if split is Split.test:
        raise InvalidInputError("the test split is for release evaluation only; the flywheel draws train and dev")
    order = strata(suite)
    held_out = [] if split is Split.train else _held_out(suite, order, split, n)
    out = []
    for i in range(n):
        if split is Split.train:
            # Draw t of the run, round by round from round 1 (round 0 has no training; a benchmark drawing
            # train at round 0 gets round 1's); each world walks its own shuffled train split (per level).
            t = max(round_ - 1, 0) * n + i
            entry = order[t % len(order)]
            project, rank = _project_and_rank(entry.projects, t // len(order))
            level = train_level(entry, levels)
            index = _train_index(entry.id, seed, "", rank, level, project)
        else:
            entry, (level, project, index) = held_out[i]
        out.append(_small_world(suite, entry.id, split, index, project, max_steps or suite.max_steps, level))
    return out


def draw_watch(suite: Suite, n: int, *, seed: int, max_steps: int | None = None) -> list[SmallWorld]:
    """The monitor's watch set: `n` train small worlds stratified like the held-out set (the worlds in turn, each
    over its levels and projects), each cell walking its own seeded shuffle of the train split. Fixed for the run,
    so an activation's later effect is measured on train tasks and held-out outcomes never decide what is kept.
    A suite with fewer train tasks (a project's finite split) watches all of them."""
    out = []
    for entry, (level, project, rank) in _held_out(suite, strata(suite), Split.train, n, None):
        index = _train_index(entry.id, seed, "watch/", rank, level, project)
        out.append(_small_world(suite, entry.id, Split.train, index, project, max_steps or suite.max_steps, level))
    return out


def draw_for_skill(suite: Suite, family_name: str, n: int, *, seed: int, round_: int, max_steps: int | None = None,
                   levels: Levels | None = None, world: str | None = None) -> list[SmallWorld]:
    """`n` train small worlds of the suite's worlds of `family_name` (only `world`, when given: a program skill's),
    for an A/B replay (skill or recipe), drawn apart from the round's train draw; empty when the suite has none."""
    worlds = [e for e in strata(suite) if family(e.id).family == family_name and world in (None, e.id)]
    if not worlds:
        return []
    out = []
    for i in range(n):
        t = max(round_ - 1, 0) * n + i
        entry = worlds[t % len(worlds)]
        project, rank = _project_and_rank(entry.projects, t // len(worlds))
        level = train_level(entry, levels)
        index = _train_index(entry.id, seed, "skills/", rank, level, project)
        out.append(_small_world(suite, entry.id, Split.train, index, project, max_steps or suite.max_steps, level))
    return out


def _small_world(suite: Suite, world: str, split: Split, index: int, project: str | None,
                 max_steps: int, level: int | None = None) -> SmallWorld:
    fam = family(world)
    bounded = (split_size(world, split, project) if level is None else level_size(world, level, split)) is not None
    candidates = (index,) if bounded or split is not Split.train else (index, index % FALLBACK_SPAN)
    error: LleError | None = None
    for candidate in candidates:
        try:
            sw = cut(fam, split, candidate, project=project, level=level)
        except LleError as err:
            error = err
            continue
        # Steps end episodes; time is only a safety cap (the suite's, else the world's own).
        limits = Limits(max_steps=max_steps, max_seconds=suite.max_seconds or sw.limits.max_seconds)
        return sw.model_copy(update={"limits": limits})
    raise InvalidInputError(f"{world} gives no {split.value} small world {index} ({error}); "
                            f"check `lle worlds show {world}`")
