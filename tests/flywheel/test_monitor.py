"""Monitoring: an activation followed by a regression on the train watch set, beyond its interval, is rolled back,
once; held-out outcomes never decide it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from lle.carriers.recipes import RecipeBook
from lle.config import RunConfig
from lle.core import Split
from lle.flywheel import loop, monitor
from lle.flywheel.verdict import paired_verdict
from lle.store import Store


def test_a_regression_is_called_only_beyond_the_interval_and_on_enough_tasks() -> None:
    act = monitor.Activation("itm_x", "skills", "toy", 1)
    worse = monitor.Effect(act, 2, paired_verdict("itm_x", "before", [(False, True)] * 6))
    unsure = monitor.Effect(act, 2, paired_verdict("itm_x", "before", [(False, True), (True, True)] * 2))
    assert worse.regressed(monitor.Rule()) and not worse.regressed(monitor.Rule(min_pairs=7))
    assert not unsure.regressed(monitor.Rule())  # one task worse out of four: its interval reaches above 0
    assert not worse.regressed(monitor.Rule(max_drop_points=100.0))


TWO_STEPS = RunConfig(suite="toy", model="oracle", strategies=["lle"], rounds=1, train_per_round=2, eval_tasks=4,
                      workers=1, max_steps=2, group_size=1, monitor_min_pairs=4, monitor_watch=4)
"""Two steps are too few for the oracle: train fails, attribution proposes the submit discipline, the replay on
train activates it (no regression there), and the watch set and the held-out tasks then fail."""


def run_after_an_ample_round_0(tmp_path: Path, batch: str) -> Path:
    """TWO_STEPS, after round 0's `batch` (`eval` or `watch`) was played with enough steps to solve it all."""
    config = TWO_STEPS.model_copy(update={"id": f"run_ample_{batch}"})
    ample = loop.Flywheel(config.model_copy(update={"max_steps": 20}), tmp_path)
    worlds = ample.eval_worlds if batch == "eval" else ample.watch_worlds
    assert worlds and all(sw.split is Split.train for sw in ample.watch_worlds)
    ample.phase("none", loop.strategy_db(ample.folder, "baseline"), f"r0/{batch}", worlds)
    loop.Flywheel(config, tmp_path).run()
    return loop.run_folder(config.id, tmp_path)


@pytest.mark.slow
def test_an_activation_that_regressed_on_the_watch_set_is_rolled_back_with_an_alert(tmp_path: Path) -> None:
    # Round 0 solved the watch set: the activation is followed by a regression there.
    config = TWO_STEPS.model_copy(update={"id": "run_ample_watch"})
    folder = run_after_an_ample_round_0(tmp_path, "watch")
    alerts = monitor.load(folder)
    with Store(loop.strategy_db(folder, "lle")) as db:
        recipes = RecipeBook(db).items()
        revocations = db.list_revocations()
    recipe_ids = {item_id for item_id in recipes}
    rolled = [a for a in alerts if a["item_id"] in recipe_ids]
    assert len(rolled) == 1 and rolled[0]["action"] == "rolled back" and rolled[0]["checked_round"] == 1
    assert rolled[0]["verdict"]["difference_points"] == -100.0  # type: ignore[index]
    monitor_revocations = [r for r in revocations if r.reason.startswith("monitor:")]
    assert rolled[0]["item_id"] in {r.target for r in monitor_revocations}
    assert all(state != "active" for _, state in recipes.values())
    # Checked again (a resumed run): nothing is revoked twice.
    assert monitor.check(folder, config, loop.Flywheel(config, tmp_path).watch_worlds, 1) == []
    shown = subprocess.run([sys.executable, "-m", "lle.cli.main", "--workspace", str(tmp_path), "monitor",
                            config.id, "--json"], capture_output=True, text=True, timeout=120)
    assert shown.returncode == 0, shown.stderr
    out = json.loads(shown.stdout)
    assert [a["item_id"] for a in out["alerts"]] == [a["item_id"] for a in alerts]
    assert any(r["item"] == rolled[0]["item_id"] and r["difference_points"] == -100.0 for r in out["activations"])


@pytest.mark.slow
def test_a_regression_on_held_out_tasks_alone_revokes_nothing(tmp_path: Path) -> None:
    # Round 0 solved the held-out tasks and the activation is followed by failing them all, but the watch set
    # failed before and after: held-out outcomes give the verdict, never a rollback.
    folder = run_after_an_ample_round_0(tmp_path, "eval")
    with Store(loop.strategy_db(folder, "lle")) as db:
        recipes = RecipeBook(db).items()
        assert recipes and any(state == "active" for _, state in recipes.values())
        assert not [r for r in db.list_revocations() if r.reason.startswith("monitor:")]
    assert monitor.load(folder) == []
