"""Suites as data (TOML files), and budgets that load cannot decide: the toy world with its oracle."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from importlib import resources
from pathlib import Path
from typing import ClassVar

import pytest
from typer.testing import CliRunner

from lle import registry
from lle.cli.main import app
from lle.errors import InvalidInputError
from lle.flywheel.suite import BUILTIN_DIR, builtin_names, load_suite
from lle.worlds.toy.keys import KeysFamily

TOY_SUITE = """\
description = "the toy world, its manor project only"
max_steps = 20
train = 2
eval = 3

[[worlds]]
id = "toy/keys-v1"
projects = ["manor"]
"""


def lle(workspace: Path, *args: str, timeout: int = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "lle.cli.main", "--workspace", str(workspace), *args],
                          capture_output=True, text=True, timeout=timeout)


class PluginKeys(KeysFamily):
    """The toy family under an id no built-in has, registered the way a plugin's world is."""

    id: ClassVar[str] = "suitetest/keys-v1"


registry.register(PluginKeys.id, PluginKeys, replace=True)


def test_the_built_in_suites_are_toml_files_inside_the_package() -> None:
    assert builtin_names() == ["easy", "starter", "toy"]
    shipped = resources.files("lle.flywheel") / "suites" / "starter.toml"
    assert shipped.is_file() and Path(str(shipped)).parent == BUILTIN_DIR  # package data: the wheel carries it
    starter = load_suite("starter")
    assert starter.worlds[:4] == ("code/humaneval-v1", "sql/shop-v1", "math/arith-v1", "games/guess-number-v1")
    assert (starter.max_steps, starter.train_per_round, starter.eval_tasks) == (6, 8, 96)
    assert load_suite("toy").worlds == ("toy/keys-v1",)


def test_a_suite_file_may_name_any_registered_world(tmp_path: Path) -> None:
    path = tmp_path / "plugin.toml"
    path.write_text('max_steps = 4\n[[worlds]]\nid = "suitetest/keys-v1"\nprojects = ["cellar"]\n')
    suite = load_suite(str(path))
    assert suite.name == "plugin" and suite.worlds == ("suitetest/keys-v1",)
    assert suite.entries[0].projects == ("cellar",) and suite.source == str(path.resolve())


@pytest.mark.parametrize(("text", "says"), [
    ('max_steps = 4\n[[worlds]]\nid = "nowhere/nothing-v1"\n', "unknown world 'nowhere/nothing-v1'; use a world id"),
    ('max_steps = 4\n[[worlds]]\nid = "verifier/rules-v1"\n', "unknown world 'verifier/rules-v1'"),
    ('[[worlds]]\nid = "toy/keys-v1"\n', "has no 'max_steps'; add it"),
    ('max_steps = 4\n', "has no 'worlds'; add it"),
    ('max_steps = 4\n[[worlds]]\nprojects = ["manor"]\n', "has no id; add id ="),
    ('max_steps = 4\n[[worlds]]\nid = "toy/keys-v1"\nprojects = ["attic"]\n', "has no project 'attic'"),
    ('max_steps = 0\n[[worlds]]\nid = "toy/keys-v1"\n', "'max_steps' must be a whole number"),
    ('max_step = 4\n[[worlds]]\nid = "toy/keys-v1"\n', "unknown key 'max_step'"),
    ('max_steps = 4\n[[worlds]\nid = "toy/keys-v1"\n', "is not valid TOML"),
])
def test_a_bad_suite_file_is_one_line_naming_the_file_and_the_fix(tmp_path: Path, text: str, says: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(text)
    result = CliRunner().invoke(app, ["--workspace", str(tmp_path / "ws"), "run", "--suite", str(path),
                                      "--model", "oracle", "--json"])
    assert isinstance(result.exception, InvalidInputError), result.output
    message = str(result.exception)
    assert "\n" not in message and str(path.resolve()) in message and says in message, message
    assert not (tmp_path / "ws" / "runs").exists()  # refused before any run folder exists


def test_an_unknown_suite_name_or_a_missing_file_says_what_exists(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match=r"no suite 'nope'; choose one of easy, starter, toy or pass a FILE"):
        load_suite("nope")
    with pytest.raises(InvalidInputError, match=r"suite file .*missing.toml does not exist"):
        load_suite(str(tmp_path / "missing.toml"))
    result = lle(tmp_path / "ws", "run", "--suite", str(tmp_path / "missing.toml"), "--model", "oracle", timeout=60)
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1 and "missing.toml does not exist" in result.stderr


@pytest.mark.slow
def test_a_suite_file_runs_and_resumes_from_its_snapshot(tmp_path: Path) -> None:
    path = tmp_path / "manor.toml"
    path.write_text(TOY_SUITE)
    workspace = tmp_path / "ws"
    first = lle(workspace, "run", "--suite", str(path), "--model", "oracle", "--compare", "--rounds", "1",
                "--group", "1", "--json")
    assert first.returncode == 0, first.stderr
    out = json.loads(first.stdout)
    run = workspace / "runs" / out["run"]
    config = json.loads((run / "config.json").read_text())
    assert config["suite"] == str(path.resolve())
    assert (config["train_per_round"], config["eval_tasks"]) == (2, 3)  # the suite's sizes
    everything = {row["strategy"]: row for row in out["table"] if row["world"] == "all"}
    assert everything["none"]["round0"] == "3/3" and everything["lle"]["last"] == "3/3"
    # lle first: a run cut short has its verdict
    assert config["strategies"] == ["none", "lle", "lle-self", "raw", "reflect"]
    assert [(v["strategy"], v["baseline"], v["n"]) for v in out["verdict"]] == [
        ("lle", "none", 3), ("lle-self", "none", 3), ("raw", "none", 3), ("reflect", "none", 3),
        ("lle", "lle-self", 3), ("lle", "raw", 3), ("lle", "reflect", 3)]
    assert all("too few held-out tasks" in v["sentence"] for v in out["verdict"])
    assert out["verdict_by_world"]["toy/keys-v1"] == out["verdict"]  # per world: here the one world is all
    summary = json.loads((workspace / "runs" / out["run"] / "report" / "summary.json").read_text())
    assert summary["verdict"] == out["verdict"] and summary["suite"]["entries"][0]["projects"] == ["manor"]
    assert "Paired verdict" in (workspace / "runs" / out["run"] / "report" / "index.html").read_text()
    # The file changes (even to something invalid): the run goes on with the suite it started with.
    path.write_text('max_steps = 1\n[[worlds]]\nid = "nowhere/nothing-v1"\n')
    resumed = lle(workspace, "run", "--resume", out["run"], "--json")
    assert resumed.returncode == 0, resumed.stderr
    again = json.loads(resumed.stdout)
    assert again["run"] == out["run"] and again["table"] == out["table"] and again["verdict"] == out["verdict"]
    report = lle(workspace, "report", out["run"], "--json")
    assert report.returncode == 0 and json.loads(report.stdout)["verdict"] == out["verdict"]


# --- budgets that load cannot decide ------------------------------------------------------------------------

SLOW_POLICY = '''
"""A slow oracle: the toy solver, sleeping before every act (a loaded machine, a slow server)."""

import time
from dataclasses import dataclass

from lle.flywheel import loop, strategies


class SlowPolicy:
    def __init__(self, inner, delay):
        self.inner, self.delay = inner, delay

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def act(self, context):
        time.sleep(self.delay)
        return self.inner.act(context)


@dataclass
class SlowFactory:
    """Picklable, like SpecPolicyFactory, whose policies it wraps."""

    inner: strategies.SpecPolicyFactory
    delay: float

    def __call__(self, small_world):
        return SlowPolicy(self.inner(small_world), self.delay)


class SlowFlywheel(loop.Flywheel):
    delay = 0.0

    def policy_factory(self, db_path, attempt=0, adapter=None):
        return SlowFactory(super().policy_factory(db_path, attempt, adapter), self.delay)
'''

RUNNER = '''
import json, sys
from pathlib import Path

from lle.config import RunConfig
from lle.flywheel import loop
from lle.flywheel.evaluate import paired_verdicts, table
from lle.flywheel.report import load_results
from lle.store import Store
from slow_policy import SlowFlywheel


def main():
    out = {}
    for name, delay, suite in [("fast", 0.0, "toy"), ("slow", 0.2, "toy"), ("capped", 0.2, sys.argv[1])]:
        workspace = Path(sys.argv[2]) / name
        config = RunConfig(suite=suite, model="oracle", strategies=["raw"], rounds=1, train_per_round=2,
                           eval_tasks=3, workers=2, seed=4, group_size=1)
        SlowFlywheel.delay = delay
        SlowFlywheel(config, workspace).run()
        episodes = {}
        for db_name in ("baseline", "raw"):
            with Store(loop.strategy_db(loop.run_folder(config.id, workspace), db_name)) as db:
                for (exp_id,) in db.conn.execute("SELECT id FROM experiences"):
                    exp = db.get_experience(exp_id)
                    episodes[db_name + "/" + exp.small_world.id] = [
                        exp.outcome.value, [[s.request.tool, s.request.args] for s in exp.steps]]
        res = load_results(config.id, workspace)
        verdicts = paired_verdicts(loop.run_folder(config.id, workspace), config)
        out[name] = {"episodes": episodes, "table": table(res), "verdict": [v.row() for v in verdicts]}
    print(json.dumps(out))


if __name__ == "__main__":  # worker processes import this module: run only when started
    main()
'''


@pytest.mark.slow
def test_a_slow_policy_gives_the_same_outcomes_and_the_time_cap_is_counted_apart(tmp_path: Path) -> None:
    (tmp_path / "slow_policy.py").write_text(textwrap.dedent(SLOW_POLICY))
    (tmp_path / "runner.py").write_text(textwrap.dedent(RUNNER))
    capped_suite = tmp_path / "capped.toml"
    capped_suite.write_text("max_steps = 20\nmax_seconds = 0.5\n[[worlds]]\nid = \"toy/keys-v1\"\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, str(tmp_path / "runner.py"), str(capped_suite), str(tmp_path / "ws")],
                          capture_output=True, text=True, timeout=280, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout)
    fast, slow, capped = out["fast"], out["slow"], out["capped"]
    # Steps, not time, end episodes: 0.2 s an act changes nothing the agent does or gets.
    assert slow["episodes"] == fast["episodes"] and len(fast["episodes"]) == 3 + 2 + 3
    assert all(outcome == "pass" for outcome, _ in fast["episodes"].values())
    assert slow["table"] == fast["table"] and slow["verdict"] == fast["verdict"]
    # A cap that bites (0.5 s, 0.2 s an act): those episodes are marked and counted apart, never failures.
    everything = {row["strategy"]: row for row in capped["table"] if row["world"] == "all"}
    assert everything["none"]["time_capped"] == 3 and everything["none"]["round0"] == "0/0"
    assert everything["raw"]["time_capped"] == 3 and everything["raw"]["last"] == "0/0"
    assert all(row["time_capped"] == 0 for row in fast["table"])
    (verdict,) = capped["verdict"]
    assert verdict["n"] == 0 and verdict["time_capped"] == 3
