"""The CLI scoped to runs: `--run RUN|latest|workspace` on the listing commands after a real (toy, oracle) run
(the latest run by default, said on stderr), short ids (prefixes with or without the kind, tails as the tables
print them), `lle runs show|diff|rm`, `lle report` with no argument, and data printed as it is (an id with
`:train:` is not an emoji, `[refunded]` is not markup)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from factories import build_experience
from lle.cli.main import app
from lle.config import RunConfig
from lle.flywheel import loop
from lle.store import Store

runner = CliRunner()
pytestmark = pytest.mark.slow  # one toy run (oracle) for the module: ~30 s on a busy machine


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A workspace with one finished toy run (oracle policy: fast) and a store of its own."""
    workspace = tmp_path_factory.mktemp("runs") / "ws"
    config = RunConfig(suite="toy", model="oracle", strategies=["lle"], rounds=1, train_per_round=4, eval_tasks=2,
                       workers=1, monitor_watch=2)
    loop.Flywheel(config, workspace).run()
    with Store(workspace / "lle.db") as db:
        db.append_experiences([build_experience(observation="[refunded] order 54")])
    return workspace, config.id


def lle(workspace: Path, *args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, ["--workspace", str(workspace), *args])
    return result.exit_code, result.stdout, result.stderr


def lle_process(workspace: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """A real process: errors are printed by `main()` as one line."""
    return subprocess.run([sys.executable, "-m", "lle.cli.main", "--workspace", str(workspace), *args],
                          capture_output=True, text=True, timeout=60)


def test_listing_commands_read_the_latest_run(finished: tuple[Path, str]) -> None:
    workspace, run = finished
    code, out, err = lle(workspace, "experiences", "list", "--run", "latest", "--json")
    assert code == 0, err
    rows = json.loads(out)
    assert rows and all(r["world"] == "toy/keys-v1" for r in rows)
    assert f"run {run}, strategy lle" in err and "lle.db" in err  # which store was opened, on stderr
    for command in (["memory", "list"], ["rules", "list", "--all"], ["skills", "list"], ["updates", "list"],
                    ["episodes", "list"], ["export", "list"], ["verifier-cases", "list"]):
        code, out, err = lle(workspace, *command, "--run", "latest")
        assert code == 0, (command, err)
    code, out, _ = lle(workspace, "memory", "list", "--run", "latest", "--json")
    assert json.loads(out), "the run's lle store has memories"
    code, out, _ = lle(workspace, "experiences", "list", "--run", "workspace", "--json")  # the workspace's own
    assert [r["world"] for r in json.loads(out)] == ["sql/shop-v1"]
    code, out, err = lle(workspace, "episodes", "list", "--run", run[:12], "--strategy", "none", "--json")
    # none's store: its 2 held-out episodes and the monitor's watch set of 2
    assert code == 0 and "strategy none" in err and "baseline.db" in err and len(json.loads(out)) == 4


def test_a_bad_run_or_strategy_is_one_line(finished: tuple[Path, str]) -> None:
    workspace, _ = finished
    for args, needle in ((["--run", "run_nope"], "no run with id 'run_nope'"),
                         (["--run", "latest", "--strategy", "raw"], "use one of lle, none"),
                         (["--run", "workspace", "--strategy", "lle"], "needs --run")):
        result = lle_process(workspace, "experiences", "list", *args)
        lines = result.stderr.strip().splitlines()
        assert result.returncode == 2 and len(lines) == 1 and needle in lines[0], result.stderr


def unique_prefix(item_id: str, ids: list[str], start: int = 24) -> str:
    # Ids minted in one millisecond share most of their characters: the shortest prefix (from start) no other has.
    return next(item_id[:n] for n in range(start, len(item_id) + 1)
                if sum(other.startswith(item_id[:n]) for other in ids) == 1)


def test_ids_by_unique_prefix(finished: tuple[Path, str]) -> None:
    workspace, run = finished
    _, out, _ = lle(workspace, "experiences", "list", "--run", "latest", "--json")
    ids = [r["id"] for r in json.loads(out)]
    short = min((unique_prefix(i, ids, start=12) for i in ids), key=len)
    code, out, err = lle(workspace, "experiences", "show", short, "--run", run[4:14], "--json")
    assert code == 0, err
    assert json.loads(out)["id"].startswith(short)
    ambiguous = lle_process(workspace, "experiences", "show", "exp_", "--run", "latest")
    assert ambiguous.returncode == 2 and "ambiguous" in ambiguous.stderr and ids[0] in ambiguous.stderr
    unknown = lle_process(workspace, "experiences", "show", "exp_ZZZZ", "--run", "latest")
    assert unknown.returncode == 2 and "no experience with id 'exp_ZZZZ'" in unknown.stderr
    items = [r["id"] for r in json.loads(lle(workspace, "memory", "list", "--run", "latest", "--json")[1])]
    skills = [r["id"] for r in json.loads(lle(workspace, "skills", "list", "--run", "latest", "--json")[1])]
    minted = items + skills
    code, out, err = lle(workspace, "memory", "show", unique_prefix(items[0], minted), "--run", "latest", "--json")
    assert code == 0 and json.loads(out)["item"]["id"] == items[0], err
    code, out, err = lle(workspace, "skills", "show", unique_prefix(skills[0], minted), "--run", "latest", "--json")
    assert code == 0 and json.loads(out)["id"] == skills[0], err


def test_ids_with_colons_and_brackets_print_intact(finished: tuple[Path, str]) -> None:
    workspace, _ = finished
    code, out, _ = lle(workspace, "experiences", "list", "--run", "workspace")
    exp_id = json.loads(lle(workspace, "experiences", "list", "--run", "workspace", "--json")[1])[0]["id"]
    assert code == 0 and exp_id[-6:] in out  # a short id, never cut with an ellipsis
    code, out, _ = lle(workspace, "experiences", "show", exp_id, "--run", "workspace")
    assert "sql/shop-v1:train:0" in out and "🚋" not in out  # `:train:` is not an emoji code
    assert "[refunded] order 54" in out  # `[refunded]` is not markup
    code, out, _ = lle(workspace, "episodes", "list", "--run", "latest")
    assert ":manor:dev:" in out or ":cellar:dev:" in out
    assert "…" not in out


def test_runs_show_diff_report_and_rm(finished: tuple[Path, str], tmp_path: Path) -> None:
    source, run = finished
    workspace = tmp_path / "ws"
    shutil.copytree(source, workspace)
    code, out, err = lle(workspace, "runs", "show", "--json")
    shown = json.loads(out)
    assert code == 0 and shown["run"] == run and set(shown["stores"]) == {"lle", "none"}, err
    code, out, err = lle(workspace, "runs", "diff", run, "latest", "--json")
    assert code == 0 and json.loads(out)["config"] == [], err  # a run against itself: no config difference
    code, out, err = lle(workspace, "report", "--json")  # no argument: the latest run
    page = Path(json.loads(out)["report"])
    assert code == 0 and page == loop.run_folder(run, workspace) / "report" / "index.html", err
    text = page.read_text()
    assert "<svg" in text and "None" not in text
    assert (page.parent / "lle" / "episodes.html").exists() and list((page.parent / "lle" / "items").glob("itm_*"))
    kept = lle_process(workspace, "runs", "rm", run[:10])  # no terminal to answer: nothing is deleted
    assert kept.returncode != 0 and loop.run_folder(run, workspace).exists()
    code, out, err = lle(workspace, "runs", "rm", run[:10], "--yes")
    assert code == 0 and not loop.run_folder(run, workspace).exists(), err


LISTED = {  # a listing, the show its ids go back to, and where that show's --json has the id
    "experiences": (["experiences", "list"], ["experiences", "show"], lambda shown: shown["id"]),
    "episodes": (["episodes", "list"], ["experiences", "show"], lambda shown: shown["id"]),
    "updates": (["updates", "list"], ["updates", "show"], lambda shown: shown["id"]),
    "memory": (["memory", "list"], ["memory", "show"], lambda shown: shown["item"]["id"]),
    "skills": (["skills", "list"], ["skills", "show"], lambda shown: shown["id"]),
}


def test_listings_without_run_read_the_latest_run_and_say_so(finished: tuple[Path, str]) -> None:
    workspace, run = finished
    for listing in [*(listing for listing, _, _ in LISTED.values()), ["rules", "list"]]:
        code, out, err = lle(workspace, *listing, "--json")
        assert code == 0 and out == lle(workspace, *listing, "--run", "latest", "--json")[1], (listing, err)
        assert len(err.strip().splitlines()) == 1 and f"run {run}, strategy lle (latest; --run" in err, err
    code, out, err = lle(workspace, "episodes", "list", "--strategy", "none", "--json")  # the latest run's none
    assert code == 0 and "strategy none (latest" in err and len(json.loads(out)) == 4, err
    named = runner.invoke(app, ["--workspace", str(workspace), "experiences", "list"],
                          env={"LLE_STORE_URL": "mysql://u@h/db"})  # a store named by the user: that one, no run
    assert named.exit_code != 0 and "mysql" in str(named.exception) and "latest" not in named.stderr


def test_every_printed_short_id_resolves_with_its_show(finished: tuple[Path, str]) -> None:
    workspace, _ = finished
    for name, (listing, show, shown_id) in LISTED.items():
        code, out, err = lle(workspace, *listing, "--wide")
        full = [r["id"] for r in json.loads(lle(workspace, *listing, "--json")[1])]
        short = [row.split()[0] for row in out.splitlines()[1:]]
        assert code == 0 and full and len(short) == len(full), (name, err)
        assert all(6 <= len(s) < len(f) and f.endswith(s) for s, f in zip(short, full, strict=True)), (name, out)
        for s, f in zip(short, full, strict=True):
            code, out, err = lle(workspace, *show, s, "--json")
            assert code == 0 and shown_id(json.loads(out)) == f, (name, s, err)


def test_a_prefix_without_the_kind_and_an_ambiguous_short_id(finished: tuple[Path, str]) -> None:
    workspace, _ = finished
    ids = [r["id"] for r in json.loads(lle(workspace, "experiences", "list", "--json")[1])]
    body = unique_prefix(ids[0], ids, start=12).removeprefix("exp_")  # 01M981WS… as well as exp_01M981WS…
    code, out, err = lle(workspace, "experiences", "show", body, "--json")
    assert code == 0 and json.loads(out)["id"] == ids[0], err
    ambiguous = lle_process(workspace, "experiences", "show", ids[0][4:10])  # the time: shared by the batch
    errors = [row for row in ambiguous.stderr.splitlines() if not row.startswith("store: ")]
    assert ambiguous.returncode == 2 and len(errors) == 1, ambiguous.stderr
    assert "ambiguous" in errors[0] and ids[0] in errors[0] and ids[1] in errors[0]
