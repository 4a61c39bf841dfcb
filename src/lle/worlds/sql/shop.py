"""Project `shop`: customers, products, orders. Rules: money is stored in cents; soft-deleted rows
(`deleted_at` set) are gone and must be left out (deleting a customer soft-deletes their orders)."""

from __future__ import annotations

import random
from collections import Counter

from lle.worlds.sql.generate import (
    CITIES,
    MONTHS,
    Cell,
    Database,
    Table,
    iso,
    random_day,
    stamp,
    unique_people,
    variant_names,
)
from lle.worlds.sql.questions import Project, Question, quote

NAME_CHOICES = {
    "customers": ("customers", "clients"),
    "orders": ("orders", "purchases"),
    "total": ("total", "amount", "total_price"),
    "date": ("order_date", "placed_on"),
}
CATEGORIES = ("books", "games", "garden", "kitchen", "music", "toys")
ADJECTIVES = ("Classic", "Compact", "Deluxe", "Eco", "Mini", "Pro", "Smart", "Travel", "Vintage", "Wooden")
NOUNS = {
    "books": ("Atlas", "Cookbook", "Novel", "Journal"), "games": ("Chess Set", "Puzzle", "Card Game", "Dice"),
    "garden": ("Trowel", "Planter", "Hose", "Seed Kit"), "kitchen": ("Kettle", "Knife", "Skillet", "Grinder"),
    "music": ("Ukulele", "Harmonica", "Metronome", "Drum Pad"), "toys": ("Robot", "Kite", "Yo-yo", "Train"),
}
STATUSES = ("paid", "shipped", "refunded", "cancelled")
QUIRKS = (
    "Amounts (prices and order totals) are stored as integer cents; divide by 100 for dollars.",
    "Rows with deleted_at set are soft-deleted and must be excluded; deleting a customer soft-deletes their orders.",
)


def build(rng: random.Random, fixed: tuple[str, dict[str, str]] | None = None) -> Database:
    variant, n = fixed or variant_names(rng, NAME_CHOICES)
    people = unique_people(rng, rng.randint(30, 42))
    customers: list[tuple[Cell, ...]] = []
    gone: dict[int, str] = {}
    for i, name in enumerate(people, 1):
        deleted = stamp(random_day(rng)) if rng.random() < 0.15 else None
        if deleted:
            gone[i] = deleted
        customers.append((i, name, rng.choice(CITIES), iso(random_day(rng)), deleted))
    titles = rng.sample([f"{a} {noun}" for c in CATEGORIES for a in ADJECTIVES for noun in NOUNS[c]], 26)
    category_of = {f"{a} {noun}": c for c in CATEGORIES for a in ADJECTIVES for noun in NOUNS[c]}
    prices = rng.sample(range(299, 19_999), len(titles))  # distinct, so "most expensive" never ties
    products: list[tuple[Cell, ...]] = [(i, t, category_of[t], p)
                                        for i, (t, p) in enumerate(zip(titles, prices, strict=True), 1)]
    orders: list[tuple[Cell, ...]] = []
    items: list[tuple[Cell, ...]] = []
    for oid in range(1, rng.randint(140, 200) + 1):
        cid = rng.randint(1, len(people))
        total = 0
        for pid in rng.sample(range(1, len(products) + 1), rng.randint(1, 3)):
            qty, price = rng.randint(1, 4), prices[pid - 1]
            items.append((oid, pid, qty, price))
            total += qty * price
        status = rng.choices(STATUSES, weights=(5, 8, 2, 1))[0]
        deleted = gone.get(cid) or (stamp(random_day(rng)) if rng.random() < 0.08 else None)
        orders.append((oid, cid, iso(random_day(rng)), status, total, deleted))
    tables = (
        Table(n["customers"], (("id", "INTEGER PRIMARY KEY"), ("name", "TEXT NOT NULL"), ("city", "TEXT"),
                               ("signup_date", "TEXT"), ("deleted_at", "TEXT")), tuple(customers)),
        Table("products", (("id", "INTEGER PRIMARY KEY"), ("name", "TEXT NOT NULL"), ("category", "TEXT"),
                           ("price", "INTEGER NOT NULL")), tuple(products)),
        Table(n["orders"], (("id", "INTEGER PRIMARY KEY"), ("customer_id", "INTEGER NOT NULL"), (n["date"], "TEXT"),
                            ("status", "TEXT"), (n["total"], "INTEGER NOT NULL"), ("deleted_at", "TEXT")),
              tuple(orders)),
        Table("order_items", (("order_id", "INTEGER NOT NULL"), ("product_id", "INTEGER NOT NULL"),
                              ("quantity", "INTEGER NOT NULL"), ("unit_price", "INTEGER NOT NULL")), tuple(items)),
    )
    return Database("shop", variant, n, tables)


def _live_customer(rng: random.Random, db: Database) -> tuple[Cell, ...]:
    return rng.choice([r for r in db.table("customers").rows if r[4] is None])


def orders_by_city(rng: random.Random, db: Database) -> Question:
    c, o = db.names["customers"], db.names["orders"]
    city = rng.choice(CITIES)
    join = f"SELECT COUNT(*) FROM {o} o JOIN {c} c ON c.id = o.customer_id WHERE c.city = {quote(city)}"
    return Question(f"How many orders were placed by customers who live in {city} (whatever the order status)?",
                    join + " AND o.deleted_at IS NULL AND c.deleted_at IS NULL", join, "orders_by_city")


def month_value(rng: random.Random, db: Database) -> Question:
    o, total, day = db.names["orders"], db.names["total"], db.names["date"]
    year, month = rng.randint(2021, 2024), rng.randint(1, 12)
    where = f"FROM {o} WHERE substr({day}, 1, 7) = '{year}-{month:02d}'"
    return Question(f"What was the total value of all orders placed in {MONTHS[month - 1]} {year}, in dollars "
                    "(whatever their status)?",
                    f"SELECT ROUND(SUM({total}) / 100.0, 2) {where} AND deleted_at IS NULL",
                    f"SELECT SUM({total}) {where}", "month_value")


def customer_average(rng: random.Random, db: Database) -> Question:
    c, o, total = db.names["customers"], db.names["orders"], db.names["total"]
    name = str(_live_customer(rng, db)[1])
    body = f"FROM {o} o JOIN {c} c ON c.id = o.customer_id WHERE c.name = {quote(name)}"
    return Question(f"What is the average value of the orders placed by {name}, in dollars?",
                    f"SELECT ROUND(AVG(o.{total}) / 100.0, 2) {body} AND o.deleted_at IS NULL",
                    f"SELECT AVG(o.{total}) {body}", "customer_average")


def frequent_customers(rng: random.Random, db: Database) -> Question:
    c, o = db.names["customers"], db.names["orders"]
    k = rng.randint(4, 7)
    head = f"SELECT c.name FROM {c} c JOIN {o} o ON c.id = o.customer_id"
    tail = f"GROUP BY c.id HAVING COUNT(*) > {k}"
    return Question(f"Which customers have placed more than {k} orders? Give their names.",
                    f"{head} WHERE o.deleted_at IS NULL AND c.deleted_at IS NULL {tail}", f"{head} {tail}",
                    "frequent_customers")


def priciest_products(rng: random.Random, db: Database) -> Question:
    k = rng.randint(3, 5)
    return Question(f"What are the {k} most expensive products? Give each product's name and its price in dollars, "
                    "most expensive first.",
                    f"SELECT name, ROUND(price / 100.0, 2) FROM products ORDER BY price DESC LIMIT {k}",
                    f"SELECT name, price FROM products ORDER BY price DESC LIMIT {k}", "priciest_products",
                    ordered=True)


def city_customers(rng: random.Random, db: Database) -> Question:
    c = db.names["customers"]
    city = rng.choice(CITIES)
    where = f"SELECT COUNT(*) FROM {c} WHERE city = {quote(city)}"
    return Question(f"How many customers does the shop have in {city}?", where + " AND deleted_at IS NULL", where,
                    "city_customers")


def refunds_in_year(rng: random.Random, db: Database) -> Question:
    o, total, day = db.names["orders"], db.names["total"], db.names["date"]
    year = rng.randint(2021, 2024)
    where = f"FROM {o} WHERE status = 'refunded' AND substr({day}, 1, 4) = '{year}'"
    return Question(f"How much money was refunded on orders placed in {year}, in dollars?",
                    f"SELECT ROUND(SUM({total}) / 100.0, 2) {where} AND deleted_at IS NULL",
                    f"SELECT SUM({total}) {where}", "refunds_in_year")


def category_units(rng: random.Random, db: Database) -> Question | None:
    o = db.names["orders"]
    sold = Counter(str(r[2]) for r in db.table("products").rows)
    category = rng.choice(sorted(sold))
    body = (f"SELECT SUM(i.quantity) FROM order_items i JOIN {o} o ON o.id = i.order_id "
            f"JOIN products p ON p.id = i.product_id WHERE p.category = {quote(category)}")
    return Question(f"How many units of {category} products have been ordered in total (whatever the order status)?",
                    body + " AND o.deleted_at IS NULL", body, "category_units")


SHOP = Project("shop", QUIRKS, build, (orders_by_city, month_value, customer_average, frequent_customers,
                                        priciest_products, city_customers, refunds_in_year, category_units))
