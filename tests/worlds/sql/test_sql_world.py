"""SQL worlds: generated databases with project quirks, gold SQL, and the execution anchor."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

import pytest

from lle import registry
from lle.core import ActionRequest, Experience, Split
from lle.policies.scripted import ScriptedPolicy
from lle.runtime.harness import run_episode
from lle.worlds.base import check_family, check_world, open_family, split_of
from lle.worlds.sql import AnchorResult, SqlFamily, SqlWorld, reference_actions, verify
from lle.worlds.sql.execute import QueryResult, run_on_file, same_result
from lle.worlds.sql.projects import PROJECTS
from lle.worlds.sql.questions import make_task
from lle.worlds.sql.world import SPLIT_SALT, split_seeds

IDS = ["sql/shop-v1", "sql/library-v1", "sql/clinic-v1"]


def _family(world_id: str, **options: float) -> SqlFamily:
    family = open_family(world_id, **options)
    assert isinstance(family, SqlFamily)
    return family


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _final(exp: Experience) -> dict[str, Any]:
    """The reward signal of the episode's last step."""
    signal = next(fb.content for fb in exp.steps[-1].feedback if fb.kind == "reward")
    assert isinstance(signal, dict)
    return signal


@pytest.mark.parametrize("world_id", IDS)
def test_every_project_passes_check_family(world_id: str) -> None:
    report = check_family(_family(world_id))
    assert {"family-determinism", "family-splits", "family-variety"} <= set(report.passed)
    assert report.steps_probed >= 4


def test_registry_ids_map_one_project_each() -> None:
    assert set(IDS) <= set(registry.ids("sql/"))
    for world_id in IDS:
        family = _family(world_id)
        sw = family.small_world(Split.train, 0)
        assert family.projects == (sw.project,) and sw.world == world_id and sw.family == "sql"
        assert sw.permissions.protected == [f"{sw.project}.db"] and sw.permissions.writable == []


@pytest.mark.parametrize("world_id", IDS)
def test_reference_solution_succeeds_and_doing_nothing_scores_zero(world_id: str) -> None:
    family = _family(world_id)
    for split in Split:
        for seed in range(3):
            sw = family.small_world(split, seed)
            exp = run_episode(sw, ScriptedPolicy(reference_actions(sw)))
            final = _final(exp)
            assert final["reward"] == 1.0 and final["terminated"] is True
            info = final["info"]
            assert isinstance(info, dict) and info["success"] is True and info["anchor"] == "execution"
            assert [s.executed.tool for s in exp.steps] == ["list_tables", "describe_table", "run_query", "submit"]
            empty = _final(run_episode(sw, ScriptedPolicy([ActionRequest(tool="submit", args={"sql": ""})])))
            assert empty["reward"] == 0.0
            assert isinstance(empty["info"], dict) and empty["info"]["success"] is False


@pytest.mark.parametrize("project", sorted(PROJECTS))
def test_every_task_needs_its_project_rule(project: str) -> None:
    """The naive SQL (the gold with the project's quirks ignored) fails the anchor; the gold passes."""
    family = _family(f"sql/{project}-v1")
    templates = set()
    for seed in range(12):
        sw = family.small_world(Split.train, seed)
        question = make_task(PROJECTS[project], sw.seed).question
        templates.add(question.template)
        assert verify(sw, question.gold_sql).passed
        naive = verify(sw, question.naive_sql)
        assert not naive.passed and naive.reason.startswith("result differs")
    assert len(templates) >= 4  # the seeds exercise many question templates, not one


def test_schema_variants_and_quirks_show_in_the_data() -> None:
    for name, project in PROJECTS.items():
        variants = {make_task(project, seed).db.variant for seed in range(20)}
        assert len(variants) >= 4, name
    shop = make_task(PROJECTS["shop"], 1).db
    assert any(r[-1] is not None for r in shop.table("orders").rows)  # soft-deleted orders exist
    assert all(isinstance(r[4], int) and r[4] > 100 for r in shop.table("orders").rows)  # totals in cents
    library = make_task(PROJECTS["library"], 1).db
    assert all(re.fullmatch(r"\d\d/\d\d/\d{4}", str(r[3])) for r in library.table("loans").rows)
    assert {r[6] for r in library.table("loans").rows} <= {"O", "R", "L"}
    clinic = make_task(PROJECTS["clinic"], 1).db
    assert {r[4] for r in clinic.table("visits").rows} <= {1, 2, 3, 4}
    # Deleting a patient soft-deletes their visits, so "exclude deleted rows" has one meaning.
    gone = {r[0] for r in clinic.table("patients").rows if r[4] is not None}
    assert gone and all(r[6] is not None for r in clinic.table("visits").rows if r[1] in gone)


def test_same_seed_same_database_bytes_and_question() -> None:
    family = _family("sql/library-v1")
    sw = family.small_world(Split.dev, 4)
    a, b = family.make_world(sw), family.make_world(sw)
    try:
        obs_a, _ = a.reset(seed=sw.seed)
        obs_b, _ = b.reset(seed=sw.seed)
        assert obs_a == obs_b and a.db_path != b.db_path
        assert _sha(a.db_path) == _sha(b.db_path)
    finally:
        a.close()
        b.close()
    assert not a.db_path.exists()  # close removes the temp folder


def test_writes_are_impossible_and_the_database_never_changes() -> None:
    family = _family("sql/shop-v1")
    sw = family.small_world(Split.train, 3)
    world = family.make_world(sw)
    world.reset(seed=sw.seed)
    before = _sha(world.db_path)
    assert world.task is not None
    orders = world.task.db.names["orders"]
    attacks = [
        f"DELETE FROM {orders}", f"UPDATE {orders} SET deleted_at = NULL", "DROP TABLE products",
        "INSERT INTO products VALUES (999, 'x', 'toys', 1)", "CREATE TABLE t (x)", "CREATE TEMP TABLE t (x)",
        f"ATTACH DATABASE '{world.db_path}' AS again", "PRAGMA journal_mode = WAL", "BEGIN IMMEDIATE", "VACUUM",
        "SELECT load_extension('libc')", f"SELECT 1; DELETE FROM {orders}",
    ]
    for sql in attacks:
        seen = world.step(ActionRequest(tool="run_query", args={"sql": sql})).observation
        assert seen.startswith("error"), (sql, seen)
    assert world.step(ActionRequest(tool="run_query", args={"sql": "PRAGMA table_info(products)"})) \
        .observation.startswith("cid | name")  # reading the schema is fine
    verdict = world.step(ActionRequest(tool="submit", args={"sql": f"DELETE FROM {orders}"}))
    assert verdict.reward == 0.0 and verdict.info["success"] is False
    assert verdict.info["detail"]["failure"] == "denied"
    assert _sha(world.db_path) == before
    world.close()


def test_a_query_past_the_time_limit_fails_not_passes() -> None:
    family = _family("sql/clinic-v1", time_limit_s=0.2)
    assert family.options() == {"time_limit_s": 0.2}
    sw = family.small_world(Split.train, 0)
    forever = "WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r) SELECT COUNT(*) FROM r"
    world = family.make_world(sw)
    world.reset(seed=sw.seed)
    assert world.step(ActionRequest(tool="run_query", args={"sql": forever})).observation.startswith("error (timeout)")
    done = world.step(ActionRequest(tool="submit", args={"sql": forever}))
    assert done.terminated and done.reward == 0.0 and done.info["detail"]["failure"] == "timeout"
    world.close()


def test_row_cap_bounds_results_and_oversized_answers_fail() -> None:
    family = _family("sql/shop-v1", row_cap=50)
    sw = family.small_world(Split.train, 1)
    many = "WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r LIMIT 5000) SELECT i FROM r"
    world = family.make_world(sw)
    world.reset(seed=sw.seed)
    shown = world.step(ActionRequest(tool="run_query", args={"sql": many})).observation
    assert "row cap reached" in shown and len(shown.splitlines()) < 40
    done = world.step(ActionRequest(tool="submit", args={"sql": many}))
    assert done.reward == 0.0 and "more than 50 rows" in done.info["detail"]["reason"]
    world.close()


def test_a_hard_coded_answer_is_caught_on_the_shadow_database() -> None:
    family = _family("sql/shop-v1")
    for seed in range(40):
        sw = family.small_world(Split.train, seed)
        task = make_task(PROJECTS["shop"], sw.seed)
        if not task.question.robust or task.question.ordered:
            continue
        world = family.make_world(sw)
        world.reset(seed=sw.seed)
        gold = run_on_file(world.db_path, task.question.gold_sql)
        world.close()
        if len(gold.rows) != 1 or len(gold.columns) != 1 or not isinstance(gold.rows[0][0], int | float):
            continue
        literal = verify(sw, f"SELECT {gold.rows[0][0]!r}")
        assert not literal.passed and "second database" in literal.reason
        databases = literal.detail["databases"]
        assert isinstance(databases, list) and databases[0] == {"database": "task", "match": True, "rows": 1,
                                                                "columns": 1}
        return
    pytest.fail("no numeric single-value shop task in 40 seeds")


def test_results_compare_as_multisets_with_a_tolerance() -> None:
    def result(*rows: tuple[object, ...]) -> QueryResult:
        return QueryResult(("a", "b"), tuple(rows), False)  # type: ignore[arg-type]

    want = result(("x", 12.5), ("y", 3), ("y", 3))
    assert same_result(result(("y", 3.0), ("x", 12.504), ("y", 3)), want, ordered=False)[0]
    assert not same_result(result(("y", 3.0), ("x", 12.5)), want, ordered=False)[0]  # multiplicity counts
    assert not same_result(result(("x", 1250), ("y", 3), ("y", 3)), want, ordered=False)[0]  # cents ≠ dollars
    assert same_result(result(("x", 12.5), ("y", 3), ("y", 3)), want, ordered=True)[0]
    wrong_order = same_result(result(("y", 3), ("x", 12.5), ("y", 3)), want, ordered=True)
    assert wrong_order == (False, "right rows in the wrong order")
    narrow = QueryResult(("a",), (("x",), ("y",), ("y",)), False)
    assert same_result(narrow, want, ordered=False) == (False, "wrong number of columns (1)")


def _texts_after_probe(world: SqlWorld, sw_seed: int) -> tuple[list[str], list[str]]:
    """(observations, info JSON) of a probing episode that ends with a wrong submission."""
    obs, info = world.reset(seed=sw_seed)
    observations, infos = [obs], [json.dumps(info)]
    assert world.task is not None
    first = world.task.db.tables[0].name
    for action in [ActionRequest(tool="list_tables"), ActionRequest(tool="describe_table", args={"table": first}),
                   ActionRequest(tool="run_query", args={"sql": "SELECT 1"}),
                   ActionRequest(tool="submit", args={"sql": f"SELECT * FROM {first}"})]:
        step = world.step(action)
        observations.append(step.observation)
        infos.append(json.dumps(step.info))
    return observations, infos


@pytest.mark.slow
def test_no_observation_or_info_leaks_the_gold() -> None:
    for world_id in IDS:
        family = _family(world_id)
        for split in Split:
            for seed in range(8):
                sw = family.small_world(split, seed)
                task = make_task(PROJECTS[sw.project], sw.seed)
                gold_sql = task.question.gold_sql
                assert gold_sql not in sw.model_dump_json()
                world = family.make_world(sw)
                observations, infos = _texts_after_probe(world, sw.seed)
                gold = run_on_file(world.db_path, gold_sql)
                world.close()
                for text in observations + infos:
                    assert gold_sql not in text and task.question.naive_sql not in text
                # What the submission reports says what differs, never what was expected.
                verdict_texts = [observations[-1], infos[-1]]
                for value in {str(v) for row in gold.rows for v in row if len(str(v)) >= 4}:
                    assert all(value not in t for t in verdict_texts), (sw.id, value)
                assert "gold" not in infos[-1] and "expected_rows" not in infos[-1]


def test_splits_are_disjoint_and_stable() -> None:
    # Computed once; a change of the split function or salt must fail here.
    assert split_seeds("shop", Split.train)[:5] == (0, 1, 2, 4, 5)
    assert split_seeds("shop", Split.dev)[:5] == (3, 7, 30, 38, 39)
    assert split_seeds("shop", Split.test)[:5] == (11, 14, 18, 25, 64)
    assert split_seeds("library", Split.test)[:5] == (14, 32, 39, 55, 61)
    assert split_seeds("clinic", Split.dev)[:5] == (6, 15, 26, 27, 36)
    for project in PROJECTS:
        sets = [set(split_seeds(project, s)) for s in Split]
        assert not (sets[0] & sets[1]) and not (sets[0] & sets[2]) and not (sets[1] & sets[2])
        assert sum(len(s) for s in sets) == 10_000
        assert all(split_of(f"{SPLIT_SALT}:{project}:{s}") is Split.test for s in split_seeds(project, Split.test)[:50])
    family = _family("sql/shop-v1")
    assert family.small_world(Split.test, 2).id == "sql/shop-v1:test:2"
    assert family.small_world(Split.test, 2).seed == 18


def test_check_world_on_a_direct_instance_and_a_solving_probe() -> None:
    family = _family("sql/library-v1")
    sw = family.small_world(Split.train, 5)
    report = check_world(lambda: family.make_world(sw), seeds=(sw.seed,), probe=reference_actions(sw))
    assert "determinism" in report.passed and report.steps_probed == 4


def test_verify_is_callable_on_its_own_and_holds_no_gold() -> None:
    family = _family("sql/clinic-v1")
    sw = family.small_world(Split.test, 1)
    gold = make_task(PROJECTS["clinic"], sw.seed).question.gold_sql
    ok = verify(sw, gold)
    assert isinstance(ok, AnchorResult) and ok.passed and ok.info()["success"] is True
    assert gold not in json.dumps(ok.info())
    bad = verify(sw, "SELECT no_such_column FROM nowhere")
    assert not bad.passed and bad.detail["failure"] == "error"
