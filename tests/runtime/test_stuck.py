"""Stuck detection on recorded trajectories, and the levers that act on it."""

from __future__ import annotations

import pytest
from pydantic import JsonValue

from lle.config import Levers
from lle.core import ActionRequest, ActionStatus, Effect, ExecutedAction, Step, ToolSpec
from lle.runtime.levers import LeverState, NothingLeft
from lle.runtime.stuck import StuckKind, detect
from lle.runtime.working_memory import working_memory

CALC = "1433 * 4201 + 9488 + 3479 * 1389"


def step(index: int, tool: str, args: dict[str, JsonValue], observation: str, error: str | None = None) -> Step:
    return Step(index=index, request=ActionRequest(tool=tool, args=args, thought="t", expect="e"),
                executed=ExecutedAction(tool=tool, args=args, allowed=True,
                                        status=ActionStatus.error if error else ActionStatus.ok),
                effect=Effect(observation=observation, error=error))


def qwen_repeat_loop() -> list[Step]:
    """Qwen2.5-Coder-0.5B on math/arith: the right result at step 1, then the same call seven more times."""
    return [step(i, "calculate", {"expression": CALC}, "= 10861852") for i in range(8)]


def game_ping_pong() -> list[Step]:
    """A text game: north, south, north, south through the same two rooms."""
    rooms = {"north": "Kitchen. Exits: south.", "south": "Hallway. Exits: north."}
    return [step(i, "act", {"command": f"move {d}"}, rooms[d])
            for i, d in enumerate(["north", "south", "north", "south"])]


TOOLS = [ToolSpec(name="calculate", description="Evaluate."), ToolSpec(name="submit", description="Answer.")]


def test_the_qwen_repeat_loop_is_a_repeat_from_its_second_step() -> None:
    loop = qwen_repeat_loop()
    assert detect(loop[:1]) is None
    signal = detect(loop[:2])
    assert signal is not None and signal.kind is StuckKind.repeat and signal.tools == ("calculate",)
    assert "at step 1" in signal.note and "10861852" in signal.note
    assert detect(loop).steps == (0, 7)  # type: ignore[union-attr]


def test_a_game_ping_pong_is_detected_and_distinct_actions_are_not() -> None:
    signal = detect(game_ping_pong())
    assert signal is not None and signal.kind is StuckKind.ping_pong
    assert signal.tools == ("act", "act") and "move north" in signal.note and "move south" in signal.note
    varied = [step(i, "act", {"command": c}, f"room {i}") for i, c in enumerate(["look", "move north", "take key"])]
    assert detect(varied) is None


def test_the_same_error_twice_and_no_new_information() -> None:
    failing = [step(i, "run_query", {"sql": "SELECT * FROM order"}, "", error="no such table: order") for i in range(2)]
    signal = detect(failing)
    assert signal is not None and signal.kind is StuckKind.repeat_error and "no such table" in signal.note
    # different actions, but the last four only showed observations already seen
    seen = [step(0, "look", {}, "A"), step(1, "inventory", {}, "B")]
    circling = seen + [step(2 + i, "examine", {"x": i}, "AB"[i % 2]) for i in range(4)]
    signal = detect(circling)
    assert signal is not None and signal.kind is StuckKind.no_new_info


def test_note_then_mask_then_stuck() -> None:
    state = LeverState(Levers(stuck="mask"), max_steps=8, world=None)
    loop = qwen_repeat_loop()
    tools, observation, done = state.prepare(loop[:2], TOOLS, "= 10861852")
    assert [t.name for t in tools] == ["calculate", "submit"]  # first detection: a note only
    assert "you already ran calculate" in observation and done[0].content["masked"] == []  # type: ignore[index]
    tools, _, done = state.prepare(loop[:3], TOOLS, "= 10861852")
    assert [t.name for t in tools] == ["submit"]  # second: the repeated tool is masked out
    assert done[0].kind == "intervention" and done[0].content["masked"] == ["calculate"]  # type: ignore[index]
    with pytest.raises(NothingLeft):
        state.prepare(loop[:4], TOOLS[:1], "= 10861852")


def test_the_last_step_allows_only_submit_and_the_budget_is_shown() -> None:
    state = LeverState(Levers(submit_discipline=True), max_steps=3, world=None)
    history = qwen_repeat_loop()[:1]
    tools, observation, done = state.prepare(history, TOOLS, "= 10861852")
    assert [t.name for t in tools] == ["calculate", "submit"] and "step 2 of 3; 1 more after it" in observation
    assert done == []
    tools, observation, done = state.prepare(qwen_repeat_loop()[:2], TOOLS, "= 10861852")
    assert [t.name for t in tools] == ["submit"] and "last step" in observation
    assert done[0].content == {"lever": "submit_only", "tools": ["submit"]}


def test_levers_off_change_nothing() -> None:
    state = LeverState(Levers(), max_steps=8, world=None)
    assert state.prepare(qwen_repeat_loop()[:5], TOOLS, "obs") == (TOOLS, "obs", [])


def test_working_memory_lists_each_action_once_with_its_result() -> None:
    text = working_memory(qwen_repeat_loop()[:3])
    assert text.count("calculate(") == 1 and "steps 1, 2, 3" in text and "= 10861852" in text
    sql = [step(0, "list_tables", {}, "customers, orders"),
           step(1, "run_query", {"sql": "SELECT x"}, "", error="no such column: x"),
           step(2, "describe_table", {"table": "orders"}, "id, total, placed_at")]
    text = working_memory(sql)
    assert "list_tables() -> customers, orders" in text and "Last error (step 2): no such column: x" in text
    assert working_memory([]) == ""
