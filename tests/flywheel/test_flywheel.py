"""The flywheel end to end on the toy world with the oracle policy (the machinery, not learning)."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lle.carriers.skill_mining import used_skills
from lle.carriers.skills import SkillLibrary, SkillState
from lle.config import RunConfig
from lle.core import Outcome, Split, UpdateOp
from lle.flywheel import loop, report
from lle.flywheel.evaluate import table
from lle.flywheel.verdict import wilson
from lle.governance.lineage import revoke
from lle.store import Store


def run_config(**kw: object) -> RunConfig:
    # One attempt per train small world: the oracle's attempts would all be alike (groups: test_groups.py).
    base: dict[str, object] = {"suite": "toy", "model": "oracle", "strategies": ["none", "raw", "lle"], "rounds": 2,
                               "train_per_round": 4, "eval_tasks": 4, "workers": 2, "group_size": 1}
    base.update(kw)
    return RunConfig.model_validate(base)


def projection(db_path: Path) -> dict[tuple[str, str], object]:
    """What must not depend on kills: per (batch, task), the trajectory and the outcome."""
    out: dict[tuple[str, str], object] = {}
    with Store(db_path) as db:
        rows = db.conn.execute("SELECT e.batch, e.batch_key, e.id FROM episodes e JOIN experiences x ON x.id=e.id")
        for batch, key, exp_id in rows:
            exp = db.get_experience(str(exp_id))
            out[(str(batch).split("/", 1)[1], str(key))] = (
                [(s.request.tool, s.request.args, s.executed.allowed, s.effect.observation) for s in exp.steps],
                exp.outcome.value, exp.verification.value)
    return out


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, RunConfig]:
    workspace = tmp_path_factory.mktemp("ws")
    config = run_config()
    loop.Flywheel(config, workspace).run()
    return workspace, config


@pytest.mark.slow
def test_a_run_evaluates_every_round_and_reports(finished_run: tuple[Path, RunConfig]) -> None:
    workspace, config = finished_run
    res = report.load_results(config.id, workspace)
    assert res.total("none", 0).n == 4
    for strategy in ("raw", "lle"):
        assert [r for r, cell in res.curve(strategy) if cell.n == 4] == [0, 1, 2]
        assert res.total(strategy, 2).passed == 4  # the oracle solves every toy task: evidence agrees
    rows = table(res)
    assert {(r["world"], r["strategy"]) for r in rows} == {(w, s) for w in ("toy/keys-v1", "all")
                                                          for s in ("none", "raw", "lle")}
    assert res.carriers["lle"].get("memory", 0) > 0 and res.carriers["raw"]["memory"] == 8
    page = report.write_report(res, workspace)
    html = page.read_text()
    refs = re.findall(r'(?:src|href)="([^"#]+)"', html)
    # Self-contained: plots inline, every other reference a file written beside the page.
    assert "<svg" in html and all((page.parent / r).is_file() for r in refs)
    assert loop.list_runs(workspace)[0]["finished_at"]


@pytest.mark.slow
def test_no_dev_or_test_task_reaches_any_carrier(finished_run: tuple[Path, RunConfig]) -> None:
    workspace, config = finished_run
    folder = loop.run_folder(config.id, workspace)
    for strategy in ("raw", "lle"):
        with Store(loop.strategy_db(folder, strategy)) as db:
            items = db.carrier_items()
            assert items
            for item in items:
                for exp_id in item.experience_ids:
                    assert db.get_experience(exp_id).small_world.split is Split.train
            for update in db.list_updates(limit=100_000):
                for exp_id in update.experience_ids:
                    assert db.get_experience(exp_id).small_world.split is Split.train, update
            dev_ids = {r[0] for r in db.conn.execute(
                "SELECT small_world_id FROM experiences WHERE split != 'train'")}
            provenance = json.dumps([i.model_dump(mode="json") for i in items])
            assert dev_ids and not any(d in provenance for d in dev_ids)


@pytest.mark.slow
def test_skills_are_replayed_then_offered_in_later_episodes(finished_run: tuple[Path, RunConfig]) -> None:
    workspace, config = finished_run
    with Store(loop.strategy_db(loop.run_folder(config.id, workspace), "lle")) as db:
        library = SkillLibrary(db)
        active = {s.item_id: s for s in library.skills() if s.state is SkillState.active}
        assert active, [(s.name, s.state) for s in library.skills()]
        for skill_id in active:
            activation = next(u for u in db.list_updates(limit=100_000)
                              if u.item_id == skill_id and u.op is UpdateOp.activate)
            replays = [db.get_experience(e) for e in activation.experience_ids]
            assert len(replays) >= 8 and all(e.small_world.split is Split.train for e in replays)
        batches = dict(db.conn.execute("SELECT id, batch FROM episodes"))
        last_eval = [db.get_experience(e.id) for e in db.list_experiences(limit=10_000)
                     if batches[e.id].endswith("/r2/eval")]
        used_in_eval = [e for e in last_eval if set(used_skills(e)) & set(active)]
        assert used_in_eval and all(e.outcome is Outcome.passed for e in used_in_eval)
        assert not db.conn.execute("SELECT 1 FROM routed r JOIN episodes e ON e.id = r.experience_id"
                                   " WHERE e.batch LIKE '%/skill/%' OR e.batch LIKE '%/eval'").fetchone()


@pytest.mark.slow
def test_the_report_lists_revocations_and_growth(tmp_path: Path, finished_run: tuple[Path, RunConfig]) -> None:
    source, config = finished_run
    workspace = tmp_path / "ws"
    shutil.copytree(source, workspace)  # revoke in a copy: the other tests read the finished run as it was
    with Store(loop.strategy_db(loop.run_folder(config.id, workspace), "lle")) as db:
        train = next(e for e in db.list_experiences(limit=1000) if e.split == Split.train.value)
        rev = revoke(db, train.id, "a person found this episode wrong", "reviewer")
        assert rev.cascade  # its memory (and more) went with it
    res = report.load_results(config.id, workspace)
    assert res.revoked["lle"] == 1 and res.revocations["lle"][0].target == train.id
    assert [round_ for round_ in sorted(res.growth["lle"])] == [0, 1, 2]
    assert res.growth["lle"][0] == {} and res.growth["lle"][2]["memory"] >= res.growth["lle"][1]["memory"] > 0
    html = report.write_report(res, workspace).read_text()
    assert train.id in html and "a person found this episode wrong" in html and "carrier items admitted" in html


@pytest.mark.slow
def test_the_poison_scenario_reaches_raw_logs_but_not_rules_or_skills(tmp_path: Path) -> None:
    config = run_config(strategies=["none", "raw", "lle"], rounds=1, train_per_round=8, scenario="poison")
    loop.Flywheel(config, tmp_path).run()
    res = report.load_results(config.id, tmp_path)
    assert res.poison["raw"]["memory:injected"] > 0 and res.poison["raw"]["memory:preference"] > 0
    lle = res.poison["lle"]
    assert lle["rules:injected"] == lle["rules:preference"] == lle["skills:injected"] == lle["skills:preference"] == 0
    assert res.total("lle", 1).passed == res.total("none", 0).passed  # held-out success did not move
    assert "Poison scenario" in report.write_report(res, tmp_path).read_text()


@pytest.mark.slow
def test_a_repeated_skill_replay_reads_back_its_episodes_and_decides_once(
        tmp_path: Path, finished_run: tuple[Path, RunConfig]) -> None:
    source, config = finished_run
    workspace = tmp_path / "ws"
    shutil.copytree(source, workspace)
    db_path = loop.strategy_db(loop.run_folder(config.id, workspace), "lle")

    def replays() -> dict[str, int]:
        with Store(db_path) as db:
            return dict(db.conn.execute("SELECT batch, count(*) FROM episodes WHERE batch LIKE '%/skill/%' "
                                        "GROUP BY batch").fetchall())

    before = replays()
    assert before
    loop.Flywheel(config, workspace).validate_skills(db_path, 2)  # as a run resumed after round 2's replays
    after = replays()
    assert all(after[batch] == n for batch, n in before.items())  # read back, not played again
    with Store(db_path) as db:
        decisions = [(u.item_id, u.op, tuple(u.experience_ids)) for u in db.list_updates(limit=100_000)
                     if u.carrier.value == "skills" and u.gate and u.gate.name == "skills_replay"]
    assert len(decisions) == len(set(decisions))


def test_wilson_interval() -> None:
    low, high = wilson(8, 10)
    assert 0.49 < low < 0.5 and 0.94 < high < 0.95
    assert wilson(0, 0) == (0.0, 1.0)


@pytest.mark.slow
def test_a_killed_run_resumes_to_the_same_experiences(tmp_path: Path,
                                                      finished_run: tuple[Path, RunConfig]) -> None:
    _, reference = finished_run
    workspace = tmp_path / "ws"
    args = [sys.executable, "-m", "lle.cli.main", "--workspace", str(workspace), "run", "--suite", "toy",
            "--model", "oracle", "--compare", "--rounds", "2", "--train", "4", "--eval", "4", "--group", "1", "--json"]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    child = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, start_new_session=True)
    deadline = time.monotonic() + 120
    runs = workspace / "runs"
    # Kill it mid-run: once the lle strategy has committed some episodes.
    while time.monotonic() < deadline:
        dbs = list(runs.glob("*/lle.db")) if runs.exists() else []
        if dbs and dbs[0].stat().st_size > 0:
            with Store(dbs[0]) as db:
                if db.count("experiences") >= 3:
                    break
        time.sleep(0.2)
    os.killpg(child.pid, signal.SIGKILL)
    child.wait()
    run_id = next(runs.iterdir()).name
    resumed = subprocess.run([*args[:5], "run", "--resume", run_id, "--json"], capture_output=True, text=True,
                             timeout=300, env=env)
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout)["run"] == run_id
    killed_folder = runs / run_id
    ref_folder = loop.run_folder(reference.id, finished_run[0])
    for name in ("baseline", "raw", "lle"):
        got = {(b.split("/", 1)[1], k): v for (b, k), v in projection(loop.strategy_db(killed_folder, name)).items()}
        want = {(b.split("/", 1)[1], k): v for (b, k), v in projection(loop.strategy_db(ref_folder, name)).items()}
        assert got == want, name
        with Store(loop.strategy_db(killed_folder, name)) as db:
            assert db.integrity_check() == "ok"
            routed = db.conn.execute("SELECT count(*), count(DISTINCT experience_id) FROM routed").fetchone()
            assert routed[0] == routed[1]
