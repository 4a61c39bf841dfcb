"""`lle verifier-cases …` and `lle export …` end to end on a real workspace: the typer app in process (fast),
and the installed entry point in a real process for what only a process shows (exit codes, one-line errors)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import datasets  # type: ignore[import-untyped]
import pytest
from typer.testing import CliRunner

from lle.cli.main import app
from lle.core import ActionRequest, Split
from lle.errors import InvalidInputError
from lle.evidence import assess_experience
from lle.policies.scripted import ScriptedPolicy
from lle.runtime.harness import run_episode
from lle.store import Store
from lle.worlds.toy.keys import KeysFamily, oracle_actions


def process(workspace: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "lle.cli.main", "--workspace", str(workspace), *args],
                          capture_output=True, text=True, timeout=120)


def ok(workspace: Path, *args: str) -> str:
    result = CliRunner().invoke(app, ["--workspace", str(workspace), *args])
    assert result.exit_code == 0, (result.output, result.exception)
    return result.stdout


@pytest.mark.slow
def test_cases_and_exports_from_the_command_line(tmp_path: Path) -> None:
    keys = KeysFamily()
    ids = []
    with Store(tmp_path / "lle.db") as db:
        for seed in (0, 1):
            sw = keys.small_world(Split.train, seed)
            ids.append(run_episode(sw, ScriptedPolicy(oracle_actions(sw)), store=db, assess=assess_experience).id)
        sw = keys.small_world(Split.train, 0)
        fail = [*oracle_actions(sw)[:1], ActionRequest(tool="submit")]
        ids.append(run_episode(sw, ScriptedPolicy(fail), store=db, assess=assess_experience).id)
    first, second, failed = ids

    # A person fails a pass the world's anchor accepted: a candidate case, approved, with its reason.
    ok(tmp_path, "evidence", "add", second, "--outcome", "fail", "--note", "decoy vault", "--author", "carol")
    assert "proposed itm_" in ok(tmp_path, "verifier-cases", "scan")
    [case] = json.loads(ok(tmp_path, "verifier-cases", "list", "--json"))
    assert (case["state"], case["family"], case["experience_id"], case["caught_by"]) == \
        ("candidate", "toy", second, "human")
    approved = json.loads(ok(tmp_path, "verifier-cases", "approve", case["id"], "--reason", "confirmed",
                             "--author", "lead", "--json"))
    assert approved["op"] == "admit" and approved["actor"] == "lead"
    again = CliRunner().invoke(app, ["--workspace", str(tmp_path), "verifier-cases", "reject", case["id"],
                                     "--reason", "too late"])
    assert isinstance(again.exception, InvalidInputError) and "is active" in str(again.exception)
    assert json.loads(ok(tmp_path, "verifier-cases", "list", "--state", "active", "--json"))[0]["id"] == case["id"]

    sft = json.loads(ok(tmp_path, "export", "dataset", "--format", "sft", "--json"))
    assert sft["admitted_now"] == 3 and sft["experience_ids"] == [first]  # `second` is a fail now
    rows = datasets.load_dataset("json", data_files=sft["path"], split="train")
    assert len(rows) == len(oracle_actions(keys.small_world(Split.train, 0))) and rows[0]["snapshot_id"] == sft["id"]
    dpo = json.loads(ok(tmp_path, "export", "dataset", "--format", "dpo", "--out", str(tmp_path / "out"),
                        "--json"))
    assert dpo["n_rows"] == 1 and set(dpo["experience_ids"]) == {first, failed}
    assert Path(dpo["path"]).parent.parent == tmp_path / "out" and (Path(dpo["path"]).parent / "manifest.json").exists()

    ok(tmp_path, "revoke", failed, "--reason", "bad run", "--author", "lead")
    listed = {s["id"]: s for s in json.loads(ok(tmp_path, "export", "list", "--json"))}
    assert not listed[sft["id"]]["tainted"]
    assert listed[dpo["id"]]["tainted"] and failed in listed[dpo["id"]]["tainted_by"]

    assert "yes" in process(tmp_path, "export", "list").stdout
    bad = process(tmp_path, "export", "dataset", "--format", "parquet")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "not one of sft, dpo, rl" in bad.stderr
