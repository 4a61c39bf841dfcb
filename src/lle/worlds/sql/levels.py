"""Difficulty levels of the SQL worlds: easier questions over the very same generated databases.

A levelled task of world seed s uses the database of the unlevelled task s (same builder, same random
stream), so it keeps that seed's split (`split_seeds`): train, dev and test never share a database at
any level. Only the question differs, drawn from the level's templates with a random stream of its own;
its gold SQL is run on the real database, and a question whose result is empty or all zero is redrawn.
The easy levels need no project quirk (the gold is the naive query); the last level is the project's
own quirk questions, as unlevelled.
"""

from __future__ import annotations

import random
from functools import lru_cache

from lle.errors import WorldError
from lle.worlds.sql.execute import QueryFailed, run_query
from lle.worlds.sql.generate import Database, memory_connection
from lle.worlds.sql.questions import MAX_TRIES, Project, Question, Task, Template, make_task, quote

SHOP_LEVELS = (
    "one table: a count or a filter over a table without quirks (e.g. products of a category)",
    "a join of two tables without quirks (e.g. the products on one order)",
    "an aggregate with GROUP BY, SUM or MAX (e.g. products per category)",
    "the project's quirks (cents, soft deletes), as unlevelled",
)


def _category(rng: random.Random, db: Database) -> str:
    return str(rng.choice(sorted({str(r[2]) for r in db.table("products").rows})))


def products_in_category(rng: random.Random, db: Database) -> Question:
    category = _category(rng, db)
    sql = f"SELECT COUNT(*) FROM products WHERE category = {quote(category)}"
    return Question(f"How many products are in the {category} category?", sql, sql, "L0:products_in_category")


def lines_with_quantity(rng: random.Random, db: Database) -> Question:
    qty = rng.randint(1, 4)
    sql = f"SELECT COUNT(*) FROM order_items WHERE quantity = {qty}"
    return Question(f"How many order lines (rows of order_items) have a quantity of exactly {qty}?", sql, sql,
                    "L0:lines_with_quantity")


def category_product_names(rng: random.Random, db: Database) -> Question:
    category = _category(rng, db)
    sql = f"SELECT name FROM products WHERE category = {quote(category)}"
    return Question(f"What are the names of the products in the {category} category?", sql, sql,
                    "L0:category_product_names")


def products_on_order(rng: random.Random, db: Database) -> Question:
    order = rng.randint(1, 140)  # every database has at least 140 orders, shadows included
    sql = f"SELECT p.name FROM order_items i JOIN products p ON p.id = i.product_id WHERE i.order_id = {order}"
    return Question(f"What are the names of the products on order number {order} (order_items.order_id)?", sql, sql,
                    "L1:products_on_order")


def category_lines(rng: random.Random, db: Database) -> Question:
    category = _category(rng, db)
    sql = (f"SELECT COUNT(*) FROM order_items i JOIN products p ON p.id = i.product_id "
           f"WHERE p.category = {quote(category)}")
    return Question(f"How many order lines (rows of order_items) are for products in the {category} category?",
                    sql, sql, "L1:category_lines")


def products_per_category(rng: random.Random, db: Database) -> Question:
    sql = "SELECT category, COUNT(*) FROM products GROUP BY category"
    return Question("How many products are there in each category? Give the category and its number of products.",
                    sql, sql, "L2:products_per_category")


def units_per_category(rng: random.Random, db: Database) -> Question:
    sql = ("SELECT p.category, SUM(i.quantity) FROM order_items i JOIN products p ON p.id = i.product_id "
           "GROUP BY p.category")
    return Question("How many units (the sum of order_items.quantity) were ordered per product category? Give the "
                    "category and the units.", sql, sql, "L2:units_per_category")


def biggest_line(rng: random.Random, db: Database) -> Question:
    category = _category(rng, db)
    sql = (f"SELECT MAX(i.quantity) FROM order_items i JOIN products p ON p.id = i.product_id "
           f"WHERE p.category = {quote(category)}")
    return Question(f"What is the largest quantity on a single order line for a product in the {category} "
                    "category?", sql, sql, "L2:biggest_line")


LEVEL_TEMPLATES: dict[str, tuple[tuple[Template, ...], ...]] = {
    "shop": ((products_in_category, lines_with_quantity, category_product_names),
             (products_on_order, category_lines),
             (products_per_category, units_per_category, biggest_line)),
}
"""project -> the templates of each easy level; the level after them is the project's own (quirk) questions."""


def project_levels(project: str) -> tuple[str, ...]:
    return {"shop": SHOP_LEVELS}.get(project, ())


def level_task(project: Project, level: int | None, seed: int) -> Task:
    """The task of world seed `seed` at `level` (None or the last level: the unlevelled quirk task)."""
    easy = LEVEL_TEMPLATES.get(project.name, ())
    if level is None or level == len(easy):
        return make_task(project, seed)
    if not 0 <= level < len(easy):
        raise WorldError(f"sql/{project.name} has no level {level}; use 0..{len(easy)}")
    return _level_task(project, level, seed)


@lru_cache(maxsize=128)
def _level_task(project: Project, level: int, seed: int) -> Task:
    db = project.build(random.Random(f"lle-sql:{project.name}:{seed}"), None)  # the unlevelled task's database
    rng = random.Random(f"lle-sql:{project.name}:{seed}:L{level}")
    conn = memory_connection(db)
    try:
        for _ in range(MAX_TRIES):
            question = rng.choice(LEVEL_TEMPLATES[project.name][level])(rng, db)
            if question is None:
                continue
            try:
                gold = run_query(conn, question.gold_sql, time_limit_s=10.0, row_cap=10_000)
            except QueryFailed as err:
                raise WorldError(f"sql/{project.name}: level template {question.template} wrote a failing query "
                                 f"({err}); fix the template") from err
            if gold.rows and not all(v in (None, 0) for row in gold.rows for v in row):
                return Task(project, seed, db, question)
    finally:
        conn.close()
    raise WorldError(f"sql/{project.name}: seed {seed} found no usable level-{level} question in {MAX_TRIES} tries; "
                     "widen the level templates")
