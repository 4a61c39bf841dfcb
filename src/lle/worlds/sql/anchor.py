"""The SQL anchor: the submitted query's execution result must equal the gold query's.

Independent of the agent's word: both queries run on the task's database (read-only, time limit,
row cap) and, unless the answer may tie on other data, on a shadow database with the same schema
and fresh rows, so a query that hard-codes this database's answer fails. Rows are compared as a
multiset (in order when the question asks for one), numbers with a tolerance of half a cent.
A query that errs, writes, or times out fails; a gold query that cannot run gives `unknown`.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path

from pydantic import JsonValue

from lle.core import Outcome, SmallWorld
from lle.errors import WorldError
from lle.worlds.base import AnchorResult
from lle.worlds.sql.execute import (
    DEFAULT_ROW_CAP,
    DEFAULT_TIME_LIMIT_S,
    QueryFailed,
    QueryResult,
    connect_readonly,
    run_query,
    same_result,
)
from lle.worlds.sql.generate import write_database
from lle.worlds.sql.levels import level_task
from lle.worlds.sql.projects import PROJECTS
from lle.worlds.sql.questions import Question, Task

ANCHOR = "execution"
"""The kind of independent check (lle.core.Evidence.anchor)."""
CHECKER = "sql-execution"
GOLD_TIME_LIMIT_S = 10.0


def verdict(outcome: Outcome, reason: str, detail: dict[str, JsonValue]) -> AnchorResult:
    """This anchor's `AnchorResult` (its kind and checker filled in)."""
    return AnchorResult(outcome, reason, detail, anchor=ANCHOR, checker=CHECKER)


def check_sql(sql: str, question: Question, databases: Sequence[Path], *,
              time_limit_s: float = DEFAULT_TIME_LIMIT_S, row_cap: int = DEFAULT_ROW_CAP) -> AnchorResult:
    """Run `sql` and the gold on each database file (the task's first, then shadows) and compare."""
    checked: list[JsonValue] = []
    detail: dict[str, JsonValue] = {"template": question.template, "ordered": question.ordered, "databases": checked}
    if not sql.strip():
        return verdict(Outcome.failed, "empty submission: nothing to run", detail)
    for i, path in enumerate(databases):
        name = "task" if i == 0 else f"shadow{i}"
        conn = connect_readonly(path)
        try:
            try:
                want = run_query(conn, question.gold_sql, time_limit_s=GOLD_TIME_LIMIT_S, row_cap=10_000)
            except QueryFailed as err:  # the kind only: the message could quote the gold
                return verdict(Outcome.unknown, f"the reference query failed ({err.kind}) on the {name} "
                                    "database; the world is broken, not the submission", detail)
            try:
                got = run_query(conn, sql, time_limit_s=time_limit_s, row_cap=row_cap)
            except QueryFailed as err:
                detail["failure"] = err.kind
                return verdict(Outcome.failed, f"the submitted query did not run ({err.kind}): {err}", detail)
        finally:
            conn.close()
        if got.capped:
            return verdict(Outcome.failed, f"the submitted query returned more than {row_cap} rows", detail)
        match, why = same_result(got, want, ordered=question.ordered)
        checked.append({"database": name, "match": match, "rows": len(got.rows), "columns": len(got.columns)})
        if not match:
            if i == 0:
                detail["ignored_conventions"] = _matches_naive(path, question, got, time_limit_s)
                return verdict(Outcome.failed, f"result differs from the expected one: {why}", detail)
            return verdict(Outcome.failed, "right on the task's database but wrong on a second database with the "
                                "same schema: the query does not answer the question in general (hard-coded values?)",
                                detail)
    return verdict(Outcome.passed, "result equals the expected one on every database checked", detail)


def _matches_naive(path: Path, question: Question, got: QueryResult, time_limit_s: float) -> bool:
    """The verifier's diagnosis: does the submission return what a query ignoring the project's
    conventions returns? Then the lesson is the project's conventions, not this one question."""
    conn = connect_readonly(path)
    try:
        naive = run_query(conn, question.naive_sql, time_limit_s=GOLD_TIME_LIMIT_S, row_cap=10_000)
    except QueryFailed:
        return False
    finally:
        conn.close()
    return same_result(got, naive, ordered=question.ordered)[0]


def task_databases(task: Task, folder: Path) -> list[Path]:
    """Write the task's database and (for robust questions) its shadow into `folder`; return their paths."""
    paths = [folder / f"{task.project.name}.db"]
    write_database(task.db, paths[0])
    if task.question.robust:
        paths.append(folder / f"{task.project.name}.shadow1.db")
        write_database(task.shadow(1), paths[1])
    return paths


def verify(small_world: SmallWorld, sql: str, *, time_limit_s: float = DEFAULT_TIME_LIMIT_S,
           row_cap: int = DEFAULT_ROW_CAP) -> AnchorResult:
    """Check `sql` against the task of `small_world` from scratch (rebuilds its databases in a temp folder)."""
    project = PROJECTS.get(small_world.project)
    if project is None or small_world.family != "sql":
        raise WorldError(f"{small_world.id} is not a SQL small world; pass one cut by a sql/* family")
    task = level_task(project, small_world.level, small_world.seed)
    folder = Path(tempfile.mkdtemp(prefix="lle-sql-verify-"))
    try:
        return check_sql(sql, task.question, task_databases(task, folder), time_limit_s=time_limit_s,
                         row_cap=row_cap)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
