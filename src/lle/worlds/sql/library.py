"""Project `library`: members, books, loans. Rules: dates are `DD/MM/YYYY` text (compare them
through `substr`, never as text); a loan's state is a one-letter code (O out, R returned, L lost)
explained in a lookup table."""

from __future__ import annotations

import random
from collections import Counter
from datetime import date, timedelta

from lle.worlds.sql.generate import (
    CITIES,
    MONTHS,
    Cell,
    Database,
    Table,
    dmy,
    random_day,
    unique_people,
    variant_names,
)
from lle.worlds.sql.questions import Project, Question, quote

NAME_CHOICES = {
    "members": ("members", "patrons"),
    "loans": ("loans", "checkouts"),
    "loaned": ("loaned_on", "checkout_date"),
    "due": ("due_on", "due_date"),
    "codes": ("loan_status", "status_codes"),
}
GENRES = ("fantasy", "history", "mystery", "poetry", "science", "travel")
TITLE_A = ("Silent", "Hidden", "Last", "Northern", "Painted", "Broken", "Golden", "Winter", "Distant", "Quiet")
TITLE_B = ("River", "Garden", "Archive", "Harbor", "Mountain", "Letter", "Compass", "Lantern", "Orchard", "Tower")
CODES = (("O", "out on loan"), ("R", "returned"), ("L", "lost"))
QUIRKS = (
    "Dates are stored as DD/MM/YYYY text; compare them via substr (year = substr(d, 7, 4)), never as plain text.",
    "A loan's status is a one-letter code (O = out on loan, R = returned, L = lost), listed in the lookup table.",
)
TODAY = date(2024, 12, 31)


def _sortable(col: str) -> str:
    """SQL turning a DD/MM/YYYY column into a sortable YYYYMMDD string."""
    return f"substr({col}, 7, 4) || substr({col}, 4, 2) || substr({col}, 1, 2)"


def build(rng: random.Random, fixed: tuple[str, dict[str, str]] | None = None) -> Database:
    variant, n = fixed or variant_names(rng, NAME_CHOICES)
    people = unique_people(rng, rng.randint(28, 38))
    members: list[tuple[Cell, ...]] = [(i, name, rng.choice(CITIES), dmy(random_day(rng, date(2019, 1, 1))))
                                       for i, name in enumerate(people, 1)]
    authors = unique_people(rng, 12)
    titles = rng.sample([f"The {a} {b}" for a in TITLE_A for b in TITLE_B], rng.randint(36, 48))
    books: list[tuple[Cell, ...]] = [(i, t, rng.choice(authors), rng.choice(GENRES), rng.randint(1950, 2023))
                                     for i, t in enumerate(titles, 1)]
    loans: list[tuple[Cell, ...]] = []
    for lid in range(1, rng.randint(150, 220) + 1):
        out = random_day(rng)
        due = out + timedelta(days=21)
        if (TODAY - out).days < 40:
            status = "O" if rng.random() < 0.8 else "R"
        else:
            status = rng.choices(("R", "L", "O"), weights=(85, 6, 9))[0]
        returned = dmy(min(TODAY, out + timedelta(days=rng.randint(2, 30)))) if status == "R" else None
        loans.append((lid, rng.randint(1, len(books)), rng.randint(1, len(members)), dmy(out), dmy(due), returned,
                      status))
    tables = (
        Table(n["members"], (("id", "INTEGER PRIMARY KEY"), ("name", "TEXT NOT NULL"), ("city", "TEXT"),
                             ("joined", "TEXT")), tuple(members)),
        Table("books", (("id", "INTEGER PRIMARY KEY"), ("title", "TEXT NOT NULL"), ("author", "TEXT"),
                        ("genre", "TEXT"), ("published", "INTEGER")), tuple(books)),
        Table(n["loans"], (("id", "INTEGER PRIMARY KEY"), ("book_id", "INTEGER NOT NULL"),
                           ("member_id", "INTEGER NOT NULL"), (n["loaned"], "TEXT"), (n["due"], "TEXT"),
                           ("returned_on", "TEXT"), ("status", "TEXT")), tuple(loans)),
        Table(n["codes"], (("code", "TEXT PRIMARY KEY"), ("meaning", "TEXT")), CODES),
    )
    return Database("library", variant, n, tables)


def _day(rng: random.Random) -> tuple[str, str]:
    """(words, YYYYMMDD) for a cut-off date."""
    d = random_day(rng, date(2020, 1, 1))
    return f"{d.day} {MONTHS[d.month - 1]} {d.year}", d.strftime("%Y%m%d")


def loans_in_year(rng: random.Random, db: Database) -> Question:
    loans, loaned = db.names["loans"], db.names["loaned"]
    year = rng.randint(2021, 2024)
    head = f"SELECT COUNT(*) FROM {loans} WHERE "
    return Question(f"How many loans were made in {year}?", f"{head}substr({loaned}, 7, 4) = '{year}'",
                    f"{head}{loaned} LIKE '{year}%'", "loans_in_year")


def loans_in_month(rng: random.Random, db: Database) -> Question:
    loans, loaned = db.names["loans"], db.names["loaned"]
    year, month = rng.randint(2021, 2024), rng.randint(1, 12)
    head = f"SELECT COUNT(*) FROM {loans} WHERE "
    return Question(f"How many books were borrowed in {MONTHS[month - 1]} {year}?",
                    f"{head}substr({loaned}, 4, 2) = '{month:02d}' AND substr({loaned}, 7, 4) = '{year}'",
                    f"{head}strftime('%Y-%m', {loaned}) = '{year}-{month:02d}'", "loans_in_month")


def still_out(rng: random.Random, db: Database) -> Question:
    loans = db.names["loans"]
    return Question("How many loans are still out right now (neither returned nor lost)?",
                    f"SELECT COUNT(*) FROM {loans} WHERE status = 'O'",
                    f"SELECT COUNT(*) FROM {loans} WHERE returned_on IS NULL", "still_out")


def lost_titles(rng: random.Random, db: Database) -> Question:
    loans = db.names["loans"]
    genre = rng.choice(GENRES)
    head = f"SELECT DISTINCT b.title FROM books b JOIN {loans} l ON l.book_id = b.id WHERE b.genre = {quote(genre)}"
    return Question(f"Which {genre} books have been lost by a borrower? Give their titles.",
                    f"{head} AND l.status = 'L'", f"{head} AND l.status = 'lost'", "lost_titles")


def joined_before(rng: random.Random, db: Database) -> Question:
    members = db.names["members"]
    words, cut = _day(rng)
    head = f"SELECT name FROM {members} WHERE "
    return Question(f"Which members joined the library before {words}? Give their names.",
                    f"{head}{_sortable('joined')} < '{cut}'", f"{head}joined < '{cut[6:]}/{cut[4:6]}/{cut[:4]}'",
                    "joined_before")


def top_borrower(rng: random.Random, db: Database) -> Question | None:
    members, loans, loaned = db.names["members"], db.names["loans"], db.names["loaned"]
    year = rng.randint(2021, 2024)
    table = db.table("loans")
    counts = Counter(r[2] for r in table.rows if str(r[3]).endswith(str(year))).most_common(2)
    if len(counts) < 2 or counts[0][1] == counts[1][1]:
        return None  # a tie has no single answer
    head = f"SELECT m.name FROM {members} m JOIN {loans} l ON l.member_id = m.id WHERE "
    tail = " GROUP BY m.id ORDER BY COUNT(*) DESC LIMIT 1"
    return Question(f"Which member borrowed the most books in {year}? Give the name.",
                    f"{head}substr(l.{loaned}, 7, 4) = '{year}'{tail}", f"{head}l.{loaned} LIKE '{year}%'{tail}",
                    "top_borrower", robust=False)


def overdue(rng: random.Random, db: Database) -> Question:
    loans, due = db.names["loans"], db.names["due"]
    words, cut = _day(rng)
    return Question(f"How many loans that are still out (not returned, not lost) were due back before {words}?",
                    f"SELECT COUNT(*) FROM {loans} WHERE status = 'O' AND {_sortable(due)} < '{cut}'",
                    f"SELECT COUNT(*) FROM {loans} WHERE returned_on IS NULL AND {due} < "
                    f"'{cut[6:]}/{cut[4:6]}/{cut[:4]}'", "overdue")


def first_loan(rng: random.Random, db: Database) -> Question | None:
    loans, loaned = db.names["loans"], db.names["loaned"]
    days = sorted(str(r[3])[6:] + str(r[3])[3:5] + str(r[3])[:2] for r in db.table("loans").rows)
    if len(days) < 2 or days[0] == days[1]:
        return None
    head = f"SELECT b.title FROM books b JOIN {loans} l ON l.book_id = b.id ORDER BY "
    return Question("Which book was the very first one lent out? Give its title.",
                    f"{head}{_sortable('l.' + loaned)} LIMIT 1", f"{head}l.{loaned} LIMIT 1", "first_loan",
                    robust=False)


LIBRARY = Project("library", QUIRKS, build, (loans_in_year, loans_in_month, still_out, lost_titles, joined_before,
                                              top_borrower, overdue, first_loan))
