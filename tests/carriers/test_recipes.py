"""The context carrier: a recipe change is proposed by failure attribution, gated by replay, and revocable."""

from __future__ import annotations

import pytest

from lle.carriers.recipes import RecipeBook, failure_levers
from lle.config import Levers
from lle.core import (
    ActionRequest,
    CarrierItem,
    Effect,
    ExecutedAction,
    Experience,
    Feedback,
    Outcome,
    PolicyInfo,
    SmallWorld,
    Split,
    Step,
    UpdateOp,
)
from lle.governance.lineage import revoke
from lle.store import Store


def episode(seed: int, *, passed: bool, loop: bool = False, stop: str = "Submitted") -> Experience:
    sw = SmallWorld(id=f"math/arith-v1:train:{seed}", world="math/arith-v1", family="math", project="arith",
                    split=Split.train, seed=seed, goal="What is 2 + 3?", tools=["calculate", "submit"])
    steps = [Step(index=i, request=ActionRequest(tool="calculate", args={"expression": "2 + 3" if loop else f"{i}"}),
                  executed=ExecutedAction(tool="calculate", allowed=True), effect=Effect(observation="= 5"))
             for i in range(4)]
    steps[-1] = steps[-1].model_copy(update={"feedback": [Feedback(source="runtime", kind="stop",
                                                                   content={"reason": stop, "detail": ""})]})
    exp = Experience(small_world=sw, policy=PolicyInfo(model="scripted"), steps=steps)
    return exp.model_copy(update={"outcome": Outcome.passed if passed else Outcome.failed}).sealed()


def pairs(store: Store, before: list[bool], after: list[bool]) -> list[tuple[Experience, Experience]]:
    out = []
    for seed, (a, b) in enumerate(zip(before, after, strict=True)):
        pair = (episode(100 + seed, passed=a), episode(100 + seed, passed=b))
        store.append_experiences(list(pair))
        out.append(pair)
    return out


def test_attribution_proposes_masks_for_loops_and_the_submit_discipline_for_unsubmitted_episodes() -> None:
    looped = [episode(i, passed=False, loop=True, stop="StepLimit") for i in range(2)]
    levers, reasons = failure_levers(looped, Levers()) or (None, [])
    assert levers == Levers(stuck="mask", submit_discipline=True) and len(reasons) == 2
    assert failure_levers([episode(9, passed=True, loop=True)], Levers()) is None  # successes propose nothing
    assert failure_levers(looped, Levers(stuck="mask", submit_discipline=True)) is None  # nothing left to add


def test_a_recipe_is_recorded_gated_and_revocable(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    book = RecipeBook(store)
    failed = [episode(i, passed=False, loop=True, stop="StepLimit") for i in range(3)]
    store.append_experiences(failed)
    solved = episode(7, passed=True)
    code = episode(8, passed=False, loop=True, stop="StepLimit")
    code = Experience.model_validate({**code.model_dump(), "small_world": code.small_world.model_copy(
        update={"id": "code/humaneval-v1:train:8", "world": "code/humaneval-v1", "family": "code"})}).sealed()
    first = book.propose_from("math", [*failed, solved, code])
    assert first is not None and book.items()[first.id][1] == "candidate"
    assert first.experience_ids == [e.id for e in failed]  # derived from math's failures, nothing else
    assert book.propose_from("math", failed) is None  # the same proposal waits for its replay once
    sql = book.propose("sql", Levers(notes=0), reasons=["by hand"], experience_ids=[])
    later = book.propose("math", Levers(notes=0), reasons=["by hand"], experience_ids=[])
    # A round replays each family's oldest waiting recipe: SQL's does not wait behind math's.
    assert [c.id for c in book.oldest_per_family(1)] == [first.id, sql.id]
    assert [c.id for c in book.oldest_per_family(2)] == [first.id, later.id, sql.id]
    revoke(store, sql.id, reason="test", author="tester")
    revoke(store, later.id, reason="test", author="tester")
    assert book.levers_for("math") == Levers()  # a candidate is not in force

    regressed = book.decide(first.id, pairs(store, [True] * 4, [False] * 4))
    assert regressed.op is UpdateOp.reject and not regressed.gate.passed
    assert book.levers_for("math") == Levers()

    second = book.propose("math", Levers(stuck="note"), reasons=["by hand"], experience_ids=[])
    update = book.decide(second.id, pairs(store, [False, True, False, False], [True, True, False, False]))
    assert update.op is UpdateOp.activate and update.gate.name == "recipe_replay"
    assert update.gate.reasons == ["2/4 under this recipe vs 1/4 under the one in force (effect +0.25), used in 4"]
    assert book.levers_for("math") == Levers(stuck="note", recipe=second.id) and book.levers_for("sql") == Levers()

    third = book.propose("math", Levers(stuck="mask", working_memory=True), reasons=["by hand"], experience_ids=[])
    replays = pairs(store, [False] * 4, [False] * 4)
    append, written = store.append_update, []

    def die_at_the_second(update: object) -> None:  # a kill between the supersede and the activation
        if written:
            raise KeyboardInterrupt("killed")
        written.append(append(update))  # type: ignore[arg-type]

    monkeypatch.setattr(store, "append_update", die_at_the_second)
    with pytest.raises(KeyboardInterrupt):
        book.decide(third.id, replays)
    monkeypatch.setattr(store, "append_update", append)
    assert book.items()[second.id][1] == "active" and book.items()[third.id][1] == "candidate"  # neither written
    book.decide(third.id, replays)  # no regression: activates, supersedes
    assert book.items()[second.id][1] == "superseded"
    assert book.levers_for("math") == Levers(stuck="mask", working_memory=True, recipe=third.id)

    revoke(store, third.id, reason="made things worse on dev", author="tester")
    assert book.items()[third.id][1] == "revoked"
    assert book.levers_for("math") == Levers(stuck="note", recipe=second.id)  # the one it superseded is back
    history = [u.op for u in store.list_updates(limit=100, carrier="context")]
    assert history.count(UpdateOp.activate) == 2 and UpdateOp.supersede in history


def test_failures_that_copy_another_tasks_note_propose_hiding_failed_memories_then_no_notes() -> None:
    """Measured on math-easy: with lle's memories shown, SmolLM2 called calculate("6 + 7") on `Calculate 8 - 6`
    and held-out success fell from 8/24 to 2/24; on the default compare it lost its one solved held-out task by
    repeating a *failed* memory's call. Copies from failed memories propose hiding those first (successes and
    contrasts may still help); copies from any other note, showing none. The A/B replay then decides."""
    from lle.carriers.memory import memory_item_from
    from lle.context import BudgetedContextBuilder
    from lle.policies.scripted import ScriptedPolicy
    from lle.runtime.harness import run_episode
    from lle.worlds.math import ArithFamily, reference_actions

    family = ArithFamily()
    other = family.small_world(Split.train, 5, level=0)
    call = reference_actions(other)[0].args
    copied = str(call["expression"])

    def memory(outcome: Outcome) -> CarrierItem:
        return memory_item_from(Experience(
            small_world=other, policy=PolicyInfo(model="scripted"), outcome=outcome,
            steps=[Step(index=0, request=ActionRequest(tool="calculate", args=call),
                        executed=ExecutedAction(tool="calculate", args=call, allowed=True),
                        effect=Effect(observation="= 1"))]))

    seen: list[list[str]] = []

    def copy_the_note(context):  # type: ignore[no-untyped-def]
        seen.append(list(context.refs))
        return ActionRequest(tool="calculate", args={"expression": copied})

    worlds = [family.small_world(Split.train, s, level=0) for s in (6, 7)]
    assert all(copied not in sw.goal for sw in worlds)
    for note, first in ((memory(Outcome.passed), {"notes": 0}), (memory(Outcome.failed), {"failed_notes": False})):
        failed = [run_episode(sw, ScriptedPolicy(copy_the_note), context_builder=BudgetedContextBuilder(items=[note]),
                              limits=sw.limits.model_copy(update={"max_steps": 2})) for sw in worlds]
        assert all(e.outcome is not Outcome.passed for e in failed)
        shown = lambda ids, note=note: [note] if note.id in ids else []  # noqa: E731
        levers, reasons = failure_levers(failed, Levers(), shown) or (None, [])
        assert levers is not None and levers.model_dump(include=set(first)) == first, (note.content, levers)
        assert any("only a" in r and "of another task" in r for r in reasons)
        # Once failed memories are hidden, a copy (from what is still shown) proposes showing no notes.
        later, _ = failure_levers(failed, Levers(failed_notes=False), shown) or (None, [])
        assert later is not None and later.notes == 0
        in_force = Levers(notes=0, stuck="mask", submit_discipline=True)
        assert failure_levers(failed, in_force, shown) is None

    # Under `failed_notes=False` the harness shows the success, not the failure; under `notes=0`, nothing.
    passed, failed_note = memory(Outcome.passed), memory(Outcome.failed)
    for levers, expected in ((Levers(failed_notes=False), [[passed.id]]), (Levers(notes=0), [[]]),
                             (Levers(), [[passed.id, failed_note.id]])):
        seen.clear()
        run_episode(worlds[0], ScriptedPolicy(copy_the_note), levers=levers,
                    context_builder=BudgetedContextBuilder(items=[passed, failed_note]),
                    limits=worlds[0].limits.model_copy(update={"max_steps": 1}))
        assert seen == expected, levers
