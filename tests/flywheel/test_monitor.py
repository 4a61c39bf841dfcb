"""Monitoring: an activation followed by a held-out regression beyond its interval is rolled back, once."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from lle.carriers.recipes import RecipeBook
from lle.config import RunConfig
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


@pytest.mark.slow
def test_an_activation_that_regressed_on_held_out_tasks_is_rolled_back_with_an_alert(tmp_path: Path) -> None:
    # Two steps are too few for the oracle: train fails, attribution proposes the submit discipline, the
    # replay on train activates it (no regression there), and the held-out tasks then fail...
    config = RunConfig(suite="toy", model="oracle", strategies=["lle"], rounds=1, train_per_round=2, eval_tasks=4,
                       workers=1, max_steps=2, group_size=1, monitor_min_pairs=4)
    # ...while round 0, evaluated with enough steps, solved them all: the activation is followed by a regression.
    ample = loop.Flywheel(config.model_copy(update={"max_steps": 20}), tmp_path)
    ample.phase("none", loop.strategy_db(ample.folder, "baseline"), "r0/eval", ample.eval_worlds)
    loop.Flywheel(config, tmp_path).run()
    folder = loop.run_folder(config.id, tmp_path)
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
    assert monitor.check(folder, config, loop.Flywheel(config, tmp_path).eval_worlds, 1) == []
    shown = subprocess.run([sys.executable, "-m", "lle.cli.main", "--workspace", str(tmp_path), "monitor",
                            config.id, "--json"], capture_output=True, text=True, timeout=120)
    assert shown.returncode == 0, shown.stderr
    out = json.loads(shown.stdout)
    assert [a["item_id"] for a in out["alerts"]] == [a["item_id"] for a in alerts]
    assert any(r["item"] == rolled[0]["item_id"] and r["difference_points"] == -100.0 for r in out["activations"])
