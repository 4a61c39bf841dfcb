"""What lets a run show learning: levels in the draw, the curriculum, exploration by groups, the reflect baseline."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from lle.config import RunConfig
from lle.core import ActionRequest, Experience, Limits, Outcome, SmallWorld, Split
from lle.evidence import assess_experience
from lle.evidence.credit import first_divergence, group_advantages
from lle.flywheel import curriculum, loop
from lle.flywheel.evaluate import coverage, paired_verdicts, results, table
from lle.flywheel.suite import Suite, SuiteWorld, draw, level_size, parse_suite
from lle.governance.lineage import active_items, revoke
from lle.policies.scripted import ScriptedPolicy
from lle.router.router import UpdateRouter, best_attempt
from lle.runtime.harness import run_episode
from lle.store import Store
from lle.store import flywheel as flywheel_store
from lle.worlds.math import ArithFamily
from lle.worlds.math import reference_actions as math_reference
from lle.worlds.toy import KeysFamily, oracle_actions

LADDER = Suite("ladder", (SuiteWorld("toy/keys-v1", (), (0, 1, 2)),), max_steps=20, train_per_round=2,
               eval_tasks=6)


# --- levels in the draw ----------------------------------------------------------------------------------


def test_a_suite_file_names_levels_by_number_and_refuses_unknown_ones() -> None:
    text = 'max_steps = 4\n[[worlds]]\nid = "toy/keys-v1"\nlevels = [1, 0]\n'
    suite = parse_suite(text, origin="t", default_name="t")
    assert suite.entries[0].levels == (0, 1)
    with pytest.raises(Exception, match=r"toy/keys-v1 has no level 9; its levels: 0\.\.3"):
        parse_suite('max_steps = 4\n[[worlds]]\nid = "toy/keys-v1"\nlevels = [9]\n', origin="t", default_name="t")
    with pytest.raises(Exception, match="list of level numbers"):
        parse_suite('max_steps = 4\n[[worlds]]\nid = "toy/keys-v1"\nlevels = ["easy"]\n', origin="t", default_name="t")


def test_train_draws_take_the_curriculum_level_and_held_out_sets_span_the_levels() -> None:
    assert {sw.level for sw in draw(LADDER, Split.train, 6, seed=0, round_=1)} == {0}  # no curriculum yet: easiest
    up = draw(LADDER, Split.train, 6, seed=0, round_=1, levels={"toy": 2})
    assert {sw.level for sw in up} == {2} and all(":L2:" in sw.id for sw in up)
    held_out = draw(LADDER, Split.dev, 6, seed=0, round_=0)
    assert Counter(sw.level for sw in held_out) == {0: 2, 1: 2, 2: 2}
    assert Counter(sw.project for sw in held_out) == {"manor": 3, "cellar": 3}
    assert held_out == draw(LADDER, Split.dev, 6, seed=3, round_=5)  # the same held-out tasks, whatever the round


def test_a_small_level_gives_what_it_has_and_the_other_worlds_fill_its_places() -> None:
    small = Suite("small", (SuiteWorld("games/mastermind-v1", (), (0,)), SuiteWorld("toy/keys-v1", (), (0,))),
                  max_steps=4)
    have = level_size("games/mastermind-v1", 0, Split.dev)
    assert have is not None and have < 10  # 30 two-digit codes in all
    held_out = draw(small, Split.dev, 20, seed=0, round_=0)
    assert Counter(sw.world for sw in held_out) == {"games/mastermind-v1": have, "toy/keys-v1": 20 - have}
    assert len({sw.id for sw in held_out}) == 20


# --- the curriculum -------------------------------------------------------------------------------------------


def _outcomes(level: int, passed: int, failed: int) -> list[Experience]:
    family = KeysFamily()
    out = []
    for i in range(passed + failed):
        sw = family.small_world(Split.train, i, level=level)
        out.append(Experience(small_world=sw, policy={"model": "test"},
                              outcome=Outcome.passed if i < passed else Outcome.failed))
    return out


def test_the_curriculum_moves_up_past_the_band_down_at_nothing_and_stays_inside() -> None:
    assert curriculum.ladders(LADDER) == {"toy": [0, 1, 2]} and curriculum.start(LADDER) == {"toy": 0}
    assert curriculum.step(LADDER, {"toy": 0}, _outcomes(0, 4, 0)) == ({"toy": 1}, {"toy": "up"})
    assert curriculum.step(LADDER, {"toy": 1}, _outcomes(1, 1, 3)) == ({"toy": 1}, {"toy": "stay"})
    assert curriculum.step(LADDER, {"toy": 1}, _outcomes(1, 0, 4)) == ({"toy": 0}, {"toy": "down"})
    assert curriculum.step(LADDER, {"toy": 0}, _outcomes(0, 0, 4)) == ({"toy": 0}, {"toy": "stay"})  # no rung below
    assert curriculum.step(LADDER, {"toy": 2}, _outcomes(2, 4, 0)) == ({"toy": 2}, {"toy": "stay"})  # none above
    # The band is the run's: a wider one keeps the family where it is.
    assert curriculum.step(LADDER, {"toy": 0}, _outcomes(0, 3, 1), band=(0.1, 0.9))[0] == {"toy": 0}


@pytest.mark.slow
def test_a_run_walks_the_ladder_records_each_round_and_resumes_the_same(tmp_path: Path) -> None:
    suite_file = tmp_path / "ladder.toml"
    suite_file.write_text('max_steps = 20\ntrain = 2\neval = 3\n[[worlds]]\nid = "toy/keys-v1"\nlevels = [0, 1, 2]\n')
    config = RunConfig(suite=str(suite_file), model="oracle", strategies=["lle"], rounds=3, train_per_round=2,
                       eval_tasks=3, workers=1, group_size=1)
    loop.Flywheel(config, tmp_path / "ws").run()
    folder = loop.run_folder(config.id, tmp_path / "ws")
    rows = curriculum.load(folder)
    # The oracle solves every task: each round passes the band and the next trains a level up.
    assert [(r.round, r.level, r.move, r.train_success) for r in rows] == [
        (1, 0, "start", 1.0), (2, 1, "up", 1.0), (3, 2, "up", 1.0)]
    with Store(loop.strategy_db(folder, "lle")) as db:
        levels = Counter(db.get_experience(exp_id).small_world.level
                         for _, exp_id, *_ in flywheel_store.batch_results(db, f"{config.id}/lle/r3/train"))
    assert levels == {2: 2}
    before = (folder / curriculum.FILE).read_text()
    loop.Flywheel(config, tmp_path / "ws").run()  # a resumed (here: finished) run derives the same choices
    assert (folder / curriculum.FILE).read_text() == before
    assert all(json.loads(line)["strategy"] == "lle" for line in before.splitlines())
    # Read as a run of 4 rounds cut short after its third: round 3's results, marked, and verdicts that say so.
    for rounds, last, said in [(3, "3/3", None), (4, "3/3 (r3)", [3, 0])]:
        as_run = config.model_copy(update={"rounds": rounds})
        (row,) = [r for r in table(results(folder, as_run)) if (r["world"], r["strategy"]) == ("all", "lle")]
        (verdict,) = [v.row() for v in paired_verdicts(folder, as_run)]
        assert (row["last"], row["last_round"], verdict["n"], verdict["rounds"]) == (last, 3, 3, said)
        assert ("the run has not evaluated its last round" in str(verdict["sentence"])) is (said is not None)
    # A strategy the run has not evaluated yet gets no verdict and no held-out figure, not one on 0 tasks.
    with_raw = config.model_copy(update={"strategies": ["lle", "raw"]})
    assert [(v.strategy, v.baseline) for v in paired_verdicts(folder, with_raw)] == [("lle", "none")]
    assert {(r["last"], r["ci95"]) for r in table(results(folder, with_raw)) if r["strategy"] == "raw"} == {("–", None)}
    # Coverage: train reached levels 0, 1 and 2 (one round each), the held-out set spans them too.
    cells = coverage(folder, config)["cells"]
    assert {c["level"] for c in cells if c["train"]} == {"0", "1", "2"}
    assert {c["level"] for c in cells if c["held_out"]} == {"0", "1", "2"}
    shown = subprocess.run([sys.executable, "-m", "lle.cli.main", "--workspace", str(tmp_path / "ws"), "worlds",
                            "coverage", config.id[:10], "--json"], capture_output=True, text=True, timeout=120)
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["cells"] == json.loads(json.dumps(cells))


# --- exploration by groups -----------------------------------------------------------------------------------


def _episode(sw: SmallWorld, actions: list[ActionRequest], db: Store) -> Experience:
    return run_episode(sw, ScriptedPolicy(actions), store=db, assess=assess_experience,
                       limits=Limits(max_steps=len(actions)))


def _group(db: Store) -> tuple[Experience, Experience, Experience]:
    """Three attempts at one small world: one that only looks around (fails), two that solve it alike."""
    sw = KeysFamily().small_world(Split.train, 3, level=1)
    good = oracle_actions(sw)
    lost = [good[0], *[ActionRequest(tool="look")] * 2]
    return _episode(sw, lost, db), _episode(sw, good, db), _episode(sw, good, db)


def test_group_advantages_favour_the_success_where_the_attempts_part(tmp_path: Path) -> None:
    with Store(tmp_path / "g.db") as db:
        failure, success, _ = _group(db)
    assert (failure.outcome, success.outcome) == (Outcome.failed, Outcome.passed)
    at = first_divergence(success, failure)
    assert at == success.steps[1].index  # both looked first; then one walked, the other gave up
    adv = group_advantages([failure, success])
    assert adv[success.id][1] > 0 > adv[failure.id][1]
    assert best_attempt([failure, success]) is success


def test_attempts_that_differ_only_in_spacing_do_not_part(tmp_path: Path) -> None:
    """Recorded with SmolLM2: `calculate("7+3")` against `calculate("7 + 3")` became a contrast memory, teaching
    the model only a wrong lesson to copy."""
    sw = ArithFamily().small_world(Split.train, 11, level=0)
    expression = str(math_reference(sw)[0].args["expression"])
    with Store(tmp_path / "g.db") as db:
        spaced = _episode(sw, [ActionRequest(tool="calculate", args={"expression": expression}),
                               ActionRequest(tool="submit", args={"answer": "0"})], db)
        tight = _episode(sw, [ActionRequest(tool="calculate", args={"expression": expression.replace(" ", "")}),
                              ActionRequest(tool="submit", args={"answer": "1"})], db)
    assert first_divergence(spaced, tight) is None  # the observations part first: no shared state left


def test_a_group_routes_its_best_success_and_a_contrast_exactly_once(tmp_path: Path) -> None:
    with Store(tmp_path / "g.db") as db:
        failure, success, twin = _group(db)
        router = UpdateRouter(db, actor="test")
        updates = router.route_group_once([failure, success, twin], "run_test")
        assert updates and router.route_group_once([failure, success, twin], "run_test") == []  # exactly once
        assert all(flywheel_store.is_routed(db, e.id) for e in (failure, success, twin))
        memories = db.carrier_items("memory")
        contrast = [i for i in memories if isinstance(i.content, dict) and i.content.get("kind") == "contrast"]
        assert len(contrast) == 1 and set(contrast[0].experience_ids) == {success.id, failure.id}
        assert "led to success" in str(contrast[0].content["lesson"])
        # The twin success taught nothing twice: only the best attempt became an episode memory.
        episodes = [i for i in memories if isinstance(i.content, dict) and i.content.get("kind") == "episode"]
        assert [i.experience_ids for i in episodes] == [[success.id]]
        # Revoking the failing attempt takes the contrast with it (its provenance names both).
        revoke(db, failure.id, reason="test", author="test")
        assert contrast[0].id not in {i.id for i in active_items(db, "memory")}


@pytest.mark.slow
def test_train_small_worlds_are_attempted_in_groups_and_evaluation_stays_one_greedy_attempt(tmp_path: Path) -> None:
    config = RunConfig(suite="toy", model="oracle", strategies=["raw"], rounds=1, train_per_round=2, eval_tasks=2,
                       workers=1, group_size=3)
    loop.Flywheel(config, tmp_path).run()
    with Store(loop.strategy_db(loop.run_folder(config.id, tmp_path), "raw")) as db:
        batches = Counter(batch.split("/", 2)[2] for batch, *_ in flywheel_store.batch_results(db, config.id + "/"))
        routed = db.conn.execute("SELECT count(*) FROM routed").fetchone()[0]
    assert batches == {"r1/train": 2, "r1/train/a1": 2, "r1/train/a2": 2, "r1/eval": 2}
    assert routed == 6  # raw keeps every attempt


# --- the reflect baseline --------------------------------------------------------------------------------------


@pytest.mark.slow
def test_reflect_keeps_a_lesson_per_episode_without_gates_and_shows_it_later(tmp_path: Path) -> None:
    config = RunConfig(suite="toy", model="oracle", strategies=["none", "reflect"], rounds=1, train_per_round=2,
                       eval_tasks=2, workers=1, group_size=1)
    loop.Flywheel(config, tmp_path).run()
    folder = loop.run_folder(config.id, tmp_path)
    with Store(loop.strategy_db(folder, "reflect")) as db:
        lessons = db.carrier_items("memory")
        assert len(lessons) == 2 and all("lesson" in i.content for i in lessons if isinstance(i.content, dict))
        assert {u.actor for u in db.list_updates()} == {"reflect"} and all(u.gate is None for u in db.list_updates())
        batch = f"{config.id}/reflect/r1/eval"
        evals = [db.get_experience(e) for _, e, *_ in flywheel_store.batch_results(db, batch)]
    shown = {ref for exp in evals for step in exp.steps for ref in step.context_refs}
    assert shown & {i.id for i in lessons}, "held-out episodes read the playbook"


# --- resume after a skill decision ---------------------------------------------------------------------------


@pytest.mark.slow
def test_a_run_killed_at_a_skill_decision_resumes_to_the_unkilled_run(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    from lle.carriers.skills import SkillLibrary

    config = RunConfig(suite="toy", model="oracle", strategies=["lle"], rounds=2, train_per_round=4, eval_tasks=2,
                       workers=1, group_size=1)

    def outcome(workspace: Path) -> tuple[Counter[str], list[tuple[str, int, str]]]:
        with Store(loop.strategy_db(loop.run_folder(config.id, workspace), "lle")) as db:
            skills = sorted((s.name, s.descriptor.version, s.state.value) for s in SkillLibrary(db).skills())
            return Counter(b.split("/", 2)[2] for b in flywheel_store.batches(db, config.id + "/").values()), skills

    loop.Flywheel(config, tmp_path / "whole").run()
    whole = outcome(tmp_path / "whole")
    assert any("/skill/" in b for b in whole[0]), "the oracle's runs replay candidate skills"
    assert any(state == "active" for *_, state in whole[1]), "and activate one"

    # Killed right after the first decision, and between a skill's admission and its activation.
    for name, method, die_after in (("after", "decide", True), ("between", "activate", False)):
        original = getattr(SkillLibrary, method)

        def die(self: SkillLibrary, *args: object, _original: object = original, _after: bool = die_after,
                **kwargs: object) -> object:
            if _after:
                _original(self, *args, **kwargs)  # type: ignore[operator]
            raise KeyboardInterrupt("killed at the first skill decision")

        monkeypatch.setattr(SkillLibrary, method, die)
        with pytest.raises(KeyboardInterrupt):
            loop.Flywheel(config, tmp_path / name).run()
        monkeypatch.setattr(SkillLibrary, method, original)
        loop.Flywheel(config, tmp_path / name).run()  # the resume
        assert outcome(tmp_path / name) == whole, name  # the same replays, episodes and skill states
