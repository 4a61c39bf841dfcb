"""`sql/<project>-v1`: answer a question about a generated SQLite database with one SELECT query.

One registered world per project (`sql/shop-v1`, `sql/library-v1`, `sql/clinic-v1`), because each
project has its own quirks and a quirk is a project rule; all share the family `sql`, so what
holds across projects (soft deletes appear in two of them) can become a skill. Each world seed
generates its own database (schema variant + data) and question; a seed's split comes from a
stable hash of (project, seed), so train, dev and test never share a database.
"""

from __future__ import annotations

import shutil
import sqlite3
import tempfile
import weakref
from functools import lru_cache
from pathlib import Path
from typing import Any, ClassVar

from pydantic import JsonValue

from lle.core import (
    ActionRequest,
    CarrierKind,
    Limits,
    Permissions,
    Scope,
    ScopeLevel,
    SmallWorld,
    Split,
    ToolSpec,
    WorldStep,
)
from lle.errors import WorldError
from lle.worlds.base import AnchorResult, BaseWorld, TaskFamily, split_of
from lle.worlds.levels import levelled_id
from lle.worlds.sql.anchor import ANCHOR, check_sql
from lle.worlds.sql.execute import (
    DEFAULT_ROW_CAP,
    DEFAULT_TIME_LIMIT_S,
    QueryFailed,
    QueryResult,
    connect_readonly,
    run_query,
)
from lle.worlds.sql.generate import Cell, write_database
from lle.worlds.sql.levels import SHOP_LEVELS, level_task
from lle.worlds.sql.projects import PROJECTS
from lle.worlds.sql.questions import Task

SPLIT_SALT = "lle-sql-split-v1"
POOL_SIZE = 10_000
"""World seeds 0..POOL_SIZE-1 per project; each seed is one database + question."""
SHOWN_ROWS = 30
SAMPLE_ROWS = 3
MAX_CELL_CHARS = 200
TOOL_NAMES = ["list_tables", "describe_table", "run_query", "submit"]
_SQL_ARG = {"type": "object", "properties": {"sql": {"type": "string", "maxLength": 20_000}},
            "required": ["sql"], "additionalProperties": False}
TOOLS = [
    ToolSpec(name="list_tables", description="List the database's tables with their row counts.", permissions=["read"]),
    ToolSpec(name="describe_table", description="Show a table's CREATE statement and its first rows.",
             permissions=["read"],
             parameters={"type": "object", "properties": {"table": {"type": "string", "minLength": 1}},
                         "required": ["table"], "additionalProperties": False}),
    ToolSpec(name="run_query", description=f"Run one read-only SELECT and see up to {SHOWN_ROWS} rows.",
             permissions=["read"], parameters=_SQL_ARG),
    ToolSpec(name="submit", description="Submit the final SELECT query that answers the question; ends the episode.",
             permissions=[], parameters=_SQL_ARG),
]


@lru_cache(maxsize=16)
def split_seeds(project: str, split: Split) -> tuple[int, ...]:
    """World seeds of `project` that fall in `split` (a stable hash of project and seed), in increasing order."""
    return tuple(s for s in range(POOL_SIZE) if split_of(f"{SPLIT_SALT}:{project}:{s}") is split)


def _cell(value: Cell) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, bytes):
        return f"x'{value[:64].hex()}'"
    text = repr(value) if isinstance(value, float) else str(value)
    return text if len(text) <= MAX_CELL_CHARS else text[:MAX_CELL_CHARS] + "…"


def format_result(result: QueryResult, shown: int = SHOWN_ROWS) -> str:
    lines = [" | ".join(result.columns)]
    lines += [" | ".join(_cell(v) for v in row) for row in result.rows[:shown]]
    n = len(result.rows)
    if result.capped:
        lines.append(f"(showing {min(n, shown)} of more than {n} rows: row cap reached)")
    elif n > shown:
        lines.append(f"(showing {shown} of {n} rows)")
    else:
        lines.append(f"({n} row{'s' if n != 1 else ''})")
    return "\n".join(lines)


class SqlWorld(BaseWorld):
    """One SQL world instance; `reset(seed=…)` writes that seed's database into a private temp folder."""

    version = "1"

    def __init__(self, project: str, *, seed: int = 0, time_limit_s: float = DEFAULT_TIME_LIMIT_S,
                 row_cap: int = DEFAULT_ROW_CAP, level: int | None = None) -> None:
        if project not in PROJECTS:
            raise WorldError(f"sql has no project {project!r}; use one of {', '.join(PROJECTS)}")
        self.tools = list(TOOLS)
        self.project = PROJECTS[project]
        self.default_seed = seed
        self.level = level
        self.time_limit_s = time_limit_s
        self.row_cap = row_cap
        self.task: Task | None = None
        self.conn: sqlite3.Connection | None = None
        self.done = False
        self.queries = 0
        self._shadows: list[Path] | None = None
        self._folders()

    def _folders(self) -> None:
        # The workdir holds only the agent's database; shadows live apart so no tool can reach them.
        self.workdir = Path(tempfile.mkdtemp(prefix=f"lle-sql-{self.project.name}-"))
        self._private = Path(tempfile.mkdtemp(prefix=f"lle-sql-{self.project.name}-anchor-"))
        self._cleanup = weakref.finalize(self, _remove, [self.workdir, self._private])

    @property
    def db_path(self) -> Path:
        assert self.workdir is not None
        return self.workdir / f"{self.project.name}.db"

    # --- Gymnasium shape ----------------------------------------------------------------------------

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        self._close_conn()
        if self.workdir is None or not self.workdir.exists():
            self._folders()
        self.task = level_task(self.project, self.level, self.default_seed if seed is None else seed)
        write_database(self.task.db, self.db_path)
        for old in self._private.iterdir():
            old.unlink()
        self._shadows = None
        self.conn = connect_readonly(self.db_path)
        self.done = False
        self.queries = 0
        tables = [t.name for t in self.task.db.tables]
        text = (f"You are connected read-only to the {self.project.name} database ({self.db_path.name}). "
                f"Tables: {', '.join(tables)}.\nQuestion: {self.task.question.text}")
        return text, {"project": self.project.name, "variant": self.task.db.variant, "tables": tables}

    def step(self, action: ActionRequest) -> WorldStep:
        if self.task is None or self.conn is None or self.done:
            raise WorldError(f"sql/{self.project.name}-v1: step() before reset() or after the episode ended; "
                             "call reset()")
        handler = getattr(self, f"_do_{action.tool}", None)
        if handler is None:
            raise WorldError(f"sql/{self.project.name}-v1 has no tool {action.tool!r}; tools: {', '.join(TOOL_NAMES)}")
        result: WorldStep = handler(**action.args)
        return result

    def state(self) -> dict[str, JsonValue]:
        if self.task is None:
            return {}
        return {"queries": self.queries, "submitted": self.done}

    def close(self) -> None:
        self._close_conn()
        self._cleanup()

    def tools_now(self) -> list[ToolSpec]:
        """`TOOLS` with `describe_table.table` constrained to the tables the first observation named (the
        admissible-masks lever decodes it as an enum: a 135M model then cannot ask for a table that is not there)."""
        if self.task is None:
            return list(TOOLS)
        names: list[JsonValue] = [t.name for t in self.task.db.tables]
        params: dict[str, JsonValue] = {"type": "object", "properties": {"table": {"type": "string", "enum": names}},
                                        "required": ["table"], "additionalProperties": False}
        return [t.model_copy(update={"parameters": params}) if t.name == "describe_table" else t for t in TOOLS]

    # --- tools ------------------------------------------------------------------------------------

    def _do_list_tables(self) -> WorldStep:
        assert self.task is not None and self.conn is not None
        parts = []
        for table in self.task.db.tables:
            (count,) = self.conn.execute(f"SELECT COUNT(*) FROM {table.name}").fetchone()
            parts.append(f"{table.name} ({count} rows)")
        return _obs("Tables: " + ", ".join(parts) + ".")

    def _do_describe_table(self, table: str) -> WorldStep:
        assert self.task is not None and self.conn is not None
        names = {t.name.lower(): t.name for t in self.task.db.tables}
        name = names.get(table.strip().strip('"`[]').lower())
        if name is None:
            return _obs(f"error: no table named {table!r}; the tables are {', '.join(names.values())}")
        (create,) = self.conn.execute("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?",
                                      (name,)).fetchone()
        sample = run_query(self.conn, f"SELECT * FROM {name} LIMIT {SAMPLE_ROWS}", row_cap=SAMPLE_ROWS)
        return _obs(f"{create}\nFirst rows:\n{format_result(sample)}")

    def _do_run_query(self, sql: str) -> WorldStep:
        assert self.conn is not None
        self.queries += 1
        try:
            result = run_query(self.conn, sql, time_limit_s=self.time_limit_s, row_cap=self.row_cap)
        except QueryFailed as err:
            return _obs(f"error ({err.kind}): {err}")
        return _obs(format_result(result))

    def _do_submit(self, sql: str) -> WorldStep:
        verdict = self.anchor(sql)
        self.done = True
        question = self.task.question if self.task is not None else None
        quirky = question is not None and question.naive_sql != question.gold_sql  # easy levels need no quirk
        if quirky and (verdict.passed or verdict.detail.get("ignored_conventions")):
            # Confirmed either way by the anchor: these are the project's rules (rules carrier, DESIGN §5).
            verdict.detail["lessons"] = [f"In the {self.project.name} database: {q}" for q in self.project.quirks]
        if verdict.passed:
            text = "Submitted. Correct: the query's result equals the expected one."
        else:
            text = f"Submitted. Not correct: {verdict.reason}."
        return WorldStep(text, 1.0 if verdict.passed else 0.0, True, False, verdict.info())

    # --- the anchor --------------------------------------------------------------------------------

    def anchor(self, sql: str) -> AnchorResult:
        """Judge `sql` against this episode's task (the agent's database, then its shadow)."""
        assert self.task is not None
        if self._shadows is None:
            self._shadows = []
            if self.task.question.robust:
                path = self._private / f"{self.project.name}.shadow1.db"
                write_database(self.task.shadow(1), path)
                self._shadows.append(path)
        return check_sql(sql, self.task.question, [self.db_path, *self._shadows], time_limit_s=self.time_limit_s,
                         row_cap=self.row_cap)

    def _close_conn(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None


def _obs(text: str) -> WorldStep:
    return WorldStep(text, 0.0, False, False, {})


def _remove(folders: list[Path]) -> None:
    for folder in folders:
        shutil.rmtree(folder, ignore_errors=True)


class SqlFamily(TaskFamily):
    """A SQL task family for one project; subclasses fix the project and the registry id."""

    family = "sql"
    version = "1"
    quick_reset = True  # about 2 ms: the project's database is built once and copied
    tools = tuple(TOOL_NAMES)
    anchor = ANCHOR
    project: ClassVar[str]

    @classmethod
    def split_sizes(cls, project: str | None = None) -> dict[Split, int | None]:
        return {s: len(split_seeds(cls.project, s)) for s in Split}

    def __init__(self, *, time_limit_s: float = DEFAULT_TIME_LIMIT_S, row_cap: int = DEFAULT_ROW_CAP) -> None:
        self.time_limit_s = float(time_limit_s)
        self.row_cap = int(row_cap)

    def options(self) -> dict[str, JsonValue]:
        opts: dict[str, JsonValue] = {}
        if self.time_limit_s != DEFAULT_TIME_LIMIT_S:
            opts["time_limit_s"] = self.time_limit_s
        if self.row_cap != DEFAULT_ROW_CAP:
            opts["row_cap"] = self.row_cap
        return opts

    def small_world(self, split: Split, seed: int, *, project: str | None = None,
                    level: int | None = None) -> SmallWorld:
        split = Split(split)
        level = self.check_level(level)
        if project not in (None, self.project):
            raise WorldError(f"{self.id} has only the project {self.project!r}; open sql/{project}-v1 for {project!r}")
        seeds = split_seeds(self.project, split)
        if not 0 <= seed < len(seeds):
            raise WorldError(f"{self.id} has {len(seeds)} {split.value} tasks; ask for a seed in 0..{len(seeds) - 1}")
        world_seed = seeds[seed]
        task = level_task(PROJECTS[self.project], level, world_seed)
        db_name = f"{self.project}.db"
        goal = (f"{task.question.text}\n\nAnswer with one SQLite SELECT query over the {self.project} database and "
                "call `submit` with it: the query is run and its result compared with the expected one (columns in "
                "the order asked; row order matters only when the question asks for an order). Explore first with "
                "list_tables, describe_table and run_query.")
        return SmallWorld(
            id=levelled_id(self.id, split, seed, level), world=self.id, family=self.family, project=self.project,
            split=split, seed=world_seed, level=level, goal=goal, tools=list(TOOL_NAMES),
            permissions=Permissions(readable=[db_name], writable=[], protected=[db_name]),
            inherits=[Scope(level=ScopeLevel.family, family=self.family),
                      Scope(level=ScopeLevel.project, family=self.family, project=self.project)],
            # Dev and test never feed carriers (DESIGN §1).
            writeback=[CarrierKind.memory, CarrierKind.rules, CarrierKind.skills, CarrierKind.verifier_cases,
                       CarrierKind.dataset] if split is Split.train else [],
            limits=Limits(max_steps=20, max_seconds=120.0),
        )

    def make_world(self, small_world: SmallWorld) -> SqlWorld:
        self.check_small_world(small_world)
        return SqlWorld(self.project, seed=small_world.seed, time_limit_s=self.time_limit_s, row_cap=self.row_cap,
                        level=self.check_level(small_world.level))


class ShopFamily(SqlFamily):
    """`sql/shop-v1`: money in cents, soft-deleted rows."""

    id = "sql/shop-v1"
    project = "shop"
    projects = ("shop",)
    levels = SHOP_LEVELS


class LibraryFamily(SqlFamily):
    """`sql/library-v1`: DD/MM/YYYY text dates, one-letter loan status codes."""

    id = "sql/library-v1"
    project = "library"
    projects = ("library",)


class ClinicFamily(SqlFamily):
    """`sql/clinic-v1`: integer status codes, fees in cents, soft-deleted rows."""

    id = "sql/clinic-v1"
    project = "clinic"
    projects = ("clinic",)


def reference_actions(small_world: SmallWorld) -> list[ActionRequest]:
    """A solving script for a SQL small world: look around, run the gold query, submit it (tests and demos)."""
    task = level_task(PROJECTS[small_world.project], small_world.level, small_world.seed)
    first = task.db.tables[0].name
    gold = task.question.gold_sql
    return [
        ActionRequest(tool="list_tables", thought="See what is there."),
        ActionRequest(tool="describe_table", args={"table": first}),
        ActionRequest(tool="run_query", args={"sql": gold}, expect="the answer"),
        ActionRequest(tool="submit", args={"sql": gold}, expect="success"),
    ]
