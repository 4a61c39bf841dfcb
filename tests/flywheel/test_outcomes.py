"""One compare as several runs: each run's held-out outcomes as a file, pooled into the verdict one run would give."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from lle.config import RunConfig
from lle.flywheel import loop, outcomes, report
from lle.flywheel.evaluate import paired_verdicts, run_outcomes, table

ALIKE = dict(suite="toy", model="oracle", rounds=1, train_per_round=2, eval_tasks=6, workers=1, max_steps=3,
             group_size=1, monitor=False)
"""Three steps: the oracle solves some toy tasks and not others, so the verdicts have pairs of both kinds."""


def lle_cli(workspace: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "lle.cli.main", "--workspace", str(workspace), *args],
                          capture_output=True, text=True, timeout=300)


@pytest.mark.slow
def test_runs_pooled_from_their_outcomes_files_give_the_verdict_of_one_run(tmp_path: Path) -> None:
    whole = RunConfig(id="run_whole", strategies=["none", "lle", "raw"], **ALIKE)  # type: ignore[arg-type]
    first = RunConfig(id="run_first", strategies=["raw"], **ALIKE)  # type: ignore[arg-type]
    second = RunConfig(id="run_second", strategies=["lle"], baseline=False, **ALIKE)  # type: ignore[arg-type]
    for config in (whole, first, second):
        loop.Flywheel(config, tmp_path).run()
    assert not loop.strategy_db(loop.run_folder(second.id, tmp_path), "baseline").exists()  # none was not played
    # The arm's own table shows what it played: no none row, no round-0 count, lle's last round as measured.
    arm_rows = table(report.load_results(second.id, tmp_path))
    assert {r["strategy"] for r in arm_rows} == {"lle"} and {r["round0"] for r in arm_rows} == {"–"}
    whole_rows = table(report.load_results(whole.id, tmp_path))
    assert [r["last"] for r in arm_rows] == [r["last"] for r in whole_rows if r["strategy"] == "lle"]
    assert all(r["ci95"] is not None for r in arm_rows)
    files = []
    for config in (first, second):
        files.append(tmp_path / f"{config.id}.json")
        done = lle_cli(tmp_path, "runs", "outcomes", config.id, "-o", str(files[-1]))
        assert done.returncode == 0, done.stderr
    assert set(json.loads(files[1].read_text())["strategies"]) == {"lle"}
    pooled = lle_cli(tmp_path, "runs", "verdict", *map(str, files), "--json")
    assert pooled.returncode == 0, pooled.stderr
    got = json.loads(pooled.stdout)
    expected = [v.row() for v in paired_verdicts(loop.run_folder(whole.id, tmp_path), whole)]
    assert got["verdict"] == expected and {(r["strategy"], r["baseline"]) for r in expected} == {
        ("lle", "none"), ("raw", "none"), ("lle", "raw")}
    assert got["sources"] == {"none": first.id, "lle": second.id, "raw": first.id}
    one_run = {(r["world"], r["strategy"]): (r["round0"], r["last"])
               for r in table(report.load_results(whole.id, tmp_path))}
    assert {(r["world"], r["strategy"]): (r["round0"], r["last"]) for r in got["table"]} == one_run
    shown = lle_cli(tmp_path, "runs", "verdict", *map(str, files))
    assert shown.returncode == 0 and "Paired verdict" in shown.stdout and "lle" in shown.stdout


def test_files_of_runs_not_made_alike_are_refused_in_one_line(tmp_path: Path) -> None:
    config = RunConfig(id="run_a", strategies=["raw"], **ALIKE)  # type: ignore[arg-type]
    record = {"format": outcomes.FORMAT, "run": "run_a", "model": "oracle", "suite_digest": "x", "seed": 0,
              "eval_tasks": 6, "max_steps": 3, "rounds": 1, "train_per_round": 2, "group_size": 1,
              "curriculum": True, "levers": config.levers.model_dump(mode="json"),
              "strategies": {"none": {"0": {"toy:dev:1": True}}}}
    a, b, bad = tmp_path / "a.json", tmp_path / "b.json", tmp_path / "bad.json"
    a.write_text(json.dumps(record))
    b.write_text(json.dumps({**record, "run": "run_b", "seed": 1}))
    bad.write_text("{not json")
    refused = lle_cli(tmp_path, "runs", "verdict", str(a), str(b))
    assert refused.returncode == 2 and "differ in seed" in refused.stderr and "Traceback" not in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1
    broken = lle_cli(tmp_path, "runs", "verdict", str(bad))
    assert broken.returncode == 2 and "is not an outcomes file" in broken.stderr and "Traceback" not in broken.stderr
    contradictory = lle_cli(tmp_path, "run", "--compare", "--no-baseline", "--model", "oracle", "--suite", "toy")
    assert contradictory.returncode == 2 and "--no-baseline" in contradictory.stderr


@pytest.mark.slow
def test_an_arm_evaluated_at_its_last_round_only_reads_as_one_evaluated_each_round(tmp_path: Path) -> None:
    each = RunConfig(id="run_each", strategies=["lle"], **{**ALIKE, "rounds": 2})  # type: ignore[arg-type]
    last = RunConfig(id="run_last", strategies=["lle"], eval_rounds="last", **{**ALIKE, "rounds": 2})  # type: ignore[arg-type]
    for config in (each, last):
        loop.Flywheel(config, tmp_path).run()
    got = {c.id: run_outcomes(loop.run_folder(c.id, tmp_path), c) for c in (each, last)}
    assert sorted(got["run_each"]["lle"]) == [1, 2] and sorted(got["run_last"]["lle"]) == [2]  # no round-1 batch
    assert got["run_last"]["lle"][2] == got["run_each"]["lle"][2] and got["run_last"]["none"] == got["run_each"]["none"]
    verdict = paired_verdicts(loop.run_folder(last.id, tmp_path), last)
    assert [v.row() for v in verdict] == [v.row() for v in paired_verdicts(loop.run_folder(each.id, tmp_path), each)]
    assert verdict[0].rounds is None  # read at the last round: not marked as a run cut short
    bad = lle_cli(tmp_path, "run", "--eval-rounds", "some", "--model", "oracle", "--suite", "toy")
    assert bad.returncode == 2 and "--eval-rounds 'some'" in bad.stderr and "Traceback" not in bad.stderr


def test_planned_episodes_count_what_a_run_plays_before_replays(tmp_path: Path) -> None:
    """The progress bar's total and the viewer's estimate both come from `loop.planned_episodes`."""
    from lle.viewer.data import run_progress

    config = RunConfig(id="run_plan", strategies=["none", "lle"], suite="toy", model="oracle", rounds=2,
                       train_per_round=2, eval_tasks=4, workers=1, max_steps=3, group_size=2, monitor=True,
                       monitor_watch=2, eval_rounds="last")
    loop.Flywheel(config, tmp_path).run()
    batches = {(strategy, label): n for strategy, labels in run_progress(config.id, tmp_path).items()
               for label, n in labels.items()}
    played = sum(n for (_, label), n in batches.items() if "/skill/" not in label and "/recipe/" not in label)
    first_attempts = sum(n for (_, label), n in batches.items()
                         if label.count("/") == 1 and label.endswith(("/train", "/eval", "/watch")))
    assert ("lle", "r1/train/a1") in batches and ("lle", "r1/eval") not in batches  # groups, last-round eval
    assert loop.planned_episodes(config) == played == 22
    assert loop.planned_episodes(config, attempts=False) == first_attempts == 18
