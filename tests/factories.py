"""Factories shared by tests (importable: `tests/` is on pytest's pythonpath)."""

from __future__ import annotations

from lle.core import (
    ActionRequest,
    Change,
    Effect,
    Evidence,
    ExecutedAction,
    Experience,
    Outcome,
    PolicyInfo,
    Scope,
    ScopeLevel,
    SmallWorld,
    Split,
    Step,
    Strength,
)


def build_experience(n_steps: int = 3, *, project: str = "shop", split: Split = Split.train,
                     observation: str = "ok") -> Experience:
    """A well-formed experience with `n_steps` steps and one piece of evidence."""
    sw = SmallWorld(id=f"sql/{project}-v1:{split}:0", world=f"sql/{project}-v1", family="sql", project=project,
                    split=split, seed=0, goal="How many orders were placed in May?", tools=["run_query", "submit"])
    steps = [
        Step(
            index=i,
            request=ActionRequest(tool="run_query", args={"sql": f"SELECT {i}"}, thought="count them",
                                  expect="a number"),
            executed=ExecutedAction(tool="run_query", args={"sql": f"SELECT {i}"}, allowed=True, duration_ms=1.5),
            effect=Effect(observation=f"{observation} {i}",
                          changes=[Change(kind="state", target="rows", before=0, after=i)]),
        )
        for i in range(n_steps)
    ]
    exp = Experience(small_world=sw, policy=PolicyInfo(model="scripted"), steps=steps)
    evidence = Evidence(experience_id=exp.id, anchor="state", outcome=Outcome.passed, strength=Strength.hard,
                        scope=Scope(level=ScopeLevel.task, family="sql", project=project, task_id=sw.id))
    return exp.model_copy(update={"evidence": [evidence], "outcome": Outcome.passed}).sealed()
