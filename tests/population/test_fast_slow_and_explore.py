"""The fast/slow policy on the real harness and math world; exploration counted across explorers."""

from __future__ import annotations

import json
import re
from pathlib import Path

from lle.core import ActionRequest, Context, LLMCall, Outcome, PolicyInfo, Split
from lle.evidence import assess_experience
from lle.population.explore import explore
from lle.population.fastslow import FAST_SLOW, FastSlowPolicy, HistoryTap, calls_of
from lle.population.population import Population
from lle.population.types import Intent, PopulationConfig
from lle.runtime.harness import run_episode
from lle.store import Store
from lle.worlds.base import open_family
from lle.worlds.math.calculator import evaluate, format_number

ARITH = open_family("math/arith-v1")


def expression(context: Context) -> str:
    found = re.search(r"Calculate (.+?)\.", context.messages[1].content)
    assert found, context.messages[1].content
    return found.group(1)


class Recorded:
    """A deterministic policy that reports a model call, so the step shows which call was kept."""

    def __init__(self, model: str, decide: object) -> None:
        self.model, self.decide, self.calls = model, decide, 0
        self.info = PolicyInfo(model=model)

    def act(self, context: Context) -> tuple[ActionRequest, LLMCall | None]:
        self.calls += 1
        request = self.decide(context)  # type: ignore[operator]
        return request, LLMCall(model=self.model, prompt_tokens=10, completion_tokens=5, latency_ms=1.0)


def right(context: Context) -> ActionRequest:
    return ActionRequest(tool="submit", args={"answer": format_number(evaluate(expression(context)))})


def test_the_slow_model_acts_when_stuck_and_decides_the_submit(store: Store) -> None:
    sw = ARITH.small_world(Split.train, 0, level=0)
    # The fast model loops on one calculation; the stuck detector fires on the repeat and the slow one answers.
    fast = Recorded("fast", lambda c: ActionRequest(tool="calculate", args={"expression": expression(c)}))
    slow = Recorded("slow", right)
    policy = FastSlowPolicy(fast, slow)
    exp = run_episode(sw, policy, HistoryTap(_plain(), policy), store=store, assess=assess_experience)
    assert exp.outcome is Outcome.passed
    assert [s.request.tool for s in exp.steps] == ["calculate", "calculate", "submit"]
    assert [s.llm.model if s.llm else None for s in exp.steps] == ["fast", "fast", "slow"]
    notes = [next(f.content for f in s.feedback if f.kind == FAST_SLOW) for s in exp.steps]
    assert [(n["used"], n["why"]) for n in notes] == [("fast", None), ("fast", None), ("slow", "stuck:repeat")]  # type: ignore[index,call-overload]
    assert (fast.calls, slow.calls) == (2, 1) and round(policy.slow_share, 3) == 0.333
    assert calls_of(store.get_experience(exp.id).steps) == (2, 1)  # as stored

    # A fast model that submits a wrong answer: the slow one is consulted before the submit and overrides it.
    wrong = Recorded("fast", lambda c: ActionRequest(tool="submit", args={"answer": "-1"}))
    policy = FastSlowPolicy(wrong, Recorded("slow", right))
    exp = run_episode(sw, policy, HistoryTap(_plain(), policy), store=store, assess=assess_experience)
    assert exp.outcome is Outcome.passed and len(exp.steps) == 1
    step = exp.steps[0]
    note = next(f.content for f in step.feedback if f.kind == FAST_SLOW)
    assert step.llm is not None and step.llm.model == "slow"  # the call whose action was taken
    assert isinstance(note, dict) and note["why"] == "submit" and note["fast"]["model"] == "fast"  # type: ignore[index,call-overload]
    assert note["fast_proposed"] == {"tool": "submit", "args": {"answer": "-1"}}
    assert calls_of(exp.steps) == (1, 1) and policy.slow_share == 0.5


def _plain():  # type: ignore[no-untyped-def]
    from lle.context.plain import PlainContextBuilder
    return PlainContextBuilder()


def test_a_task_solved_by_any_explorer_counts_for_the_population(tmp_path: Path) -> None:
    tasks = ARITH.small_worlds(Split.train, 12, level=0)
    # Compared as numbers: the world's anchor takes 4 for 4.0.
    answers = [float(evaluate(t.goal.split("Calculate ", 1)[1].split(".", 1)[0])) for t in tasks]
    first, second = answers[0], next(a for a in answers if a != answers[0])
    agents = []
    for name, answer in (("fours", first), ("sixes", second), ("again", first)):
        script = tmp_path / f"{name}.json"
        script.write_text(json.dumps([{"tool": "submit", "args": {"answer": format_number(answer)}}]))
        agents.append({"name": name, "model": f"scripted:{script}"})
    config = PopulationConfig.model_validate({"name": "scripted", "world": "math/arith-v1", "level": 0,
                                              "agents": agents})
    with Population(config, tmp_path / "pop") as pop:
        report = explore(pop, tasks)
        want = {t.id for t, a in zip(tasks, answers, strict=True) if a in (first, second)}
        assert report.solved() == want and report.solved("fours") == report.solved("again")
        summary = report.summary()
        assert summary["pass_at_population"] == len(want) > summary["best_single"]["solved"]
        assert summary["best_single"]["solved"] == max(answers.count(first), answers.count(second))
        # fours and again solved the same tasks (distance 0); each differs wholly from sixes (distance 1).
        assert summary["diversity"]["solved_jaccard"] == round(2 / 3, 3)
        assert 1 / 3 < summary["diversity"]["distinct_sequences"] < 1
        assert len(pop.bus.messages(intent=Intent.solved)) == sum(a.passed for a in report.attempts)
        # Every episode is in its explorer's own store and nowhere else.
        assert {pop.store_of(n).count("experiences") for n in ("fours", "sixes", "again")} == {12}
        # A budget of model calls is a budget: scripted policies make none, so it never runs out.
        assert report.calls() == 0
