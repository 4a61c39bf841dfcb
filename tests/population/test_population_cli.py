"""`lle population run FILE` and `lle population messages`, end to end in real processes (toy world, oracle)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

TOY = """
name = "toy-duo"
world = "toy/keys-v1"
train = 8
max_steps = 20
replay = 4

[[agents]]
name = "a"
model = "oracle"

[[agents]]
name = "b"
model = "oracle"
train_start = 100
"""


def lle(workspace: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src")}
    return subprocess.run([sys.executable, "-m", "lle.cli.main", "--workspace", str(workspace), *args],
                          capture_output=True, text=True, timeout=300, env=env)


def test_run_then_list_messages(tmp_path: Path) -> None:
    file = tmp_path / "toy.toml"
    file.write_text(TOY)
    ran = lle(tmp_path / "ws", "population", "run", str(file), "--json")
    assert ran.returncode == 0, ran.stderr
    report = json.loads(ran.stdout)
    [first] = report["rounds"]
    assert first["pass_at_population"] == first["tasks"] == 8 and first["best_single"]["solved"] == 8
    assert first["sharing"]["shared"] >= 1  # a skill its owner's replay activated was offered
    assert (tmp_path / "ws" / "populations" / "toy-duo" / "agents" / "a.db").is_file()
    listed = lle(tmp_path / "ws", "population", "messages", "--json", "--intent", "share")
    assert listed.returncode == 0, listed.stderr
    shares = json.loads(listed.stdout)
    assert len(shares) == first["sharing"]["shared"] and {m["intent"] for m in shares} == {"share"}
    assert all(m["skill_ids"] and m["payload"]["descriptor"]["format"] == "lle-skill/1" for m in shares)


def test_a_bad_population_file_is_one_line(tmp_path: Path) -> None:
    file = tmp_path / "bad.toml"
    file.write_text(TOY.replace('model = "oracle"', "model = 3", 1))
    ran = lle(tmp_path / "ws", "population", "run", str(file))
    assert ran.returncode == 2 and "Traceback" not in ran.stderr
    [line] = ran.stderr.strip().splitlines()
    assert str(file) in line and "agents[0] (a).model" in line
    none = lle(tmp_path / "empty", "population", "messages")
    assert none.returncode == 2 and "lle population run FILE" in none.stderr


def test_a_population_draws_several_worlds_in_turn(tmp_path: Path) -> None:
    from lle.errors import InvalidInputError
    from lle.population.config import parse_population
    from lle.population.run import train_worlds

    two = TOY.replace('world = "toy/keys-v1"', 'world = ["math/arith-v1", "math/equations-v1"]\nlevel = 0')
    config = parse_population(two, origin="two.toml")
    assert [sw.id for sw in train_worlds(config, 4, 0)] == [
        "math/arith-v1:train:L0:0", "math/equations-v1:train:L0:0", "math/arith-v1:train:L0:1",
        "math/equations-v1:train:L0:1"]
    assert {sw.project for sw in train_worlds(config, 4, 0)} == {"basic_arithmetic", "simple_equations"}
    for bad, fix in (('["math/arith-v1", "math/nope-v1"]', "world:"), ("[]", "empty list")):
        try:
            parse_population(TOY.replace('"toy/keys-v1"', bad), origin="bad.toml")
        except InvalidInputError as err:
            assert "bad.toml" in str(err) and fix in str(err) and "\n" not in str(err)
        else:
            raise AssertionError(f"world = {bad} was accepted")


def test_an_agents_skill_replays_play_under_its_own_levers_and_the_populations_step_limit(tmp_path: Path) -> None:
    from lle.store import Store
    from lle.store.episodes import get_episode

    file = tmp_path / "toy.toml"
    file.write_text(TOY.replace("max_steps = 20", "max_steps = 15").replace(
        'train_start = 100', 'train_start = 100\n[agents.levers]\nstuck = "note"'))
    ran = lle(tmp_path / "ws", "population", "run", str(file), "--json")
    assert ran.returncode == 0, ran.stderr
    agents = tmp_path / "ws" / "populations" / "toy-duo" / "agents"
    for name, stuck in (("a", "off"), ("b", "note")):
        with Store(agents / f"{name}.db") as db:
            ids = [str(r[0]) for r in db.conn.execute("SELECT id FROM episodes")]
            records = [get_episode(db, i) for i in ids]
        assert len(records) > 8  # its 8 explored small worlds and the skill replays (own or an import's)
        assert {(r.limits.max_steps, r.levers.stuck) for r in records} == {(15, stuck)}
