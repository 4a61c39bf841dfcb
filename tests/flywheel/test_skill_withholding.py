"""Skills kept for their measured use: which train episodes a run withholds the library's skills from.

The choice is a pure function of the run's seed, the small world and the batch label (`strategies.withheld`), made
by the picklable `SkillsOffer` in the workers and recorded with each episode (`Levers.skills_arm`), so two runs with
the same seed, and a resumed run, withhold the same episodes. Toy world, oracle policy, real stores.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from lle.carriers import skill_use
from lle.carriers.skill_mining import used_skills
from lle.carriers.skills import SkillLibrary, SkillState
from lle.config import RunConfig
from lle.core import Split
from lle.flywheel import loop, report
from lle.flywheel.evaluate import batch_round
from lle.flywheel.strategies import SkillsOffer, withheld
from lle.store import Store
from lle.store import flywheel as flywheel_store
from lle.store.episodes import get_episode
from lle.worlds.toy import KeysFamily

FAMILY = KeysFamily()
WORLDS = [FAMILY.small_world(Split.train, seed) for seed in range(400)]


def chosen(offer: SkillsOffer) -> set[str]:
    return {sw.id for sw in WORLDS if offer.withholds(sw)}


def test_the_offer_withholds_by_seed_small_world_and_batch() -> None:
    first = chosen(SkillsOffer("nowhere.db", withhold=0.25, seed=0, salt="r1/train"))
    assert first == chosen(SkillsOffer("elsewhere.db", withhold=0.25, seed=0, salt="r1/train"))  # the same choice
    assert 0.18 < len(first) / len(WORLDS) < 0.32  # about the fraction
    assert first != chosen(SkillsOffer("nowhere.db", withhold=0.25, seed=1, salt="r1/train"))  # another seed
    assert first != chosen(SkillsOffer("nowhere.db", withhold=0.25, seed=0, salt="r1/train/a1"))  # another batch
    assert chosen(SkillsOffer("nowhere.db", withhold=0.0, seed=0, salt="r1/train")) == set()  # 0: none
    assert chosen(SkillsOffer("nowhere.db", withhold=0.25, seed=0, salt="r1/train", only=())) == set()  # a replay's
    assert first <= chosen(SkillsOffer("nowhere.db", withhold=0.5, seed=0, salt="r1/train"))  # below the fraction
    assert all(withheld(0, sw, "r1/train", 0.25) for sw in first)


def arms(workspace: Path, config: RunConfig) -> dict[tuple[str, str], str | None]:
    """(batch label, key) -> the arm each episode of the run's lle store recorded."""
    out: dict[tuple[str, str], str | None] = {}
    with Store(loop.strategy_db(loop.run_folder(config.id, workspace), "lle")) as db:
        for exp_id, batch in flywheel_store.batches(db, config.id + "/").items():
            record = get_episode(db, exp_id)
            out[(batch.split("/", 2)[2], str(record.batch_key))] = record.levers.skills_arm
    return out


def toy(**kw: object) -> RunConfig:
    base: dict[str, object] = {"suite": "toy", "model": "oracle", "strategies": ["lle"], "rounds": 2,
                               "train_per_round": 8, "eval_tasks": 1, "workers": 2, "group_size": 2,
                               "monitor": False}
    return RunConfig.model_validate(base | kw)


@pytest.mark.slow
def test_runs_with_the_same_seed_withhold_the_same_train_episodes(tmp_path: Path) -> None:
    config, again, other = toy(), toy(), toy(seed=1)
    for n, c in enumerate((config, again, other)):
        loop.Flywheel(c, tmp_path / f"ws{n}").run()
    first = arms(tmp_path / "ws0", config)
    train = {k: arm for k, arm in first.items() if batch_round("r/x/" + k[0])[1] == "train"}
    assert set(train.values()) == {"with", "without"}  # every train episode is in an arm, some withheld
    assert {k[0] for k in train} == {"r1/train", "r1/train/a1", "r2/train", "r2/train/a1"}
    # Replays, recipes and evaluations never withhold, and are in neither arm.
    assert any("/skill/" in k[0] for k in first) and all(arm is None for k, arm in first.items() if k not in train)
    assert arms(tmp_path / "ws1", again) == first  # the same seed: the same episodes withheld
    withheld_first = {k for k, arm in first.items() if arm == "without"}
    assert withheld_first != {k for k, arm in arms(tmp_path / "ws2", other).items() if arm == "without"}
    # A resumed (here: finished) run reads its episodes back: the same arms.
    loop.Flywheel(config, tmp_path / "ws0").run()
    assert arms(tmp_path / "ws0", config) == first
    with Store(loop.strategy_db(loop.run_folder(config.id, tmp_path / "ws0"), "lle")) as db:
        library = SkillLibrary(db)
        assert any(s.state is SkillState.active for s in library.skills())
        ids = {k: i for i, b in flywheel_store.batches(db, config.id + "/").items()
               for k in [(b.split("/", 2)[2], str(get_episode(db, i).batch_key))]}
        played = {k: db.get_experience(ids[k]) for k in train if k[0].startswith("r2/")}
        assert all(not used_skills(e) for k, e in played.items() if train[k] == "without")  # offered nothing
        assert any(used_skills(e) for k, e in played.items() if train[k] == "with")  # offered the active ones
        measured = [skill_use.usefulness(library, s) for s in library.skills() if s.state is SkillState.active]
        assert any(u.with_n and u.without_n for u in measured)
    # The report lists each skill that was active with its measured use, and the share that hurt.
    res = report.load_results(config.id, tmp_path / "ws0")
    rows = res.skills["lle"]
    assert rows and all(r["state"] == "active" and r["source"] == "experience" for r in rows)
    assert all(r["hurts"] is False for r in rows)  # the oracle solves every task, with or without skills
    page = report.write_report(res, tmp_path / "ws0")
    assert "Skills and their measured use" in page.read_text() and "skills that hurt: 0 of " in page.read_text()
    summary = (page.parent / "summary.json").read_text()
    assert '"skills_hurt"' in summary and rows[0]["id"] in summary


@pytest.mark.slow
def test_a_run_that_withholds_nothing_records_no_arm(tmp_path: Path) -> None:
    config = toy(rounds=1, train_per_round=4, group_size=1, skills_withhold=0.0)
    loop.Flywheel(config, tmp_path).run()
    assert set(arms(tmp_path, config).values()) == {None}


def test_the_config_bounds_the_share_and_an_older_run_withholds_nothing(tmp_path: Path) -> None:
    assert RunConfig().skills_withhold == 0.25
    for bad in (-0.1, 1.0):
        with pytest.raises(ValueError, match="skills_withhold"):
            RunConfig(skills_withhold=bad)
    config = toy()
    folder = loop.save_config(config, tmp_path)
    assert loop.load_config(config.id, tmp_path).skills_withhold == 0.25
    # A run started before skills were withheld resumes as it started: nothing withheld.
    older = config.model_dump(mode="json")
    del older["skills_withhold"]
    (folder / "config.json").write_text(RunConfig.model_validate(older).model_dump_json(exclude={"skills_withhold"}))
    assert loop.load_config(config.id, tmp_path).skills_withhold == 0.0
