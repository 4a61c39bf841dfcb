"""Project `clinic`: patients, doctors, appointments. Rules: an appointment's status is an integer
code (1 booked, 2 attended, 3 cancelled, 4 no-show) explained in a lookup table; fees are integer
cents; soft-deleted rows (`deleted_at` set) are excluded (deleting a patient deletes their visits)."""

from __future__ import annotations

import random
from collections import Counter
from datetime import date

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
    "patients": ("patients", "people"),
    "doctors": ("doctors", "physicians"),
    "visits": ("appointments", "visits"),
    "day": ("visit_date", "scheduled_for"),
    "fee": ("fee", "charge"),
    "codes": ("appointment_status", "status_codes"),
}
SPECIALTIES = ("cardiology", "dermatology", "neurology", "orthopedics", "pediatrics")
CODES = ((1, "booked"), (2, "attended"), (3, "cancelled"), (4, "no-show"))
ATTENDED, CANCELLED, NO_SHOW = 2, 3, 4
QUIRKS = (
    "Appointment status is an integer code (1 booked, 2 attended, 3 cancelled, 4 no-show), listed in the lookup table.",
    "Fees are stored as integer cents; divide by 100 for dollars.",
    "Rows with deleted_at set are soft-deleted and must be excluded; deleting a patient soft-deletes their visits.",
)


def build(rng: random.Random, fixed: tuple[str, dict[str, str]] | None = None) -> Database:
    variant, n = fixed or variant_names(rng, NAME_CHOICES)
    doctors: list[tuple[Cell, ...]] = [(i, name, rng.choice(SPECIALTIES))
                                       for i, name in enumerate(unique_people(rng, rng.randint(8, 12)), 1)]
    patients: list[tuple[Cell, ...]] = []
    gone: dict[int, str] = {}
    for i, name in enumerate(unique_people(rng, rng.randint(40, 60)), 1):
        deleted = stamp(random_day(rng)) if rng.random() < 0.12 else None
        if deleted:
            gone[i] = deleted
        patients.append((i, name, iso(random_day(rng, date(1940, 1, 1), date(2015, 12, 31))), rng.choice(CITIES),
                         deleted))
    visits: list[tuple[Cell, ...]] = []
    for vid in range(1, rng.randint(180, 260) + 1):
        pid = rng.randint(1, len(patients))
        status = rng.choices((1, ATTENDED, CANCELLED, NO_SHOW), weights=(10, 70, 12, 8))[0]
        deleted = gone.get(pid) or (stamp(random_day(rng)) if rng.random() < 0.06 else None)
        visits.append((vid, pid, rng.randint(1, len(doctors)), iso(random_day(rng)), status,
                       rng.randrange(3000, 15_000, 5), deleted))
    tables = (
        Table(n["patients"], (("id", "INTEGER PRIMARY KEY"), ("name", "TEXT NOT NULL"), ("birth_date", "TEXT"),
                              ("city", "TEXT"), ("deleted_at", "TEXT")), tuple(patients)),
        Table(n["doctors"], (("id", "INTEGER PRIMARY KEY"), ("name", "TEXT NOT NULL"), ("specialty", "TEXT")),
              tuple(doctors)),
        Table(n["visits"], (("id", "INTEGER PRIMARY KEY"), ("patient_id", "INTEGER NOT NULL"),
                            ("doctor_id", "INTEGER NOT NULL"), (n["day"], "TEXT"), ("status", "INTEGER NOT NULL"),
                            (n["fee"], "INTEGER NOT NULL"), ("deleted_at", "TEXT")), tuple(visits)),
        Table(n["codes"], (("code", "INTEGER PRIMARY KEY"), ("label", "TEXT")), CODES),
    )
    return Database("clinic", variant, n, tables)


def _doctor(rng: random.Random, db: Database) -> str:
    return str(rng.choice(db.table("doctors").rows)[1])


def doctor_attended(rng: random.Random, db: Database) -> Question:
    d, v = db.names["doctors"], db.names["visits"]
    name = _doctor(rng, db)
    head = f"SELECT COUNT(*) FROM {v} a JOIN {d} d ON d.id = a.doctor_id WHERE d.name = {quote(name)} AND "
    return Question(f"How many appointments with Dr. {name} did the patient actually attend?",
                    f"{head}a.status = {ATTENDED} AND a.deleted_at IS NULL", f"{head}a.status = 'attended'",
                    "doctor_attended")


def city_patients(rng: random.Random, db: Database) -> Question:
    p = db.names["patients"]
    city = rng.choice(CITIES)
    head = f"SELECT COUNT(*) FROM {p} WHERE city = {quote(city)}"
    return Question(f"How many patients from {city} are registered with the clinic?", head + " AND deleted_at IS NULL",
                    head, "city_patients")


def month_income(rng: random.Random, db: Database) -> Question:
    v, day, fee = db.names["visits"], db.names["day"], db.names["fee"]
    year, month = rng.randint(2021, 2024), rng.randint(1, 12)
    where = f"FROM {v} WHERE substr({day}, 1, 7) = '{year}-{month:02d}'"
    return Question(f"How much did the clinic earn, in dollars, from attended appointments in {MONTHS[month - 1]} "
                    f"{year}?",
                    f"SELECT ROUND(SUM({fee}) / 100.0, 2) {where} AND status = {ATTENDED} AND deleted_at IS NULL",
                    f"SELECT SUM({fee}) {where} AND status = 'attended'", "month_income")


def no_shows(rng: random.Random, db: Database) -> Question:
    v, day = db.names["visits"], db.names["day"]
    year = rng.randint(2021, 2024)
    head = f"SELECT COUNT(*) FROM {v} WHERE substr({day}, 1, 4) = '{year}' AND "
    return Question(f"How many appointments in {year} were no-shows (the patient never came)?",
                    f"{head}status = {NO_SHOW} AND deleted_at IS NULL", f"{head}status = 'no-show'", "no_shows")


def cancelling_doctors(rng: random.Random, db: Database) -> Question:
    d, v = db.names["doctors"], db.names["visits"]
    specialty = rng.choice(SPECIALTIES)
    head = (f"SELECT DISTINCT d.name FROM {d} d JOIN {v} a ON a.doctor_id = d.id "
            f"WHERE d.specialty = {quote(specialty)} AND ")
    return Question(f"Which {specialty} doctors had at least one cancelled appointment? Give their names.",
                    f"{head}a.status = {CANCELLED} AND a.deleted_at IS NULL", f"{head}a.status = 'cancelled'",
                    "cancelling_doctors")


def busiest_doctor(rng: random.Random, db: Database) -> Question | None:
    d, v, day = db.names["doctors"], db.names["visits"], db.names["day"]
    year = rng.randint(2021, 2024)
    rows = db.table("visits").rows
    top = Counter(r[2] for r in rows if str(r[3]).startswith(str(year)) and r[4] == ATTENDED and r[6] is None)
    best = top.most_common(2)
    if len(best) < 2 or best[0][1] == best[1][1]:
        return None  # a tie has no single answer
    head = f"SELECT d.name FROM {d} d JOIN {v} a ON a.doctor_id = d.id WHERE substr(a.{day}, 1, 4) = '{year}' AND "
    tail = " GROUP BY d.id ORDER BY COUNT(*) DESC LIMIT 1"
    return Question(f"Which doctor had the most attended appointments in {year}? Give the name.",
                    f"{head}a.status = {ATTENDED} AND a.deleted_at IS NULL{tail}", f"{head}a.status = 'attended'{tail}",
                    "busiest_doctor", robust=False)


def specialty_fee(rng: random.Random, db: Database) -> Question:
    d, v, fee = db.names["doctors"], db.names["visits"], db.names["fee"]
    specialty = rng.choice(SPECIALTIES)
    body = f"FROM {v} a JOIN {d} d ON d.id = a.doctor_id WHERE d.specialty = {quote(specialty)} AND "
    return Question(f"What is the average fee, in dollars, of attended {specialty} appointments?",
                    f"SELECT ROUND(AVG(a.{fee}) / 100.0, 2) {body}a.status = {ATTENDED} AND a.deleted_at IS NULL",
                    f"SELECT AVG(a.{fee}) {body}a.status = 'attended'", "specialty_fee")


def doctor_patients(rng: random.Random, db: Database) -> Question:
    d, v = db.names["doctors"], db.names["visits"]
    name = _doctor(rng, db)
    body = f"FROM {v} a JOIN {d} d ON d.id = a.doctor_id WHERE d.name = {quote(name)}"
    return Question(f"How many different patients attended at least one appointment with Dr. {name}?",
                    f"SELECT COUNT(DISTINCT a.patient_id) {body} AND a.status = {ATTENDED} AND a.deleted_at IS NULL",
                    f"SELECT COUNT(DISTINCT a.patient_id) {body}", "doctor_patients")


CLINIC = Project("clinic", QUIRKS, build, (doctor_attended, city_patients, month_income, no_shows, cancelling_doctors,
                                            busiest_doctor, specialty_fee, doctor_patients))
