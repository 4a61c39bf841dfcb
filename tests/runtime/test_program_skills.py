"""Program skills: a Python program over the world's tools, re-executed in the real sandbox call by call, each
call grounded and recorded as its own step; the fast path runs the first offered one before the policy acts."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import JsonValue, ValidationError

from lle.carriers.skill_mining import SkillCall, SkillDescriptor
from lle.carriers.skills import Skill, SkillLibrary
from lle.core import (
    ActionRequest,
    ActionStatus,
    Context,
    Experience,
    GateResult,
    Revocation,
    SmallWorld,
    Split,
    Step,
    UpdateOp,
)
from lle.errors import InvalidInputError
from lle.policies import ScriptedPolicy
from lle.runtime.harness import Episode, Submitted, run_episode, stop_of
from lle.runtime.programs import MAX_PROGRAM_CALLS, ProgramRunner
from lle.runtime.recorder import StoreRecorder
from lle.runtime.resume import resume
from lle.sandbox import bwrap_available
from lle.store import Store
from lle.store.episodes import list_episodes
from lle.worlds.games.arena import GuessNumberFamily

pytestmark = pytest.mark.skipif(not bwrap_available(), reason="bubblewrap is missing (apt-get install bubblewrap)")

BINARY_SEARCH = '''
import re

def skill(goal, call):
    lo, hi = (int(n) for n in re.search(r"between (\\d+) and (\\d+)", goal).groups())
    while lo <= hi:
        mid = (lo + hi) // 2
        seen = call("guess", number=mid)
        if "is higher" in seen:
            lo = mid + 1
        elif "is lower" in seen:
            hi = mid - 1
        else:
            return
'''
GUESS_TWICE = '''
def skill(goal, call):
    call("guess", number=1)
    call("guess", number=2)
'''


def guess_world(seed: int = 0) -> SmallWorld:
    return GuessNumberFamily().small_world(Split.train, seed)  # the range 1-100


def program(name: str, source: str, tools: list[str] | None = None) -> SkillDescriptor:
    return SkillDescriptor(name=name, family="games", kind="program", program=source,
                           tools=tools or ["guess", "submit"]).finished()


def skill(store: Store, name: str, source: str) -> Skill:
    return SkillLibrary(store).import_descriptor(program(name, source).model_dump(mode="json"), actor="test")


def submits(context: Context) -> ActionRequest:
    return ActionRequest(tool="submit", thought="nothing better to do")


def notes(step: Step, kind: str = "skill") -> list[dict[str, JsonValue]]:
    return [f.content for f in step.feedback
            if f.source == "runtime" and f.kind == kind and isinstance(f.content, dict)]


def reward(step: Step) -> dict[str, JsonValue]:
    found = next(f.content for f in step.feedback if f.kind == "reward")
    assert isinstance(found, dict)
    return found


def test_a_binary_search_program_wins_the_game_by_the_fast_path_one_recorded_step_per_call(store: Store) -> None:
    search = skill(store, "binary_search", BINARY_SEARCH)
    policy = ScriptedPolicy(submits)
    exp = run_episode(guess_world(), policy, store=store, skills=[search])
    assert 2 <= len(exp.steps) <= 7 and policy.position == 0  # the program won before the policy acted
    guesses = [s.executed.args["number"] for s in exp.steps]
    assert guesses[:2] == [50, 75] and len(set(guesses)) == len(guesses)  # halving, never the same guess twice
    for n, step in enumerate(exp.steps):
        assert step.request.tool == step.executed.tool == "guess" and step.executed.allowed
        assert step.executed.status is ActionStatus.ok and step.effect.observation.startswith("You played [")
        assert step.context_refs == [search.item_id] and step.llm is None
        [note] = notes(step)
        assert note["skill"] == search.item_id and note["call"] == n + 1 and note["of"] is None
        assert note["stopped"] is False and note["tool"] == "skill_binary_search"
        assert any(c.kind == "state" for c in step.effect.changes)  # the effect is measured, not told
    assert notes(exp.steps[0], "skill_fired") == [{"skill": search.item_id}]
    assert all(not notes(s, "skill_fired") for s in exp.steps[1:])
    assert isinstance(stop_of(exp.steps[-1]), Submitted)
    info = reward(exp.steps[-1])["info"]
    assert isinstance(info, dict) and info["success"] is True and info["ended_by"] == "game"
    assert store.get_experience(exp.id) == exp


def test_the_policy_acts_after_the_fast_path_and_can_call_another_program_skill_as_a_tool(store: Store) -> None:
    twice, search = skill(store, "guess_twice", GUESS_TWICE), skill(store, "binary_search", BINARY_SEARCH)
    seen: list[Context] = []

    def use_search(context: Context) -> ActionRequest:
        seen.append(context)
        return ActionRequest(tool="skill_binary_search", thought="search the rest")

    exp = run_episode(guess_world(), ScriptedPolicy(use_search), skills=[twice, search])
    # Only the first offered program fired; the policy then saw its result and called the other one as a tool.
    assert len(seen) == 1 and "You played [2]." in seen[0].messages[-1].content
    assert [s.executed.args.get("number") for s in exp.steps[:2]] == [1, 2]
    assert [notes(s)[0]["skill"] for s in exp.steps[:2]] == [twice.item_id] * 2
    assert notes(exp.steps[0], "skill_fired") == [{"skill": twice.item_id}]
    searched = exp.steps[2:]
    assert searched and all(notes(s)[0]["skill"] == search.item_id for s in searched)
    assert [notes(s)[0]["call"] for s in searched] == list(range(1, len(searched) + 1))
    assert not any(notes(s, "skill_fired") for s in searched)
    assert searched[0].executed.args == {"number": 50} and searched[0].context_refs[-1] == search.item_id
    assert reward(exp.steps[-1])["reward"] == 1.0


def test_a_call_the_small_world_does_not_allow_is_denied_and_ends_the_program(store: Store) -> None:
    search = skill(store, "binary_search", BINARY_SEARCH)
    only_submit = guess_world().model_copy(update={"tools": ["submit"]})
    exp = run_episode(only_submit, ScriptedPolicy(submits), skills=[search])
    denied, after = exp.steps
    assert denied.request == ActionRequest(tool="guess", args={"number": 50}, thought="skill_binary_search: "
                                           "program call 1")
    assert not denied.executed.allowed and denied.executed.status is ActionStatus.denied
    assert "'guess' is not allowed in this small world" in (denied.executed.denied_reason or "")
    assert notes(denied)[0]["stopped"] is True and notes(denied, "skill_fired")
    assert after.request.tool == "submit" and not notes(after)  # the program stopped there; the policy went on
    # A tool the world does not have at all is the program's mistake: denied too, never a malformed stop.
    unknown = skill(store, "teleport", 'def skill(goal, call):\n    call("teleport", to="the answer")\n')
    exp = run_episode(guess_world(), ScriptedPolicy(submits), skills=[unknown])
    assert [s.executed.status for s in exp.steps] == [ActionStatus.denied, ActionStatus.ok]
    assert "unknown tool 'teleport'" in (exp.steps[0].executed.denied_reason or "")


@pytest.mark.parametrize(("source", "reason"), [
    ('def skill(goal, call):\n    call("guess", number=50)\n    raise ValueError("no idea")\n',
     "the program failed: ValueError: no idea (program line 3)"),
    ("def skill(goal, call):\n    while True:\n        pass\n",
     "the program ran past its time limit (2 s of CPU, 10 s in all)"),
    ('import os\n\ndef skill(goal, call):\n    os.write(1, b"garbage\\n")\n    call("guess", number=1)\n',
     "the program's output is not one result line"),
    ('def skill(goal, call):\n    call("guess", number={1, 2})\n', "call 1 (guess): its args are not JSON"),
    ("def skill(goal, call)\n    pass\n", "SyntaxError"),
    ("def solve(goal, call):\n    pass\n", "the program defines no function skill(goal, call)"),
], ids=["raises", "never-returns", "prints-garbage", "non-json-args", "syntax-error", "no-skill-function"])
def test_a_failing_program_is_one_recorded_denied_step_that_names_the_reason(store: Store, source: str,
                                                                               reason: str) -> None:
    broken = skill(store, "broken", source)
    exp = run_episode(guess_world(), ScriptedPolicy(submits), skills=[broken])
    calls = 1 if "raise ValueError" in source else 0  # the call it made before it raised ran as usual
    assert [s.executed.status for s in exp.steps] == [ActionStatus.ok] * calls + [ActionStatus.denied,
                                                                                    ActionStatus.ok]
    failed = exp.steps[calls]
    assert failed.request.tool == failed.executed.tool == "skill_broken" and not failed.executed.allowed
    assert reason in (failed.executed.denied_reason or "") and reason in failed.effect.observation
    assert notes(failed)[0]["stopped"] is True and notes(failed)[0]["call"] == calls + 1
    assert exp.steps[-1].request.tool == "submit"


def test_the_runner_refuses_too_many_calls_and_a_program_that_is_not_deterministic() -> None:
    endless = ProgramRunner('def skill(goal, call):\n    while True:\n        call("guess", number=1)\n')
    assert endless.next_call("g", ["seen"] * (MAX_PROGRAM_CALLS - 1)) == ActionRequest(tool="guess",
                                                                                     args={"number": 1})
    assert endless.next_call("g", ["seen"] * MAX_PROGRAM_CALLS) == (
        f"the program failed: the program made more than {MAX_PROGRAM_CALLS} calls")
    coin = ProgramRunner('import random\n\ndef skill(goal, call):\n    call("guess", number=random.randint(1, 9))\n')
    first = coin.next_call("g", [])
    assert isinstance(first, ActionRequest) and first.tool == "guess"
    wrong = ActionRequest(tool="guess", args={"number": 10})  # never drawn: the re-run differs from it
    assert "the program is not deterministic: its call 1 was guess" in str(coin.next_call("g", ["x"], [wrong]))
    done = ProgramRunner(GUESS_TWICE)
    assert done.next_call("g", ["a", "b"]) is None and done.next_call("g", ["a"]) == ActionRequest(
        tool="guess", args={"number": 2})


def test_a_program_descriptor_validates_and_is_keyed_by_its_normalized_source(store: Store) -> None:
    desc = program("binary_search", BINARY_SEARCH)
    assert desc.calls == [] and desc.kind == "program" and "import re" not in desc.description
    assert "guess, submit" in desc.description
    respaced = program("other_name", "\n".join("  " + line + "   " for line in BINARY_SEARCH.splitlines()) + "\n\n")
    assert respaced.key == desc.key != program("binary_search", BINARY_SEARCH.replace("mid + 1", "mid + 2")).key
    macro = SkillDescriptor(name="g", family="games", calls=[SkillCall(tool="guess", args={"number": 5})]).finished()
    assert macro.key != desc.key and macro.description.startswith("Runs guess(number=5) as one action")
    with pytest.raises(ValidationError, match="not both"):
        SkillDescriptor(name="g", family="games", kind="program", program=GUESS_TWICE, tools=["guess"],
                        calls=[SkillCall(tool="guess")])
    with pytest.raises(ValidationError, match="List should have at least 1 item"):
        SkillDescriptor(name="g", family="games")  # neither: a macro without calls, refused as before
    with pytest.raises(ValidationError, match="its source in `program`"):
        SkillDescriptor(name="g", family="games", kind="program", tools=["guess"])
    with pytest.raises(ValidationError, match="the world tools it may call"):
        SkillDescriptor(name="g", family="games", kind="program", program=GUESS_TWICE)
    # Offered only where the small world allows every tool it names; the model gives it no arguments.
    library = SkillLibrary(store)
    found = library.import_descriptor(desc.model_dump(mode="json"), actor="test")
    gate = GateResult(name="test", passed=True)
    library.transition(found.item_id, UpdateOp.admit, gate=gate)
    library.transition(found.item_id, UpdateOp.activate, gate=gate)
    assert [s.item_id for s in library.offered(guess_world())] == [found.item_id]
    assert library.offered(guess_world().model_copy(update={"tools": ["guess"]})) == []
    assert found.spec.parameters["properties"] == {} and found.program == desc.program
    # A revoked program comes back by meaning under no disguise: re-spaced and renamed, it is refused.
    library.revoke(found.item_id, Revocation(target=found.item_id, reason="it leaked the answer", author="test"))
    with pytest.raises(InvalidInputError, match=f"repeats revoked skill {found.item_id}"):
        library.import_descriptor(respaced.model_dump(mode="json"), actor="test")


def test_an_episode_killed_in_the_middle_of_a_program_resumes_like_the_unkilled_one(tmp_path: Path) -> None:
    sw = guess_world(3)
    with Store(tmp_path / "lle.db") as db:
        search = skill(db, "binary_search", BINARY_SEARCH)

        def killed_at_call_3(_episode_id: str, step: Step) -> None:
            if step.index == 2:
                raise KeyboardInterrupt  # step 2 is durable; the program's next call never ran

        with pytest.raises(KeyboardInterrupt):
            Episode(sw, ScriptedPolicy(submits), recorder=StoreRecorder(db, on_commit=killed_at_call_3),
                    skills=[search], record_timings=False).run()
        [(record, committed, _)] = list_episodes(db, unfinished=True)
        assert committed == 3
        resumed = resume(db, record.id, policy=ScriptedPolicy(submits), skills=[search], record_timings=False)
        straight: Experience = run_episode(sw, ScriptedPolicy(submits), skills=[search], record_timings=False)
        assert len(resumed.steps) > 3 and all(notes(s) for s in resumed.steps)
        assert [s.model_dump() for s in resumed.steps] == [s.model_dump() for s in straight.steps]
        assert resumed.content_hash == straight.content_hash
