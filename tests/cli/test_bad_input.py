"""Bad input and a hostile disk, end to end in real processes: each ends in one line that names the input
and the fix (exit 2, never a traceback), and the stored files stay as they were where nothing may be written."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from lle.config import RunConfig
from lle.core import Experience
from lle.store import Store

as_root = pytest.mark.skipif(os.geteuid() != 0, reason="mounting a read-only or a tiny filesystem needs root")


def lle(workspace: Path, *args: str, stdin: str | None = None, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "lle.cli.main", "--workspace", str(workspace), *args],
                          capture_output=True, text=True, input=stdin, timeout=timeout)


def files(folder: Path) -> dict[str, bytes]:
    """Every file under `folder`, by relative path, with its bytes."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def assert_one_line_error(result: subprocess.CompletedProcess[str], *needles: str) -> str:
    assert "Traceback" not in result.stderr, result.stderr
    assert result.returncode == 2, (result.returncode, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


@pytest.fixture
def workspace(tmp_path: Path, make_experience: Callable[..., Experience]) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    with Store(ws / "lle.db") as db:
        db.append_experiences([make_experience(), make_experience(project="library")])
    return ws


@contextlib.contextmanager
def mounted(target: Path, *options: str) -> Iterator[Path]:
    target.mkdir(exist_ok=True)
    subprocess.run(["mount", *options, str(target)], check=True)
    try:
        yield target
    finally:
        subprocess.run(["umount", "-l", str(target)], check=False)


# --- a hostile disk ---------------------------------------------------------------------------------------


@as_root
def test_a_read_only_workspace_reads_and_refuses_writes_with_the_reason(workspace: Path, tmp_path: Path,
                                                                        make_experience: Callable[..., Experience]
                                                                        ) -> None:
    exp_file = tmp_path / "one.jsonl"
    exp_file.write_text(make_experience(project="clinic").model_dump_json() + "\n")
    with mounted(tmp_path / "ro", "--bind", str(workspace)) as ro:
        subprocess.run(["mount", "-o", "remount,bind,ro", str(ro)], check=True)
        before = files(ro)
        listed = lle(ro, "experiences", "list", "--json")
        assert listed.returncode == 0, listed.stderr
        rows = json.loads(listed.stdout)
        assert [r["project"] for r in rows] == ["shop", "library"]
        for args in (["updates", "list"], ["episodes", "list"], ["experiences", "show", rows[0]["id"]]):
            done = lle(ro, *args)
            assert done.returncode == 0 and "Traceback" not in done.stderr, (args, done.stderr)
        assert_one_line_error(lle(ro, "experiences", "import", str(exp_file)), "read-only", "--workspace")
        assert_one_line_error(lle(ro, "revoke", rows[0]["id"], "--reason", "test"), "read-only")
        assert files(ro) == before
    fresh = tmp_path / "ro-empty"
    with mounted(fresh, "-t", "tmpfs", "-o", "size=1m,ro", "tmpfs"):
        assert_one_line_error(lle(fresh / "ws", "experiences", "list"), "--workspace")


@as_root
def test_a_full_disk_names_the_store_and_leaves_nothing_half_written(tmp_path: Path,
                                                                     make_experience: Callable[..., Experience]
                                                                     ) -> None:
    big = tmp_path / "big.jsonl"
    # 40 experiences of ~100 KB each (distinct, so no blob is shared): far more than the 2 MB disk holds.
    big.write_text("".join(make_experience(project=f"p{i}", observation=os.urandom(50_000).hex()).model_dump_json()
                           + "\n" for i in range(40)))
    with mounted(tmp_path / "full", "-t", "tmpfs", "-o", "size=2m", "tmpfs") as disk:
        ws = disk / "ws"
        ws.mkdir()
        with Store(ws / "lle.db") as db:
            db.append_experience(make_experience())
        line = assert_one_line_error(lle(ws, "experiences", "import", str(big)), "disk is full while writing",
                                     "lle.db", "free space")
        assert "resume continues" in line
        listed = lle(ws, "experiences", "list", "--json")
        assert listed.returncode == 0, listed.stderr
        assert [r["project"] for r in json.loads(listed.stdout)] == ["shop"]  # all or nothing
        with Store(ws / "lle.db") as db:
            assert db.integrity_check() == "ok"


# --- bad files ----------------------------------------------------------------------------------------------


def test_random_bytes_as_a_scripted_policy_or_an_import_file(workspace: Path, tmp_path: Path) -> None:
    noise = tmp_path / "noise.bin"
    noise.write_bytes(bytes(range(256)) * 8 + os.urandom(2048))
    before = files(workspace)
    assert_one_line_error(lle(workspace, "episodes", "run", "toy/keys-v1", "--policy", f"scripted:{noise}"),
                          str(noise), "UTF-8")
    assert_one_line_error(lle(workspace, "experiences", "import", str(noise)), str(noise), "UTF-8")
    assert files(workspace) == before


def test_import_files_past_the_readers_bounds(workspace: Path, tmp_path: Path) -> None:
    cases = {"latin1.json": b"\xff\xfe[", "nested.json": b"[" * 200_000 + b"]" * 200_000,
             "digits.json": b'{"id": ' + b"9" * 5000 + b"}"}
    before = files(workspace)
    for name, body in cases.items():
        (tmp_path / name).write_bytes(body)
        for noun in ("experiences", "skills"):
            assert_one_line_error(lle(workspace, noun, "import", str(tmp_path / name)), name)
    assert files(workspace) == before


def test_export_onto_a_file_and_revoking_an_unknown_model_write_nothing(workspace: Path, tmp_path: Path) -> None:
    target = tmp_path / "passwd"
    target.write_text("root:x:0:0\n")
    before = files(workspace)
    assert_one_line_error(lle(workspace, "export", "dataset", "--format", "sft", "--out", str(target)), str(target),
                          "folder")
    assert_one_line_error(lle(workspace, "revoke", "model:nope", "--reason", "typo"), "'nope'", "lle models list")
    assert files(workspace) == before and target.read_text() == "root:x:0:0\n"


def test_a_damaged_finish_marker_or_replay_choice_is_named(workspace: Path) -> None:
    config = RunConfig(suite="toy", model="oracle", strategies=["lle"], rounds=1, train_per_round=4, eval_tasks=1,
                       workers=1)
    folder = _save_run(workspace, config)
    (folder / "finished_at").write_bytes(b"\xff\xfe")
    listed = lle(workspace, "runs", "list", "--json")
    assert listed.returncode == 0 and json.loads(listed.stdout)[0]["finished_at"] is None, listed.stderr
    assert "finished_at is damaged" in listed.stderr and "Traceback" not in listed.stderr
    assert_one_line_error(lle(workspace, "runs", "show", config.id), str(folder / "finished_at"), "--resume")
    (folder / "finished_at").unlink()
    (folder / "replays").mkdir()
    (folder / "replays" / "r1-skills.json").write_bytes(b"\xff{[")
    assert_one_line_error(lle(workspace, "run", "--resume", config.id, "--json"), "r1-skills.json", "damaged")


def test_store_locations_no_backend_opens_are_refused_and_nothing_is_written(workspace: Path, tmp_path: Path) -> None:
    folder = tmp_path / "folder"
    folder.mkdir()
    source, before = str(workspace / "lle.db"), files(workspace)
    for location, needle in (("mysql://u@h/db", "not mysql"), ("postgresql://[::1", "does not parse"),
                             ("postgresql://u@h:99999/db", "does not parse"), (str(folder), "is a folder")):
        assert_one_line_error(lle(workspace, "store", "copy", source, location), needle)
        env = {**os.environ, "LLE_STORE_URL": location}
        read = subprocess.run([sys.executable, "-m", "lle.cli.main", "experiences", "list"], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=60)
        assert_one_line_error(read, needle)
    assert files(workspace) == before and not list(folder.iterdir())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["folder", "ws"]  # no mysql: folder written


def test_limits_past_what_sqlite_holds_are_refused(workspace: Path) -> None:
    huge = "99999999999999999999"
    assert_one_line_error(lle(workspace, "memory", "list", "--limit", huge), "--limit", "less than")
    assert_one_line_error(lle(workspace, "memory", "search", "x", "-k", huge), "-k", "less than")
    assert_one_line_error(lle(workspace, "store", "search", "x", "--limit", huge), "--limit", "less than")


def _save_run(workspace: Path, config: RunConfig) -> Path:
    folder = workspace / "runs" / config.id
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(config.model_dump_json(indent=2))
    return folder


def test_a_damaged_run_config_is_named_and_the_other_runs_listed(workspace: Path) -> None:
    good = _save_run(workspace, RunConfig(suite="toy", model="oracle", strategies=["lle"]))
    bad = _save_run(workspace, RunConfig(suite="toy", model="oracle", strategies=["lle"]))
    (bad / "config.json").write_bytes(os.urandom(300))
    before = files(workspace)
    listed = lle(workspace, "runs", "list", "--json")
    assert listed.returncode == 0 and "Traceback" not in listed.stderr, listed.stderr
    assert [r["id"] for r in json.loads(listed.stdout)] == [good.name]
    assert bad.name in listed.stderr and "damaged" in listed.stderr
    table = lle(workspace, "runs", "list")
    assert table.returncode == 0 and "toy" in table.stdout and bad.name in table.stderr, table.stderr
    assert_one_line_error(lle(workspace, "run", "--resume", bad.name), str(bad / "config.json"))
    assert files(workspace) == before


def test_a_zero_byte_run_store_at_resume_is_damaged_not_rerun(workspace: Path) -> None:
    folder = _save_run(workspace, RunConfig(suite="toy", model="oracle", strategies=["lle"], rounds=1,
                                            train_per_round=1, eval_tasks=1))
    (folder / "lle.db").write_bytes(b"")
    before = files(workspace)
    assert_one_line_error(lle(workspace, "run", "--resume", folder.name, "--json"), str(folder / "lle.db"), "empty")
    assert files(workspace) == before


# --- bad options -------------------------------------------------------------------------------------------


def test_a_huge_offset_or_count_is_refused_with_its_bound(workspace: Path) -> None:
    before = files(workspace)
    for noun in ("experiences", "updates", "episodes"):
        assert_one_line_error(lle(workspace, noun, "list", "--offset", str(10 ** 30)), "--offset", "less than")
    assert_one_line_error(lle(workspace, "run", "--model", "oracle", "--suite", "toy", "--eval", "1000000000"),
                          "--eval", "less than")
    assert files(workspace) == before and not (workspace / "runs").exists()


def test_an_unknown_suite_or_model_creates_no_run(workspace: Path) -> None:
    before = files(workspace)
    assert_one_line_error(lle(workspace, "run", "--suite", "nope", "--model", "oracle"), "nope")
    assert_one_line_error(lle(workspace, "run", "--suite", "toy", "--model", "nope"), "nope", "lle models list")
    assert files(workspace) == before and not (workspace / "runs").exists()


def test_a_bad_population_file_creates_no_run(workspace: Path, tmp_path: Path) -> None:
    before = files(workspace)
    good = 'name = "duo"\nworld = "toy/keys-v1"\n\n[[agents]]\nname = "a"\nmodel = "oracle"\n'
    bad = tmp_path / "bad.toml"
    bad.write_text(good.replace('model = "oracle"', "temperature = \"hot\""))
    toy = ("run", "--suite", "toy", "--model", "oracle")
    assert_one_line_error(lle(workspace, *toy, "--population", str(bad)), str(bad), "agents[0] (a).temperature")
    bad.write_text(good + 'actor = "zed"\n')  # after [[agents]]: a key of the agent, which has none such
    assert_one_line_error(lle(workspace, *toy, "--compare", "--population", str(bad)), str(bad), "actor")
    bad.write_text(good.replace('name = "duo"', 'name = "duo"\nactor = "zed"'))
    assert_one_line_error(lle(workspace, *toy, "--population", str(bad)), str(bad), "actor", "'zed'")
    assert_one_line_error(lle(workspace, *toy, "--population", str(tmp_path / "none.toml")), "none.toml",
                          "does not exist")
    assert_one_line_error(lle(workspace, *toy, "--strategy", "population"), "--population FILE")
    assert files(workspace) == before and not (workspace / "runs").exists()


def test_revoking_a_world_that_does_not_exist_is_refused(workspace: Path) -> None:
    before = files(workspace)
    assert_one_line_error(lle(workspace, "revoke", "world:nope", "--reason", "typo"), "'nope'", "lle worlds list")
    assert files(workspace) == before
    known = lle(workspace, "revoke", "world:sql/shop-v1", "--reason", "bad data", "--dry-run")
    assert known.returncode == 0, known.stderr


def test_weights_commands_name_the_bad_snapshot_or_adapter(workspace: Path, tmp_path: Path) -> None:
    assert_one_line_error(lle(workspace, "weights", "train", "snap_nope"), "snap_nope", "lle export list")
    junk = tmp_path / "rows.jsonl"
    junk.write_bytes(os.urandom(300).replace(b"\n", b" ") + b"\n")
    assert_one_line_error(lle(workspace, "weights", "train", str(junk)), "rows.jsonl", "sft")
    assert_one_line_error(lle(workspace, "weights", "show", "itm_nope"), "itm_nope")
    assert_one_line_error(lle(workspace, "weights", "rollback", "--reason", "r"), "no adapter is active")
    assert_one_line_error(lle(workspace, "serve", "--token", "t", "--adapter", "active"), "--adapter active",
                          "lle weights list")
    assert_one_line_error(lle(workspace, "serve", "--token", "t", "--adapter", "itm_nope"), "itm_nope")


def test_bad_slots_count_or_lean_are_refused_before_a_model_loads(workspace: Path) -> None:
    before = files(workspace)
    run = ("episodes", "run", "toy/keys-v1", "--policy")
    assert_one_line_error(lle(workspace, *run, "smollm2-135m", "--slots", "-1"), "--slots -1", "at least 1")
    for count in ("0", "100000000"):  # a hundred million small worlds used to be built before anything ran
        assert_one_line_error(lle(workspace, *run, "smollm2-135m", "--count", count), f"--count {count}", "1-100000")
    for option in (["--slots", "2"], ["--lean"]):
        assert_one_line_error(lle(workspace, *run, "scripted:actions.json", *option), option[0],
                              "embedded model", "--policy")
    flywheel = ("run", "--suite", "toy", "--model")
    assert_one_line_error(lle(workspace, *flywheel, "smollm2-135m", "--slots", "-2"), "--slots -2", "at least 1")
    for command in (flywheel, run):
        assert_one_line_error(lle(workspace, *command, "smollm2-135m", "--slots", "many"), "--slots 'many'", "auto")
    assert_one_line_error(lle(workspace, *flywheel, "oracle", "--slots", "2"), "--slots", "embedded model", "--model")
    assert_one_line_error(lle(workspace, *flywheel, "smollm2-135m", "--slots", "2", "--executor", "ray"),
                          "--slots", "--executor ray")
    assert files(workspace) == before and not (workspace / "runs").exists()


def test_slots_auto_batches_only_what_can_be_batched() -> None:
    from lle.cli.common import slots_of
    from lle.policies.batched import default_slots

    assert slots_of("auto", batchable=True) == default_slots() >= 2
    assert slots_of("auto", batchable=True, most=3) == 3  # lle episodes run --count 3
    assert slots_of("auto", batchable=False) == 0  # oracle, openai:, scripted:, Ray or trained adapters: the pool
    assert slots_of("0", batchable=True) == 0 and slots_of("5", batchable=False) == 5  # a number is taken as said
