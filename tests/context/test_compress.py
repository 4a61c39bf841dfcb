"""Trajectory compression keeps decision points and collapses repeats."""

from __future__ import annotations

from lle.context.compress import compress_trajectory, format_line, is_decision_point, shorten_middle
from lle.core import ActionRequest, ActionStatus, Change, Effect, ExecutedAction, Step


def step(i: int, tool: str = "look", obs: str = "a room", *, error: str | None = None, change: bool = False,
         denied: bool = False) -> Step:
    return Step(
        index=i,
        request=ActionRequest(tool=tool, args={"x": 1} if tool == "move" else {}),
        executed=ExecutedAction(tool=tool, allowed=not denied, denied_reason="no" if denied else None,
                                status=ActionStatus.denied if denied else ActionStatus.ok),
        effect=Effect(observation=obs, error=error,
                      changes=[Change(kind="state", target="door", before="shut", after="open")] if change else []),
    )


def test_repeats_collapse_into_one_counted_line() -> None:
    lines = compress_trajectory([step(i) for i in range(6)] + [step(6, "move", "moved")])
    assert [(x.first, x.last) for x in lines] == [(0, 5), (6, 6)]
    assert "[same result 6x]" in lines[0].text
    assert format_line(lines[0]).startswith("steps 1-6: look {}")
    assert format_line(lines[1]).startswith("step 7: move")


def test_decision_points_are_never_collapsed() -> None:
    steps = [step(0), step(1, change=True), step(2), step(3, error="boom"), step(4), step(5, denied=True), step(6)]
    lines = compress_trajectory(steps)
    decisions = [x.first for x in lines if x.decision]
    assert decisions == [1, 3, 5, 6]  # 6: the latest step is always a decision point
    # routine steps 0, 2 and 4 are separated by decision points, so nothing merges across them
    assert [x.first for x in lines] == [0, 1, 2, 3, 4, 5, 6]
    assert "ERROR: boom" in lines[3].text and "DENIED" in lines[5].text and "changed: door" in lines[1].text


def test_last_step_stays_separate_even_if_it_repeats() -> None:
    lines = compress_trajectory([step(i) for i in range(4)])
    assert [(x.first, x.last) for x in lines] == [(0, 2), (3, 3)]
    assert lines[-1].decision


def test_routine_observations_are_shortened_decisions_kept_longer() -> None:
    long = "x" * 1000
    lines = compress_trajectory([step(0, obs=long), step(1, obs=long)], decision_chars=500, routine_chars=100)
    assert len(lines[0].text) < 200 < len(lines[1].text) < 600
    assert "chars omitted" in lines[0].text


def test_shorten_middle_keeps_both_ends() -> None:
    text = "HEAD" + "m" * 500 + "TAIL"
    cut = shorten_middle(text, 60)
    assert cut.startswith("HEAD") and cut.endswith("TAIL") and len(cut) <= 60
    assert shorten_middle("short", 60) == "short"


def test_decision_point_definition() -> None:
    assert not is_decision_point(step(0))
    assert is_decision_point(step(0), last=True)
    assert is_decision_point(step(0, error="e"))
