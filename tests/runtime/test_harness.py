"""The episode loop: steps committed as they happen, failures recorded as steps, stops carry reasons."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from lle.actions import NO_ACTION
from lle.context.plain import PlainContextBuilder
from lle.core import ActionRequest, ActionStatus, Context, Limits, LLMCall, Outcome, SmallWorld, Split, Step, WorldStep
from lle.errors import InvalidInputError, UnknownIdError, WorldError
from lle.policies import ScriptedPolicy
from lle.runtime import harness
from lle.runtime.harness import (
    Episode,
    PolicyFailed,
    StepLimit,
    Submitted,
    TimeLimit,
    WorldFailed,
    run_episode,
    stop_of,
)
from lle.runtime.recorder import StoreRecorder, timing_free_hash
from lle.runtime.resume import resume
from lle.store import Store
from lle.store.episodes import get_episode, list_episodes
from lle.worlds.toy import KeysFamily, KeysWorld, oracle_actions, oracle_policy

FAMILY = KeysFamily()


def small_world(seed: int = 3, split: Split = Split.train) -> SmallWorld:
    return FAMILY.small_world(split, seed)


class BrokenTake(KeysWorld):
    """The keys world with a real fault: `take` hits a bug in the world's own code."""

    def _do_take(self, item: str) -> WorldStep:
        return WorldStep(self.items["no such room"], 0.0, False, False, {})  # type: ignore[arg-type]


def test_an_episode_is_committed_step_by_step_and_read_back_equal(store: Store) -> None:
    sw = small_world()
    committed: list[int] = []
    exp = Episode(sw, oracle_policy(sw), recorder=StoreRecorder(
        store, on_commit=lambda _id, step: committed.append(len(store.steps_of(_id))))).run()
    # Each on_commit saw its own step already in the store: committed before the next began.
    assert committed == list(range(1, len(exp.steps) + 1))
    assert store.get_experience(exp.id) == exp and exp.content_hash == exp.compute_hash()
    assert exp.outcome == Outcome.unknown and exp.score is None
    assert [s.request for s in exp.steps] == oracle_actions(sw)
    last = exp.steps[-1]
    assert isinstance(stop_of(last), Submitted)
    assert {"reward": 1.0, "terminated": True, "truncated": False, "info": {"success": True}} in [
        f.content for f in last.feedback if f.kind == "reward"]
    assert exp.world_version == "1" and exp.runtime_version.startswith("lle-runtime ")
    record = get_episode(store, exp.id)
    assert record.small_world == sw and record.policy.model == "toy-oracle" and record.initial_observation


def test_the_harness_tells_a_policy_that_keeps_state_when_each_episode_starts() -> None:
    class Counting(ScriptedPolicy):
        starts = 0

        def start_episode(self) -> None:
            self.starts += 1
            self.position = 0  # a scripted policy's state: its place in the script

    sw = small_world()
    policy = Counting(oracle_actions(sw))
    first, second = Episode(sw, policy).run(), Episode(sw, policy).run()
    assert policy.starts == 2 and [s.request for s in second.steps] == [s.request for s in first.steps]


def test_a_policy_exception_is_a_recorded_step_and_the_outcome_stays_unknown(store: Store) -> None:
    def flaky(context: Context) -> ActionRequest:
        if len(context.messages) > 3:
            raise TimeoutError("model server did not answer")
        return ActionRequest(tool="look")

    exp = run_episode(small_world(), ScriptedPolicy(flaky), store=store)
    stored = store.get_experience(exp.id)
    assert len(stored.steps) == 2 and stored.outcome == Outcome.unknown
    failed = stored.steps[1]
    assert failed.request.tool == NO_ACTION and failed.executed.status == ActionStatus.error
    assert failed.effect.error == "policy raised TimeoutError: model server did not answer"
    stop = stop_of(failed)
    assert isinstance(stop, PolicyFailed) and "TimeoutError" in stop.detail


def test_a_malformed_action_is_a_recorded_error_step(store: Store) -> None:
    policy = ScriptedPolicy([{"tool": "look"}, {"tool": "go", "args": {"direction": "up"}}, {"tool": "submit"}])
    exp = run_episode(small_world(), policy, store=store)
    assert len(exp.steps) == 2 and exp.outcome == Outcome.unknown
    bad = store.steps_of(exp.id)[1]
    assert bad.executed.status == ActionStatus.error and not bad.executed.allowed
    assert "malformed action: args of go do not match its schema at direction" in str(bad.effect.error)
    assert isinstance(stop_of(bad), PolicyFailed)


def test_a_world_exception_is_a_recorded_error_step(store: Store) -> None:
    sw = small_world()
    world = BrokenTake(sw.project, seed=sw.seed)
    exp = run_episode(sw, oracle_policy(sw), store=store, world=world)
    crashed = store.get_experience(exp.id).steps[-1]
    assert crashed.request.tool == "take" and crashed.executed.allowed
    assert crashed.executed.status == ActionStatus.error
    assert crashed.effect.error == "world raised KeyError: 'no such room'"
    assert isinstance(stop_of(crashed), WorldFailed) and exp.outcome == Outcome.unknown


def test_step_and_time_limits_stop_the_episode_with_their_reason(store: Store,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    looping = ScriptedPolicy(lambda _ctx: {"tool": "look"})
    exp = run_episode(small_world(), looping, limits=Limits(max_steps=4), store=store)
    assert len(exp.steps) == 4 and isinstance(stop_of(exp.steps[-1]), StepLimit)
    # A clock 20 ms a reading, so the machine's load cannot decide how many steps fit in 50 ms.
    clock = itertools.count(0.0, 0.02)
    monkeypatch.setattr(harness.time, "monotonic", lambda: next(clock))
    slow = run_episode(small_world(), looping, limits=Limits(max_steps=1000, max_seconds=0.05))
    assert len(slow.steps) == 3 and isinstance(stop_of(slow.steps[-1]), TimeLimit)


def test_the_plain_context_shows_goal_tools_history_and_observation() -> None:
    sw = small_world()
    seen: list[Context] = []

    def spy(context: Context) -> ActionRequest:
        seen.append(context)
        return oracle_actions(sw)[len(seen) - 1]

    run_episode(sw, ScriptedPolicy(spy), PlainContextBuilder(max_history=2))
    first, later = seen[0], seen[4]
    assert "- look:" in first.messages[0].content and "smash" not in first.messages[0].content
    assert first.messages[1].content == f"Goal: {sw.goal}"
    assert first.messages[-1].content.startswith("Observation: You are in the")
    assert "(2 earlier steps omitted)" in [m.content for m in later.messages]
    assert [m.role for m in later.messages[-4:]] == ["assistant", "tool", "assistant", "tool"]
    assert {b["properties"]["tool"]["const"] for b in first.action_schema["anyOf"]} == set(sw.tools)  # type: ignore


class InterruptAt:
    """Plays `plan` and is interrupted (Ctrl-C during the model call) before step `at`."""

    def __init__(self, plan: list[ActionRequest], at: int) -> None:
        self.inner = ScriptedPolicy(plan)
        self.info = self.inner.info
        self.at = at

    def act(self, context: Context) -> tuple[ActionRequest, LLMCall | None]:
        if self.inner.position == self.at:
            raise KeyboardInterrupt  # a BaseException: nothing is recorded for the step in flight
        return self.inner.act(context)


def test_an_interrupted_episode_resumes_to_the_same_content_as_an_uninterrupted_one(tmp_path: Path) -> None:
    sw = small_world(seed=8)
    plan = oracle_actions(sw)
    with Store(tmp_path / "lle.db") as db:
        with pytest.raises(KeyboardInterrupt):
            run_episode(sw, InterruptAt(plan, 3), store=db, record_timings=False)
        [(record, committed, finished)] = list_episodes(db, unfinished=True)
        assert committed == 3 and not finished
        with pytest.raises(InvalidInputError, match="without a spec"):
            resume(db, record.id)
        with pytest.raises(InvalidInputError, match="resume it with the policy it started with"):
            resume(db, record.id, policy=ScriptedPolicy(plan[:-1]))
        resumed = resume(db, record.id, policy=ScriptedPolicy(plan), record_timings=False)
        assert [s.index for s in db.steps_of(record.id)] == list(range(len(plan)))
        assert resume(db, record.id) == resumed  # a finished episode is returned as stored, not rerun
        assert list_episodes(db, unfinished=True) == []
        straight = run_episode(sw, ScriptedPolicy(plan), record_timings=False)
        assert resumed.content_hash == straight.content_hash
        assert timing_free_hash(resumed) == timing_free_hash(run_episode(sw, ScriptedPolicy(plan)))
        with pytest.raises(UnknownIdError, match="no episode with id 'exp_missing'"):
            resume(db, "exp_missing")


def test_resume_refuses_a_world_that_replays_differently(tmp_path: Path) -> None:
    sw = small_world(seed=5)
    plan = oracle_actions(sw)
    with Store(tmp_path / "lle.db") as db:
        with pytest.raises(KeyboardInterrupt):
            run_episode(sw, InterruptAt(plan, 4), store=db)
        [(record, _, _)] = list_episodes(db, unfinished=True)
        other = KeysWorld("manor" if sw.project == "cellar" else "cellar")  # same seed, another layout
        with pytest.raises(WorldError, match="diverged at reset"):
            resume(db, record.id, policy=ScriptedPolicy(plan), world=other)
        # The refused resume wrote nothing: the episode is still there to resume properly.
        assert len(db.steps_of(record.id)) == 4
        done = resume(db, record.id, policy=ScriptedPolicy(plan))
        assert len(done.steps) == len(plan) and isinstance(stop_of(done.steps[-1]), Submitted)


def test_a_kill_between_the_last_step_and_the_experience_is_finished_by_resume(tmp_path: Path) -> None:
    sw = small_world(seed=11)

    def killed_after_commit(_episode_id: str, step: Step) -> None:
        if stop_of(step) is not None:
            raise KeyboardInterrupt  # the last step is durable; the experience row is not written

    with Store(tmp_path / "lle.db") as db:
        with pytest.raises(KeyboardInterrupt):
            Episode(sw, oracle_policy(sw), recorder=StoreRecorder(db, on_commit=killed_after_commit)).run()
        [(record, committed, _)] = list_episodes(db, unfinished=True)
        assert committed == len(oracle_actions(sw))
        finished = resume(db, record.id, policy=oracle_policy(sw))
        assert len(finished.steps) == committed and isinstance(stop_of(finished.steps[-1]), Submitted)
        assert finished.world_version == "1" and db.get_experience(record.id) == finished
