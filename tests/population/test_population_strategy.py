"""The `population` strategy in a flywheel run (toy world, oracle explorers): pooled through the router,
its acting agent evaluated on the same held-out tasks as `none`, and held-out tasks never in a carrier."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lle.config import RunConfig
from lle.core import Split
from lle.flywheel import loop, report
from lle.flywheel.evaluate import paired_verdicts, table
from lle.store import Store
from lle.store.episodes import batch_episodes

TOY = """
name = "toy-duo"
world = "toy/keys-v1"
budget = 1000
actor = "b"

[[agents]]
name = "a"
model = "oracle"

[[agents]]
name = "b"
model = "oracle"
temperature = 0.7
seed = 5
[agents.levers]
stuck = "note"
"""


@pytest.fixture(scope="module")
def population_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, RunConfig]:
    workspace = tmp_path_factory.mktemp("ws")
    file = workspace / "toy.toml"
    file.write_text(TOY)
    config = RunConfig.model_validate({"suite": "toy", "model": "oracle", "strategies": ["none", "population"],
                                       "rounds": 1, "train_per_round": 3, "eval_tasks": 3, "workers": 1,
                                       "group_size": 1, "population": str(file), "levers": {"stuck": "mask"}})
    loop.Flywheel(config, workspace).run()
    return workspace, config


def test_the_population_strategy_pools_explorers_and_is_paired_with_none(
        population_run: tuple[Path, RunConfig]) -> None:
    workspace, config = population_run
    folder = loop.run_folder(config.id, workspace)
    with Store(loop.strategy_db(folder, "population")) as db:
        batches = {str(b).split("/", 2)[2] for (b,) in db.conn.execute("SELECT DISTINCT batch FROM episodes")}
        assert batches == {"r1/train/a", "r1/train/b", "r1/eval"}  # both explorers, then the acting agent
        # Both explorers' attempts went through the router as groups: the pool holds memories of them.
        assert any(i.carrier.value == "memory" for i in db.carrier_items("memory"))
        routed = {str(r[0]) for r in db.conn.execute("SELECT experience_id FROM routed")}
        train = [str(r[0]) for r in db.conn.execute("SELECT id FROM episodes WHERE batch LIKE '%/train/%'")]
        assert len(train) == 6 and set(train) <= routed
        evaluated = [db.get_experience(str(r[0])) for r in
                     db.conn.execute("SELECT id FROM episodes WHERE batch LIKE '%/r1/eval'")]
        # The acting agent is b (the file's actor), evaluated greedily under its own levers.
        assert len(evaluated) == 3 and all(e.small_world.split is Split.dev for e in evaluated)
        held = {e.small_world.id for e in evaluated}
        for item in db.carrier_items():
            for exp_id in item.experience_ids:
                assert db.get_experience(exp_id).small_world.id not in held
    res = report.load_results(config.id, workspace)
    assert {r["strategy"] for r in table(res)} == {"none", "population"}
    [verdict] = paired_verdicts(folder, config)
    assert (verdict.strategy, verdict.baseline) == ("population", "none")
    assert json.loads((folder / "population.json").read_text())["actor"] == "b"
    summary = json.loads((folder / "population" / "reports" / "r1.json").read_text())
    assert summary["pass_at_population"] == 3 and set(summary["per_agent"]) == {"a", "b"}
    # a sets no levers: it starts from the run's, like every strategy; b runs under its own, train and held-out.
    with Store(loop.strategy_db(folder, "population")) as db:
        stuck = {label: {r.levers.stuck for r in batch_episodes(db, f"{config.id}/population/{label}").values()}
                 for label in ("r1/train/a", "r1/train/b", "r1/eval")}
    assert stuck == {"r1/train/a": {"mask"}, "r1/train/b": {"note"}, "r1/eval": {"note"}}


def test_a_resumed_population_run_plays_nothing_again(population_run: tuple[Path, RunConfig]) -> None:
    workspace, config = population_run
    folder = loop.run_folder(config.id, workspace)
    bus = folder / "population" / "population.db"
    with Store(loop.strategy_db(folder, "population")) as db, Store(bus) as messages:
        before = db.count("experiences")
        solved = [r[0] for r in messages.conn.execute("SELECT id FROM messages WHERE intent = 'solved'")]
    assert solved
    (folder / "finished_at").unlink()
    loop.Flywheel(loop.load_config(config.id, workspace), workspace).run()
    with Store(loop.strategy_db(folder, "population")) as db, Store(bus) as messages:
        assert db.count("experiences") == before
        # The resumed round got its stored episodes back: no success is announced twice.
        assert [r[0] for r in messages.conn.execute("SELECT id FROM messages WHERE intent = 'solved'")] == solved


def test_a_skill_mined_in_the_pool_is_replayed_by_the_acting_agent_and_offered_to_it(tmp_path: Path) -> None:
    from lle.carriers.skills import SkillLibrary, SkillState, used_skills

    file = tmp_path / "toy.toml"
    file.write_text(TOY)
    config = RunConfig.model_validate({"suite": "toy", "model": "oracle", "strategies": ["none", "population"],
                                       "rounds": 1, "train_per_round": 6, "eval_tasks": 3, "workers": 1,
                                       "group_size": 1, "population": str(file), "levers": {"stuck": "mask"}})
    loop.Flywheel(config, tmp_path / "ws").run()
    folder = loop.run_folder(config.id, tmp_path / "ws")
    with Store(loop.strategy_db(folder, "population")) as db:
        library = SkillLibrary(db)
        active = [s for s in library.skills() if s.state is SkillState.active]
        assert active, "the explorers' successes in >= 3 small worlds of 2 projects should mine and admit a skill"
        replays = {str(b).split("/", 2)[2] for (b,) in db.conn.execute("SELECT DISTINCT batch FROM episodes")
                   if "/skill/" in str(b)}
        assert {f"r1/skill/{active[0].name}-v1/with", f"r1/skill/{active[0].name}-v1/without"} <= replays
        # Both arms were played by the acting agent b, under its own levers, as its held-out episodes are.
        for label in replays:
            assert {r.levers.stuck for r in batch_episodes(db, f"{config.id}/population/{label}").values()} == {"note"}
        evaluated = [db.get_experience(str(r[0])) for r in
                     db.conn.execute("SELECT id FROM episodes WHERE batch LIKE '%/r1/eval'")]
        assert any(set(used_skills(e)) & {s.item_id for s in active} for e in evaluated)


SMOL = """
name = "smol-duo"
world = "math/arith-v1"
level = 0
budget = 4

[[agents]]
name = "cold"
model = "smollm2-135m"

[[agents]]
name = "warm"
model = "smollm2-135m"
temperature = 0.8
seed = 2
"""


@pytest.mark.slow
def test_the_population_strategy_runs_on_the_embedded_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("llama_cpp", reason="the llama extra is not installed (make test installs it)")
    monkeypatch.setenv("LLE_THREADS", "1")  # two threads spin-wait on a busy machine (tests/policies/conftest.py)
    file = tmp_path / "smol.toml"
    file.write_text(SMOL)
    suite = Path(__file__).resolve().parents[2] / "examples" / "suites" / "arith-easy.toml"
    config = RunConfig.model_validate({"suite": str(suite), "model": "smollm2-135m", "rounds": 1,
                                       "strategies": ["none", "population"], "train_per_round": 1, "eval_tasks": 1,
                                       "workers": 1, "group_size": 1, "max_steps": 2, "population": str(file)})
    loop.Flywheel(config, tmp_path / "ws").run()
    folder = loop.run_folder(config.id, tmp_path / "ws")
    with Store(loop.strategy_db(folder, "population")) as db:
        rows = list(db.conn.execute("SELECT batch, id FROM episodes"))
        by_batch = {str(b).split("/", 2)[2]: db.get_experience(str(i)) for b, i in rows}
    assert set(by_batch) == {"r1/train/cold", "r1/train/warm", "r1/eval"}
    # Both explorers and the acting agent ran the embedded model; the eval is greedy.
    assert all(s.llm is not None and "smollm2" in s.llm.model.lower() for e in by_batch.values() for s in e.steps)
    [verdict] = paired_verdicts(folder, config)
    # One held-out pair, or on a loaded machine one stopped by the wall-clock safety cap, counted apart.
    assert (verdict.strategy, verdict.baseline, verdict.n + verdict.time_capped) == ("population", "none", 1)
