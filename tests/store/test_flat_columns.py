"""The store for people (m007): flat, typed columns and views equal to the JSON bodies after a real toy run,
declared foreign keys that hold, an old store migrated and backfilled; and prompts stored per step."""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import apsw
import pytest

from lle.config import RunConfig
from lle.core import Context, LLMCall, PolicyInfo, Split, Step
from lle.errors import InvalidInputError
from lle.evidence import assess_experience
from lle.flywheel import loop
from lle.policies.prompt import messages_of, messages_text
from lle.policies.scripted import ScriptedPolicy
from lle.runtime.harness import run_episode
from lle.runtime.resume import resume
from lle.store import Store, blobs, migrations
from lle.store.copy import TABLES, copy_store
from lle.store.episodes import get_episode, list_episodes
from lle.store.flat import STEP_COLUMNS, VIEWS, foreign_key_problems
from lle.store.pg_server import TempServer, find_bin_dir
from lle.viewer.data import Source, prompt_of, transcript
from lle.worlds.toy import KeysFamily, oracle_actions


@pytest.fixture(scope="module")
def toy_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A finished flywheel run of the `lle` strategy on the toy suite (oracle: no model): its store and id."""
    workspace = tmp_path_factory.mktemp("flat") / "ws"
    config = RunConfig(suite="toy", model="oracle", strategies=["lle"], rounds=1, train_per_round=2, eval_tasks=2,
                       workers=1, group_size=2)
    loop.Flywheel(config, workspace).run()
    return loop.strategy_db(loop.run_folder(config.id, workspace), "lle"), config.id


def _rows(db: Store, sql: str) -> list[dict[str, Any]]:
    """Rows as dicts, sorted by their first two values (each backend collates text its own way)."""
    cursor = db.conn.execute(sql)
    names = [d[0] for d in cursor.description]
    rows = [dict(zip(names, row, strict=True)) for row in cursor]
    return sorted(rows, key=lambda r: tuple(str(v) for v in list(r.values())[:2]))


def _batch_parts(batch: str) -> tuple[str, str, int, str]:
    run, strategy, label, phase = batch.split("/", 3)
    return run, strategy, int(label[1:]), phase


def test_flat_columns_and_views_equal_the_json_bodies(toy_run: tuple[Path, str]) -> None:
    path, run_id = toy_run
    with Store(path) as db:
        experiences = {r["id"]: r for r in _rows(db, "SELECT * FROM experiences_flat")}
        assert len(experiences) == db.count("experiences") > 0
        phases = set()
        for exp_id, row in experiences.items():
            exp, batch = db.get_experience(exp_id), get_episode(db, exp_id).batch
            assert batch is not None and row["batch"] == batch
            assert (row["run"], row["strategy"], row["round"], row["phase"]) == _batch_parts(batch)
            assert row["run"] == run_id and row["strategy"] == "lle"
            assert (row["world"], row["split"], row["level"], row["outcome"], row["model"], row["n_steps"]) == (
                exp.small_world.world, exp.small_world.split.value, exp.small_world.level, exp.outcome.value,
                exp.policy.model, len(exp.steps))
            phases.add(row["phase"])
        assert {"train", "train/a1", "eval"} <= phases

        steps = _rows(db, "SELECT * FROM steps_flat ORDER BY experience_id, idx")
        raw = _rows(db, f"SELECT experience_id, idx, {', '.join(STEP_COLUMNS)} FROM steps ORDER BY experience_id, idx")
        listed = _rows(db, "SELECT * FROM experience_steps ORDER BY experience_id, idx")
        assert len(steps) == len(raw) == len(listed) == db.count("steps") > 0
        tools = set()
        for flat, plain, link in zip(steps, raw, listed, strict=True):
            step = db.steps_of(flat["experience_id"])[flat["idx"]]
            expected = {"tool": step.executed.tool, "requested_tool": step.request.tool,
                        "status": step.executed.status.value, "allowed": int(step.executed.allowed),
                        "has_error": int(step.effect.error is not None), "n_changes": len(step.effect.changes),
                        "model": None, "prompt_tokens": None, "completion_tokens": None, "has_prompt": 0}
            assert {k: flat[k] for k in expected} == expected == {k: plain[k] for k in expected}
            assert {k: link[k] for k in ("tool", "status", "allowed", "has_error")} == \
                {k: expected[k] for k in ("tool", "status", "allowed", "has_error")}
            assert flat["outcome"] == experiences[flat["experience_id"]]["outcome"]
            assert flat["round"] == experiences[flat["experience_id"]]["round"]
            tools.add(flat["tool"])
        assert {"look", "go", "submit"} <= tools

        updates = {r["id"]: r for r in _rows(db, "SELECT * FROM updates_flat")}
        items = {i.id: i for i in db.carrier_items()}
        assert len(updates) == db.count("updates") > 0
        for update in db.list_updates(limit=10_000):
            row = updates[update.id]
            assert (row["carrier"], row["op"], row["item_id"], row["actor"]) == (
                update.carrier.value, update.op.value, update.item_id, update.actor)
            assert row["item_carrier"] == (items[update.item_id].carrier.value if update.item_id in items else None)
            assert row["gate_passed"] == (None if update.gate is None else int(update.gate.passed))
            assert row["n_experiences"] == len(update.experience_ids)


def test_declared_foreign_keys_hold_and_datasette_can_follow_them(toy_run: tuple[Path, str]) -> None:
    path, _ = toy_run
    with Store(path) as db:
        assert foreign_key_problems(db) == []
        declared = {(table, str(r[3]), str(r[2]), str(r[4])) for table in ("evidence", "experience_steps")
                    for r in db.conn.execute(f"PRAGMA foreign_key_list({table})")}
        # Single-column keys (datasette links only those) to the experience, plus the compound one to the step.
        assert {("evidence", "experience", "experiences", "id"),
                ("experience_steps", "experience_id", "experiences", "id")} <= declared
        assert ("experience_steps", "idx", "steps", "idx") in declared
        assert {str(r[0]) for r in db.conn.execute("SELECT name FROM sqlite_master WHERE type = 'view'")} == set(VIEWS)
        # The new table is a ledger table: append-only like the rest.
        for sql in ("UPDATE experience_steps SET tool = 'x'", "DELETE FROM experience_steps"):
            with pytest.raises(apsw.ConstraintError, match="append-only"):
                db.conn.execute(sql)


def test_evidence_about_an_experience_not_in_the_store_is_refused_and_nothing_is_written(tmp_path: Path) -> None:
    with Store(tmp_path / "lle.db") as db:
        sw = KeysFamily().small_world(Split.train, 0)
        exp = run_episode(sw, ScriptedPolicy(oracle_actions(sw)), assess=assess_experience)
        stray = exp.evidence[0].model_copy(update={"id": "evd_01J00000000000000000000000",
                                                   "experience_id": "exp_01J00000000000000000000000"})
        before = {t: db.count(t) for t in ("experiences", "steps", "evidence")}
        with pytest.raises(InvalidInputError, match="names an experience that is not in this store"):
            db.append_experience(exp.model_copy(update={"evidence": [*exp.evidence, stray], "content_hash": ""}))
        assert {t: db.count(t) for t in before} == before


def _store_at_migration_6(source: Store, path: Path) -> None:
    """What an lle before m007 left: migrations 1–6 and the rows it writes (every table but m007's)."""
    conn = apsw.Connection(str(path))
    conn.execute("PRAGMA journal_mode=WAL")
    with conn:
        for number, name, sql in migrations()[:6]:
            conn.execute(sql)
            conn.execute("INSERT INTO lle_migrations VALUES (?, ?, 'then')", (number, name))
        conn.execute("PRAGMA user_version=6")
        for table, columns in TABLES.items():
            if table in ("experience_steps", "messages", "shared_copies"):  # m007's and m008's
                continue
            insert = f"INSERT INTO {table}({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})"
            for row in source.conn.execute(f"SELECT {', '.join(columns)} FROM {table} ORDER BY rowid"):
                conn.execute(insert, tuple(row))
    conn.close()


def test_a_store_made_at_migration_6_migrates_and_backfills(toy_run: tuple[Path, str], tmp_path: Path) -> None:
    path, _ = toy_run
    old = tmp_path / "old.db"
    with Store(path) as new:
        _store_at_migration_6(new, old)
        expected = {v: _rows(new, f"SELECT * FROM {v}") for v in (*VIEWS, "experience_steps")}
    with Store(old) as db:
        assert db.schema_version == len(migrations()) >= 7
        assert {v: _rows(db, f"SELECT * FROM {v}") for v in expected} == expected
        assert foreign_key_problems(db) == []
        assert db.integrity_check() == "ok"


# --- the prompt of each step ---------------------------------------------------------------------------------


class ChatPolicy:
    """The oracle's actions, recorded as a chat API policy records its call: the messages it was given.
    `killed_at`: interrupted (Ctrl-C during the model call) before that step, nothing of it recorded."""

    def __init__(self, inner: ScriptedPolicy, killed_at: int | None = None) -> None:
        self.inner, self.info, self.killed_at = inner, PolicyInfo(model="toy-chat"), killed_at

    def resume_from(self, history: list[Step]) -> None:
        self.inner.resume_from(history)

    def act(self, context: Context) -> tuple[Any, LLMCall]:
        if self.inner.position == self.killed_at:
            raise KeyboardInterrupt
        request, _ = self.inner.act(context)
        prompt = messages_text([{"role": m.role, "content": m.content} for m in context.messages])
        return request, LLMCall(model="toy-chat", prompt_tokens=len(prompt) // 4, prompt=prompt)


def test_a_stored_step_keeps_its_prompt_and_the_viewer_shows_it(tmp_path: Path) -> None:
    sw = KeysFamily().small_world(Split.train, 3)
    with Store(tmp_path / "lle.db") as db:
        exp = run_episode(sw, ChatPolicy(ScriptedPolicy(oracle_actions(sw))), store=db, assess=assess_experience)
        stored = db.get_experience(exp.id)
        assert stored == exp and all(s.llm is not None and s.llm.prompt for s in stored.steps)
        first = stored.steps[0]
        assert first.llm is not None and first.llm.prompt is not None
        messages = messages_of(first.llm.prompt)
        assert messages is not None and messages[-1]["role"] == "user" and sw.goal in first.llm.prompt
        assert [r[0] for r in db.conn.execute("SELECT has_prompt FROM steps WHERE experience_id = ?", (exp.id,))] \
            == [1] * len(stored.steps)
    view = transcript(Source("r", "s", tmp_path / "lle.db"), exp.id)
    shown = view.steps[0].prompt
    assert shown is not None and shown == prompt_of(first)
    assert f"── {messages[0]['role']} ──\n{messages[0]['content']}" in shown
    # A rendered chat template (the embedded model's) is shown as is; a step without one shows nothing.
    rendered = first.model_copy(update={"llm": first.llm.model_copy(update={"prompt": "<|im_start|>user\nhi"})})
    assert prompt_of(rendered) == "<|im_start|>user\nhi"
    assert prompt_of(first.model_copy(update={"llm": None})) is None


def test_a_resumed_episode_records_the_prompts_of_an_unkilled_one(tmp_path: Path) -> None:
    sw = KeysFamily().small_world(Split.train, 8)
    plan = oracle_actions(sw)
    with Store(tmp_path / "lle.db") as db:
        with pytest.raises(KeyboardInterrupt):
            run_episode(sw, ChatPolicy(ScriptedPolicy(plan), killed_at=3), store=db, record_timings=False)
        [(record, committed, _)] = list_episodes(db, unfinished=True)
        assert committed == 3
        resumed = resume(db, record.id, policy=ChatPolicy(ScriptedPolicy(plan)), record_timings=False)
    straight = run_episode(sw, ChatPolicy(ScriptedPolicy(plan)), record_timings=False)
    assert [s.llm.prompt for s in resumed.steps if s.llm] == [s.llm.prompt for s in straight.steps if s.llm]
    assert len(resumed.steps) == len(plan) and resumed.content_hash == straight.content_hash


def test_a_call_without_a_prompt_dumps_and_hashes_as_before() -> None:
    call = LLMCall(model="m", prompt_tokens=3)
    assert "prompt" not in call.model_dump(mode="json")
    assert LLMCall(model="m", prompt_tokens=3, prompt="p").model_dump(mode="json")["prompt"] == "p"


def test_long_prompts_are_stored_once_as_blobs(tmp_path: Path) -> None:
    sw = KeysFamily().small_world(Split.train, 0)
    exp = run_episode(sw, ChatPolicy(ScriptedPolicy(oracle_actions(sw))))
    long = "system prompt " * 400  # past the blob threshold
    assert len(long) > blobs.THRESHOLD
    steps = [s.model_copy(update={"llm": LLMCall(model="m", prompt=long)}) for s in exp.steps]
    with Store(tmp_path / "lle.db") as db:
        db.append_experience(exp.model_copy(update={"id": "exp_01J00000000000000000000001", "steps": steps,
                                                    "evidence": [], "content_hash": ""}))
        assert db.count("blobs") == 1  # every step's copy of the same prompt: one row
        assert all(long not in str(r[0]) for r in db.conn.execute("SELECT body FROM steps"))
        assert all(s.llm is not None and s.llm.prompt == long
                   for s in db.get_experience("exp_01J00000000000000000000001").steps)


# --- PostgreSQL: the same columns and views ---------------------------------------------------------------


@pytest.fixture(scope="module")
def pg_url() -> Iterator[str]:
    if importlib.util.find_spec("psycopg") is None:
        pytest.skip("psycopg is not installed: pip install 'lle[postgres]' (make install does)")
    if find_bin_dir() is None:
        pytest.skip("PostgreSQL is not installed: apt-get install postgresql (make test does, as root)")
    with TempServer() as server:
        yield server.new_database()


def test_postgres_gives_the_same_flat_columns_and_views(toy_run: tuple[Path, str], pg_url: str) -> None:
    path, _ = toy_run
    with Store(path) as source, Store(pg_url) as pg:
        copy_store(source, pg)  # experience_steps too, and every generated column recomputed there
        for view in VIEWS:
            assert _rows(pg, f"SELECT * FROM {view}") == _rows(source, f"SELECT * FROM {view}"), view
        listed = f"SELECT {', '.join(TABLES['experience_steps'])} FROM experience_steps"  # PostgreSQL's has a rowid
        assert _rows(pg, listed) == _rows(source, listed)
        columns = f"experience_id, idx, {', '.join(STEP_COLUMNS)}"
        assert _rows(pg, f"SELECT {columns} FROM steps") == _rows(source, f"SELECT {columns} FROM steps")
