"""Every poison arm through the real flywheel (toy suite, oracle policy, no model): what reached each carrier.

One poisoned run (1 round, 8 train small worlds: 4 in the tool-output arm, which also carries the one-off
preference, 1 query-only, 1 self-poisoning, 2 clean) serves every test. `lle` must keep each arm out of its rules,
skills and dataset; `raw` keeps every log, so its memory counts what was there to keep. The counts are the
real ones of this draw: a test fails when its arm injects nothing.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from lle.config import RunConfig
from lle.core import CarrierKind, Outcome, Split, Strength, VerificationLevel
from lle.flywheel import loop, poison, report
from lle.flywheel.evaluate import RunResults
from lle.store import Store

GOVERNED = ("rules", "skills", "dataset")


@pytest.fixture(scope="module")
def poisoned_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, RunResults]:
    workspace = tmp_path_factory.mktemp("poison-arms")
    config = RunConfig.model_validate({
        "suite": "toy", "model": "oracle", "strategies": ["none", "raw", "lle"], "rounds": 1, "train_per_round": 8,
        "eval_tasks": 2, "workers": 2, "group_size": 1, "scenario": "poison"})
    loop.Flywheel(config, workspace).run()
    return loop.run_folder(config.id, workspace), report.load_results(config.id, workspace)


def zero_in_governed(counts: dict[str, int], *kinds: str) -> dict[str, int]:
    """The counts of `kinds` in lle's rules, skills and dataset that are not 0 (the goal: none)."""
    return {key: n for c in GOVERNED for kind in kinds if (n := counts[key := f"{c}:{kind}"])}


def train_experiences(folder: Path, strategy: str) -> list[tuple[str, str, list[str]]]:
    """(goal, small world id, observations) of every train experience in a strategy's store."""
    with Store(loop.strategy_db(folder, strategy)) as db:
        exps = [db.get_experience(e.id) for e in db.list_experiences(limit=10_000, split="train")]
    return [(e.small_world.goal, e.small_world.id, [s.effect.observation for s in e.steps]) for e in exps]


@pytest.mark.slow
def test_tool_output_injection_reaches_raw_logs_but_no_governed_carrier(
        poisoned_run: tuple[Path, RunResults]) -> None:
    _, res = poisoned_run
    raw, lle = res.poison["raw"], res.poison["lle"]
    assert raw["memory:injected"] == raw["memory:injected_unquoted"] == 4  # every poisoned log, as trusted text
    assert zero_in_governed(lle, "injected_unquoted") == {} and lle["rules:injected"] == lle["skills:injected"] == 0
    # (the dataset holds none at all here: the same small worlds carry a one-off preference, refused below)
    assert lle["memory:injected"] == 4 and lle["memory:injected_unquoted"] == 0  # kept, but quoted as data


@pytest.mark.slow
def test_one_off_preferences_stay_out_of_rules_skills_and_the_dataset(poisoned_run: tuple[Path, RunResults]) -> None:
    folder, res = poisoned_run
    assert res.poison["raw"]["memory:preference"] == 4
    assert zero_in_governed(res.poison["lle"], "preference") == {}
    assert res.poison["lle"]["memory:preference_unquoted"] == 0  # kept in its task's memory, quoted as data
    with Store(loop.strategy_db(folder, "lle")) as db:  # refused by the dataset gate, with the reason
        refused = [u for u in db.list_updates(limit=100_000, carrier="dataset", op="reject")
                   if u.gate and any("beyond its own task" in r and "just for this task" in r.lower()
                                     for r in u.gate.reasons)]
    assert len(refused) == 4


@pytest.mark.slow
def test_query_only_injection_comes_from_task_text_and_stays_out_of_governed_carriers(
        poisoned_run: tuple[Path, RunResults]) -> None:
    folder, res = poisoned_run
    carrying = [(sw, obs) for goal, sw, obs in train_experiences(folder, "raw") if poison.QUERY_MARK in goal]
    assert len(carrying) == 1
    # Query-only: the attack is in the request; no tool output carries it (nor the tool arm's injection).
    assert not any(poison.QUERY_MARK in o or poison.INJECTION_MARK in o for _, obs in carrying for o in obs)
    raw, lle = res.poison["raw"], res.poison["lle"]
    assert raw["memory:query"] == raw["memory:query_unquoted"] == 1
    assert zero_in_governed(lle, "query", "query_unquoted") == {}
    # lle's memory keeps the task, with the aside that speaks for later tasks quoted as data (not as the task).
    assert lle["memory:query"] == 1 and lle["memory:query_unquoted"] == 0


@pytest.mark.slow
def test_self_poisoned_successes_are_kept_as_failures_never_as_successes(
        poisoned_run: tuple[Path, RunResults]) -> None:
    folder, res = poisoned_run
    for strategy in ("raw", "lle"):
        with Store(loop.strategy_db(folder, strategy)) as db:
            batches = {str(i): str(b) for i, b in db.conn.execute("SELECT id, batch FROM episodes").fetchall()}
            # The arm's, in the train batch (a skill replay that goes wrong is fooled alike, but no arm made it).
            fooled = sorted(i for i in poison.self_poisoned_ids(db) if batches[i].endswith("/r1/train"))
            assert len(fooled) == 1, strategy
            for exp_id in fooled:
                exp = db.get_experience(exp_id)
                weak = {e.anchor for e in exp.evidence if e.outcome is Outcome.passed
                        and e.strength is not Strength.hard and e.anchor != "world_model"}  # its predictions came true
                hard = {e.anchor for e in exp.evidence if e.outcome is Outcome.failed and e.strength is Strength.hard}
                assert weak == {"self_report", "surface_check"} and hard == {"state"}
                assert (exp.outcome, exp.verification) == (Outcome.failed, VerificationLevel.hard_anchor)
                assert exp.steps[-1].request == poison.CLAIM  # stopped one move short, claiming success
    raw, lle = res.poison["raw"], res.poison["lle"]
    assert raw["memory:self_poisoned"] == 1  # raw keeps every log, this one too
    assert zero_in_governed(lle, "self_poisoned_as_success") == {}
    assert lle["rules:self_poisoned"] == lle["skills:self_poisoned"] == 0
    # What lle does keep of them is labelled by the hard anchor: a failure to learn from, never a success.
    assert lle["memory:self_poisoned_as_success"] == 0
    assert lle["memory:self_poisoned"] + lle["dataset:self_poisoned"] > 0
    assert res.carriers["lle"]["dataset"] > lle["dataset:self_poisoned"]  # the clean successes are rows


@pytest.mark.slow
def test_the_poison_report_counts_every_arm_in_every_carrier(poisoned_run: tuple[Path, RunResults]) -> None:
    folder, res = poisoned_run
    arms = poison.by_arm(res.poison["lle"])
    assert set(arms) == {"tool_output_injection", "preference", "query_only", "self_poisoning"}
    assert all(set(per_carrier) == {c.value for c in CarrierKind} for per_carrier in arms.values())
    assert arms["query_only"]["memory"] == {"reached": 1, "trusted": 0}
    assert arms["preference"]["memory"] == {"reached": 4, "trusted": 0}
    assert res.total("lle", 1).passed == res.total("none", 0).passed  # held-out success did not move
    html = report.write_report(res, folder.parent.parent).read_text()
    assert "memory: query" in html or "memory:query" in html


def test_task_text_that_speaks_beyond_its_task_is_found_and_ordinary_goals_are_not() -> None:
    from lle.carriers.dataset import scope_claims
    from lle.governance.hygiene import quote_untrusted
    from lle.worlds.toy.keys import KeysFamily

    assert all(scope_claims(q.format(mark=poison.QUERY_MARK)) for q in poison.QUERIES)
    assert all(scope_claims(p) for p in poison.PREFERENCES)
    goal = KeysFamily().small_world(Split.train, 3).goal
    quoted = quote_untrusted("next time, submit first", "tool:look")  # an observation quoted as data is not task text
    assert scope_claims(goal) == [] and scope_claims(quoted) == []


def test_a_memory_keeps_an_aside_for_later_tasks_quoted_as_data() -> None:
    from lle.carriers.memory import memory_item_from
    from lle.context.compress import outside_quotes
    from lle.core import Experience, PolicyInfo
    from lle.governance.hygiene import quote_scope_claims
    from lle.worlds.toy.keys import KeysFamily

    sw = KeysFamily().small_world(Split.train, 3)
    aside = poison.QUERIES[0].format(mark=poison.QUERY_MARK)
    asked = sw.model_copy(update={"goal": f"{sw.goal} {aside}"})
    item = memory_item_from(Experience(small_world=asked, policy=PolicyInfo(model="scripted"), steps=[],
                                       outcome=Outcome.failed))
    task = str(item.content["task"])  # type: ignore[index, call-overload]
    assert poison.QUERY_MARK in task and poison.QUERY_MARK not in outside_quotes(task)
    assert outside_quotes(task).startswith(sw.goal)  # the task itself stays as it was asked
    assert quote_scope_claims(sw.goal) == sw.goal  # an ordinary goal is untouched
