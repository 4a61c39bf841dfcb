"""`lle evidence add|list` and the evidence part of `lle experiences show`, in real processes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from lle.core import Split
from lle.evidence import assess_experience
from lle.policies.scripted import ScriptedPolicy
from lle.runtime.harness import run_episode
from lle.store import Store
from lle.worlds.toy.keys import KeysFamily, oracle_actions


def lle(workspace: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "lle.cli.main", "--workspace", str(workspace), *args],
                          capture_output=True, text=True, timeout=60)


def test_human_verdict_is_appended_and_shown(tmp_path: Path) -> None:
    sw = KeysFamily().small_world(Split.train, 1)
    exp = assess_experience(run_episode(sw, ScriptedPolicy(oracle_actions(sw))))
    with Store(tmp_path / "lle.db") as db:
        db.append_experience(exp)
    shown = lle(tmp_path, "experiences", "show", exp.id)
    assert "verification hard_anchor" in shown.stdout and "credit" in shown.stdout and "state" in shown.stdout
    added = lle(tmp_path, "evidence", "add", exp.id, "--outcome", "fail", "--note", "the vault was the wrong one",
                "--author", "reviewer")
    assert added.returncode == 0, added.stderr
    assert "outcome now fail" in added.stdout  # a person's fail outweighs the world's pass
    listed = json.loads(lle(tmp_path, "evidence", "list", exp.id, "--json").stdout)
    assert [e["anchor"] for e in listed][-1] == "human" and listed[-1]["detail"]["author"] == "reviewer"
    assert "(1 added later)" in lle(tmp_path, "experiences", "show", exp.id).stdout
    with Store(tmp_path / "lle.db") as db:
        assert db.get_experience(exp.id) == exp  # the stored record itself is unchanged
    bad = lle(tmp_path, "evidence", "add", exp.id, "--outcome", "maybe", "--note", "x")
    assert bad.returncode == 2 and "pass or fail" in bad.stderr
    assert lle(tmp_path, "evidence", "list", "exp_missing").returncode == 2
