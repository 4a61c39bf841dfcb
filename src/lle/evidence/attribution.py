"""Failure attribution: name where a failed episode went wrong, so the fix goes to the right part.

| kind | meaning | fix goes to |
|---|---|---|
| evidence | the anchors disagree, or none could decide | verifiers |
| grounding | actions were denied or errored | runtime, tools, permissions |
| context | a retrieved rule/skill/memory was shown and the step failed | that carrier item (its utility drops) |
| observation | the agent never looked at what it needed | context building, exploration |
| plan | everything ran, the effect was wrong | the policy |

Checked in that order; the first that applies is the attribution.
"""

from __future__ import annotations

from pydantic import JsonValue

from lle.core import Evidence, Outcome, SmallWorld, Step, Strength
from lle.evidence.verifiers import NON_GOAL_ANCHORS, last_reward

READ_TOOLS = {"read_file", "list_files", "look", "describe_table", "list_tables", "run_query", "run_tests",
              "inventory", "examine"}


def _failed_step(step: Step) -> bool:
    return not step.executed.allowed or step.effect.error is not None


def _relevant_targets(trajectory: list[Step]) -> list[str]:
    """What the world says the task hinged on (`info.relevant`), e.g. the buggy file or table."""
    result = last_reward(trajectory)
    info = result[1].get("info") if result else None
    relevant = info.get("relevant") if isinstance(info, dict) else None
    return [str(r) for r in relevant] if isinstance(relevant, list) else []


def attribute(small_world: SmallWorld, trajectory: list[Step], evidence: list[Evidence],
              outcome: Outcome) -> dict[str, JsonValue] | None:
    """Where a failure went wrong; None unless the outcome is fail."""
    if outcome is not Outcome.failed:
        return None
    goal = [e for e in evidence if e.strength is Strength.hard and e.anchor not in NON_GOAL_ANCHORS]
    decided = {e.outcome for e in goal if e.outcome is not Outcome.unknown}
    if decided == {Outcome.passed, Outcome.failed}:
        disagreeing = sorted({e.anchor for e in goal if e.outcome is not Outcome.unknown})
        return {"kind": "evidence", "reason": f"anchors on the goal disagree: {', '.join(disagreeing)}", "steps": []}
    if goal and not decided:
        return {"kind": "evidence", "reason": "no anchor on the goal could decide", "steps": []}
    failed_steps = [s.index for s in trajectory if _failed_step(s)]
    if failed_steps and len(failed_steps) * 2 >= len(trajectory):
        return {"kind": "grounding", "steps": failed_steps,  # type: ignore[dict-item]
                "reason": f"{len(failed_steps)} of {len(trajectory)} actions were denied or errored"}
    with_refs = [s for s in trajectory if s.context_refs and _failed_step(s)]
    if with_refs:
        items = sorted({r for s in with_refs for r in s.context_refs})
        return {"kind": "context", "steps": [s.index for s in with_refs], "items": items,  # type: ignore[dict-item]
                "reason": "steps that followed retrieved carrier items failed"}
    relevant = _relevant_targets(trajectory)
    looked_at = {str(v) for s in trajectory if s.executed.allowed for v in s.executed.args.values()}
    looked_at |= {s.executed.tool for s in trajectory if s.executed.allowed}
    missed = [r for r in relevant if not any(r in seen for seen in looked_at)]
    never_read = not any(s.executed.tool in READ_TOOLS for s in trajectory if s.executed.allowed)
    if not trajectory:
        return {"kind": "grounding", "steps": [], "reason": "the episode has no steps"}
    if missed or never_read:
        return {"kind": "observation", "steps": [], "missed": missed,  # type: ignore[dict-item]
                "reason": "the agent never looked at " + (", ".join(missed) if missed else "the task's state")}
    changed: list[JsonValue] = [s.index for s in trajectory if s.effect.changes]
    return {"kind": "plan", "steps": changed or [trajectory[-1].index],
            "reason": "the actions ran but their effect did not reach the goal"}
