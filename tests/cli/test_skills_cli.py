"""`lle skills` over skills mined from real toy-world episodes: in-process through typer's runner, and
in a real process where the one-line error matters."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from lle.carriers.skills import SkillLibrary
from lle.cli.main import app
from lle.core import Split
from lle.evidence import assess_experience
from lle.runtime.harness import run_episode
from lle.store import Store
from lle.worlds.toy import KeysFamily, oracle_policy


def lle_process(workspace: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "lle.cli.main", "--workspace", str(workspace), *args],
                          capture_output=True, text=True, timeout=60)


class Result:
    def __init__(self, returncode: int, stdout: str) -> None:
        self.returncode, self.stdout = returncode, stdout


def lle(workspace: Path, *args: str) -> Result:
    result = CliRunner().invoke(app, ["--workspace", str(workspace), *args])
    return Result(result.exit_code, result.stdout)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    with Store(ws / "lle.db") as db:
        library = SkillLibrary(db)
        for seed in range(5):
            sw = KeysFamily().small_world(Split.train, seed)
            library.observe(run_episode(sw, oracle_policy(sw), store=db, assess=assess_experience))
    return ws


@pytest.mark.slow
def test_list_show_export_import_retire(workspace: Path, tmp_path: Path) -> None:
    rows = json.loads(lle(workspace, "skills", "list", "--json").stdout)
    take = next(r for r in rows if r["name"] == "take_key_go")
    assert take["state"] == "candidate" and take["macro"] == 'take(item="key") -> go(direction=$direction)'
    shown = json.loads(lle(workspace, "skills", "show", "take_key_go", "--json").stdout)
    assert shown["id"] == take["id"] and shown["updates"][0]["op"] == "propose"
    assert len(shown["lineage"]["experience_ids"]) >= 3
    assert "take(item=\"key\")" in lle(workspace, "skills", "show", take["id"]).stdout
    exported = tmp_path / "take.json"
    assert lle(workspace, "skills", "export", "take_key_go", "--output", str(exported)).returncode == 0
    assert json.loads(exported.read_text())["id"] == take["id"]
    assert json.loads(lle(workspace, "skills", "export", take["id"]).stdout)["name"] == "take_key_go"
    other = tmp_path / "other"
    imported = json.loads(lle(other, "skills", "import", str(exported), "--json").stdout)
    assert imported["state"] == "candidate" and imported["id"] != take["id"]
    again = lle_process(other, "skills", "import", str(exported))
    assert again.returncode == 2 and "already here" in again.stderr and "Traceback" not in again.stderr
    assert lle(workspace, "skills", "retire", "take_key_go").returncode != 0  # --reason is required
    done = lle(workspace, "skills", "retire", "take_key_go", "--reason", "a better one exists", "--author", "dee")
    assert done.returncode == 0, done.stdout
    retired = json.loads(lle(workspace, "skills", "list", "--state", "retired", "--json").stdout)
    assert [r["id"] for r in retired] == [take["id"]]
    last = json.loads(lle(workspace, "skills", "show", take["id"], "--json").stdout)["updates"][-1]
    assert last["op"] == "retire" and last["gate"]["reasons"] == ["a better one exists"] and last["actor"] == "dee"
    missing = lle_process(workspace, "skills", "show", "no_such_skill")
    assert missing.returncode == 2 and "lle skills list" in missing.stderr
