"""Context recipes in the flywheel: proposed from the round's failures, replayed on train, then in force."""

from __future__ import annotations

from pathlib import Path

import pytest

from lle.carriers.recipes import RecipeBook
from lle.config import Levers, RunConfig
from lle.core import UpdateOp
from lle.flywheel import loop
from lle.governance.lineage import revoke
from lle.store import Store
from lle.store.episodes import list_episodes


@pytest.mark.slow
def test_a_recipe_is_proposed_replayed_activated_used_and_revocable(tmp_path: Path) -> None:
    # Two steps are too few for the oracle on the toy world: every train episode runs out of steps
    # without an answer, which is what attribution proposes the submit discipline for.
    config = RunConfig(suite="toy", model="oracle", strategies=["lle"], rounds=2, train_per_round=2, eval_tasks=2,
                       workers=1, max_steps=2, group_size=1)
    loop.Flywheel(config, tmp_path).run()
    db_path = loop.strategy_db(loop.run_folder(config.id, tmp_path), "lle")
    with Store(db_path) as db:
        book = RecipeBook(db)
        states = book.items()
        assert len(states) == 1, "one proposal: the same levers are not proposed twice"
        item_id, (item, state) = next(iter(states.items()))
        assert state == "active" and item.scope.family == "toy"
        assert book.levers_for("toy") == Levers(submit_discipline=True, recipe=item_id)
        activation = next(u for u in db.list_updates(limit=100, carrier="context") if u.op is UpdateOp.activate)
        assert activation.gate.name == "recipe_replay" and len(activation.experience_ids) == 8
        episodes = {rec.batch: rec for rec, _, _ in list_episodes(db, limit=1000)}
        # round 1 ran before any recipe; round 2's held-out episodes ran under it, with its id in their refs
        r2 = [rec for rec, _, _ in list_episodes(db, limit=1000) if str(rec.batch).endswith("/r2/eval")]
        assert r2 and all(rec.levers.recipe == item_id for rec in r2)
        assert all(item_id in db.steps_of(rec.id)[0].context_refs for rec in r2)
        assert any("/recipe/toy-" in str(batch) for batch in episodes)
        revoke(db, item_id, reason="test", author="tester")
        assert RecipeBook(db).levers_for("toy") == Levers()
