"""What a skill whose slots the runtime fills does for a small model, on train math tasks; prints JSON.

    .venv/bin/python benchmarks/skill_binding.py [--model smollm2-135m] [--tasks 12] [--steps 4] [--workers 2]

The skill `calculate -> submit` is mined by the project's own miner from scripted, verified solutions of
train tasks (arith-v1 and equations-v1 at level 0: two projects, as the skills gate asks). Three arms
then run the model, greedy, on other train tasks of arith-v1 at level 0 (train split only: a tuning
measurement, never a verdict), with the levers on as in the flywheel:
`none` (no skill), `asked` (the same skill with every slot asked from the model, as before slot
binding) and `bound` (the mined skill: the expression read from the goal, the answer from the result).
Reported per arm: tasks solved, episodes that called the skill, steps, and seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from lle.carriers.skills import SkillLibrary
from lle.config import Levers, RunConfig
from lle.core import ActionRequest, Experience, SmallWorld, Split
from lle.evidence import assess_experience
from lle.flywheel.loop import model_path
from lle.flywheel.strategies import SkillsOffer, SpecPolicyFactory, StrategyBuilderFactory
from lle.policies.scripted import ScriptedPolicy
from lle.runtime.harness import run_episode
from lle.runtime.parallel import run_many
from lle.store import Store
from lle.worlds.math import ArithFamily, EquationsFamily, reference_actions

ARITH, EQUATIONS = ArithFamily(), EquationsFamily()
LEVERS = Levers(stuck="mask", submit_discipline=True, working_memory=True, admissible_masks=True, skills_first=True)


def solving_script(sw: SmallWorld) -> list[ActionRequest]:
    """calculate, then submit its result (an equation's solver writes its own expression: the answer times one)."""
    plan = reference_actions(sw)
    answer = str(plan[-1].args["answer"])
    expression = plan[0].args["expression"] if len(plan) == 2 else f"{answer} * 1"
    return [ActionRequest(tool="calculate", args={"expression": expression}),
            ActionRequest(tool="submit", args={"answer": answer})]


def mine_skill(folder: Path) -> tuple[str, str]:
    """(store with the bound skill, its id); a second store holds the same macro with every slot asked."""
    bound_db, asked_db = folder / "bound.db", folder / "asked.db"
    with Store(bound_db) as store:
        library = SkillLibrary(store)
        support = [ARITH.small_world(Split.train, s, level=0) for s in range(4)]
        support += [EQUATIONS.small_world(Split.train, s, level=0) for s in range(3)]
        for sw in support:
            library.observe(run_episode(sw, ScriptedPolicy(solving_script(sw)), store=store, assess=assess_experience))
        skill = next(s for s in library.skills() if [c.tool for c in s.descriptor.calls] == ["calculate", "submit"])
        unbound = skill.descriptor.model_copy(update={
            "slots": [s.model_copy(update={"bind": None}) for s in skill.descriptor.slots]}).finished()
    with Store(asked_db) as store:
        asked = SkillLibrary(store).import_descriptor(unbound.model_dump(mode="json"), actor="benchmark")
    return f"{bound_db}|{skill.item_id}", f"{asked_db}|{asked.item_id}"


def called(exp: Experience) -> bool:
    return any(fb.kind == "skill" for step in exp.steps for fb in step.feedback)


def solved(exp: Experience) -> bool:
    return any(fb.kind == "reward" and isinstance(fb.content, dict) and isinstance(fb.content.get("info"), dict)
               and fb.content["info"].get("success") is True for step in exp.steps for fb in step.feedback)


def measure(model: str, worlds: list[SmallWorld], offer: str | None, workers: int) -> dict[str, Any]:
    skills = None
    if offer is not None:
        db, item = offer.split("|")
        skills = SkillsOffer(db, only=(item,))
    started = time.perf_counter()
    exps = run_many(worlds, SpecPolicyFactory(model, threads=max(1, (os.cpu_count() or 2) // workers)),
                    workers=workers, skills_factory=skills, levers=LEVERS, record_timings=False,
                    context_builder_factory=StrategyBuilderFactory("none", "", model_path(RunConfig(model=model))))
    return {"solved": sum(solved(e) for e in exps), "episodes": len(exps), "called_skill": sum(called(e) for e in exps),
            "steps": sum(len(e.steps) for e in exps), "wall_s": round(time.perf_counter() - started, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--tasks", type=int, default=12)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        bound, asked = mine_skill(Path(tmp))
        worlds = [ARITH.small_world(Split.train, 100 + i, level=0) for i in range(args.tasks)]
        worlds = [w.model_copy(update={"limits": w.limits.model_copy(update={"max_steps": args.steps})})
                  for w in worlds]
        arms = {name: measure(args.model, worlds, offer, args.workers)
                for name, offer in (("none", None), ("asked", asked), ("bound", bound))}
    print(json.dumps({"benchmark": "skill_binding", "model": args.model, "tasks": args.tasks, "steps": args.steps,
                      "machine": {"cpus": os.cpu_count(), "python": sys.version.split()[0],
                                  "platform": platform.platform()},
                      "arms": arms}, indent=2))


if __name__ == "__main__":
    main()
