"""`lle episodes run|resume|list` in real processes, including a SIGKILL mid-episode."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lle.core import Split
from lle.store import Store
from lle.worlds.toy import KeysFamily, oracle_actions


def lle(workspace: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "lle.cli.main", "--workspace", str(workspace), *args],
                          capture_output=True, text=True, timeout=60)


def write_script(path: Path, actions: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(a) + "\n" for a in actions))
    return path


def test_run_stores_the_episode_and_show_renders_requested_executed_effect(tmp_path: Path) -> None:
    sw = KeysFamily().small_world(Split.dev, 3)
    plan = [a.model_dump(mode="json") for a in oracle_actions(sw)]
    plan.insert(1, {"tool": "smash", "args": {"target": "door"}, "thought": "quicker"})
    script = write_script(tmp_path / "plan.jsonl", plan)
    ws = tmp_path / "ws"
    result = lle(ws, "episodes", "run", "toy/keys-v1", "--seed", "3", "--split", "dev", "--policy",
                 f"scripted:{script}")
    assert result.returncode == 0, result.stderr
    exp_id = result.stdout.strip()
    assert exp_id.startswith("exp_") and "\n" not in exp_id
    assert f"{len(plan)} steps, ended by Submitted" in result.stderr
    with Store(ws / "lle.db") as db:
        exp = db.get_experience(exp_id)
    assert exp.small_world == sw and exp.policy.params["source"] == f"scripted:{script.resolve()}"
    shown = lle(ws, "experiences", "show", exp_id).stdout
    assert "requested  smash {\"target\": \"door\"}" in shown
    assert "executed   DENIED: tool 'smash' is not allowed in this small world" in shown
    assert "effect     You step into the vault." in shown and "state room: " in shown
    assert "outcome pass  verification hard_anchor" in shown  # assessed by the world's anchor when stored


@pytest.mark.slow
def test_a_killed_cli_episode_is_listed_and_resumed(tmp_path: Path) -> None:
    script = write_script(tmp_path / "looks.jsonl", [{"tool": "look", "args": {}}] * 400)
    ws = tmp_path / "ws"
    ws.mkdir()
    Store(ws / "lle.db").close()  # migrated before the run, so the poll below can read it
    child = subprocess.Popen([sys.executable, "-m", "lle.cli.main", "--workspace", str(ws), "episodes", "run",
                              "toy/keys-v1", "--policy", f"scripted:{script}", "--max-steps", "400"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 30
    with Store(ws / "lle.db") as db:
        while db.count("steps") < 20 and time.monotonic() < deadline and child.poll() is None:
            time.sleep(0.01)
    child.send_signal(signal.SIGKILL)
    child.wait()
    listed = json.loads(lle(ws, "episodes", "list", "--unfinished", "--json").stdout)
    assert len(listed) == 1 and 20 <= listed[0]["steps"] < 400 and not listed[0]["finished"]
    resumed = lle(ws, "episodes", "resume", listed[0]["id"])
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stdout.strip() == listed[0]["id"] and "400 steps, ended by StepLimit" in resumed.stderr
    with Store(ws / "lle.db") as db:
        assert [s.index for s in db.steps_of(listed[0]["id"])] == list(range(400))
        assert db.integrity_check() == "ok"
    assert json.loads(lle(ws, "episodes", "list", "--unfinished", "--json").stdout) == []


@pytest.mark.parametrize(("args", "needle"), [
    (["--split", "holdout"], "--split 'holdout' is not a split"),
    (["--policy", "scripted:/no/such/file.jsonl"], "cannot read the script /no/such/file.jsonl"),
    (["--policy", "scripted:"], "names no file"),
])
def test_bad_input_is_one_line_with_the_fix(tmp_path: Path, args: list[str], needle: str) -> None:
    script = write_script(tmp_path / "s.jsonl", [{"tool": "submit", "args": {}}])
    base = {"--split": "train", "--policy": f"scripted:{script}"}
    base.update(dict(zip(args[::2], args[1::2], strict=True)))
    flat = [x for kv in base.items() for x in kv]
    result = lle(tmp_path / "ws", "episodes", "run", "toy/keys-v1", *flat)
    assert result.returncode == 2 and needle in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "ws" / "lle.db").exists() or Store(tmp_path / "ws" / "lle.db").count("steps") == 0


def test_unknown_world_and_episode_ids_say_what_exists(tmp_path: Path) -> None:
    script = write_script(tmp_path / "s.jsonl", [{"tool": "submit", "args": {}}])
    unknown = lle(tmp_path / "ws", "episodes", "run", "toy/nowhere-v1", "--policy", f"scripted:{script}")
    assert unknown.returncode == 2 and "no registered id 'toy/nowhere-v1'; known: toy/keys-v1" in unknown.stderr
    missing = lle(tmp_path / "ws", "episodes", "resume", "exp_nope")
    assert missing.returncode == 2 and "no episode with id 'exp_nope'" in missing.stderr


def test_levers_are_parsed_and_bad_ones_are_one_line_errors() -> None:
    from lle.cli.episodes import parse_levers
    from lle.config import Levers
    from lle.errors import InvalidInputError

    assert parse_levers("off") == Levers()
    assert parse_levers("all") == Levers(stuck="mask", submit_discipline=True, working_memory=True, skills_first=True,
                                         admissible_masks=True)
    assert parse_levers("note, submit") == Levers(stuck="note", submit_discipline=True)
    with pytest.raises(InvalidInputError, match="unknown lever fly"):
        parse_levers("stuck,fly")
