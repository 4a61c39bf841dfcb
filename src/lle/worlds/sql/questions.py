"""Questions with gold SQL, projects, and the task of one seed.

A template draws its parameters from the generated database and returns a `Question`: the text,
the gold SQL, and the "naive" SQL a newcomer to the project would write (the gold with the
project's quirks ignored). A task keeps a question only when its gold result is non-trivial and
the naive SQL gives a different result, so every task really exercises a project rule.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

from lle.errors import WorldError
from lle.worlds.sql.execute import QueryFailed, run_query, same_result
from lle.worlds.sql.generate import Database, memory_connection

MAX_TRIES = 60


@dataclass(frozen=True)
class Question:
    text: str
    gold_sql: str
    """The reference query; never shown to the agent."""
    naive_sql: str
    """The gold with the project's quirks ignored (what a newcomer would write)."""
    template: str
    """Name of the template that made it (a stable key for analysis)."""
    ordered: bool = False
    """True when the question asks for an order: the anchor then compares rows in order."""
    robust: bool = True
    """False when the answer can tie on other data (top-1 questions): the anchor then checks only the
    task's own database, where the generator made sure there is no tie."""


Template = Callable[[random.Random, Database], Question | None]
Builder = Callable[[random.Random, tuple[str, dict[str, str]] | None], Database]


@dataclass(frozen=True)
class Project:
    name: str
    quirks: tuple[str, ...]
    """The project's rules, in words (for docs and tests; the agent has to find them out)."""
    build: Builder
    """Draws a schema variant (unless one is given) and the data."""
    templates: tuple[Template, ...]


@dataclass(frozen=True)
class Task:
    project: Project
    seed: int
    db: Database
    question: Question

    def shadow(self, k: int = 1) -> Database:
        """Another database with the same schema variant and fresh data, so a query that merely
        hard-codes this database's answer is caught."""
        rng = random.Random(f"lle-sql:{self.project.name}:{self.seed}:shadow{k}")
        return self.project.build(rng, (self.db.variant, self.db.names))


def quote(text: str) -> str:
    """A SQL string literal."""
    return "'" + text.replace("'", "''") + "'"


def make_task(project: Project, seed: int) -> Task:
    """The task of `seed` in `project`: a pure function of both."""
    return _make_task(project, seed)


@lru_cache(maxsize=128)
def _make_task(project: Project, seed: int) -> Task:
    rng = random.Random(f"lle-sql:{project.name}:{seed}")
    db = project.build(rng, None)
    conn = memory_connection(db)
    try:
        for _ in range(MAX_TRIES):
            template = rng.choice(project.templates)
            question = template(rng, db)
            if question is None:
                continue
            try:
                gold = run_query(conn, question.gold_sql, time_limit_s=10.0, row_cap=10_000)
                naive = run_query(conn, question.naive_sql, time_limit_s=10.0, row_cap=10_000)
            except QueryFailed as err:
                raise WorldError(f"sql/{project.name}: template {question.template} wrote a failing query "
                                 f"({err}); fix the template") from err
            trivial = not gold.rows or all(v in (None, 0) for row in gold.rows for v in row)
            if trivial or same_result(naive, gold, ordered=question.ordered)[0]:
                continue
            return Task(project, seed, db, question)
    finally:
        conn.close()
    raise WorldError(f"sql/{project.name}: seed {seed} found no usable question in {MAX_TRIES} tries; "
                     "widen the templates' parameter ranges")
