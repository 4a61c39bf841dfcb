"""`assess`: a recorded trajectory becomes an Experience whose evidence can be trusted, or is
honestly marked unknown.

Outcome: `fail` if any hard anchor fails or a reward hack is found; `pass` only if an anchor
that checks the goal itself (tests, query result, symbolic answer, game state, a person) passes
and no hard anchor fails; otherwise `unknown`. Rules and the compiler are necessary, never
sufficient; a judge or the agent's own word never decides. A verifier that crashes or runs out
of time gives `unknown` with its reason.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Sequence

from lle import registry
from lle.core import (
    Evidence,
    Experience,
    Outcome,
    PolicyInfo,
    SmallWorld,
    Step,
    Strength,
    VerificationLevel,
    Verifier,
)
from lle.errors import RegistryError
from lle.evidence import calibration, hacking, verifiers
from lle.evidence.attribution import attribute
from lle.evidence.budget import Purpose, VerificationBudget
from lle.evidence.credit import step_credit

# `verifier/cases-v1` runs the approved verifier cases of the small world's family (issue 8).
ALWAYS = (*verifiers.DEFAULT_VERIFIERS, "verifier/reward-hacking-v1", "verifier/world-model-v1", "verifier/cases-v1")
_ensure_registered = (calibration.WorldModelCalibration, hacking.RewardHacking)


def _unknown(verifier_obj: object, small_world: SmallWorld, reason: str, tag: str) -> Evidence:
    return verifiers.evidence(verifier_obj, small_world, anchor="verifier", outcome=Outcome.unknown,
                              strength=Strength.weak, risk_tags=[tag], detail={"reason": reason})


def run_verifiers(small_world: SmallWorld, trajectory: list[Step], checks: Sequence[Verifier], *,
                  budget: VerificationBudget | None = None, purpose: Purpose = "record",
                  timeout_s: float = 120.0) -> list[Evidence]:
    out: list[Evidence] = []
    risky = False
    for check in checks:
        if verifiers.cost_of(check) == "expensive" and budget is not None:
            skipped = budget.allow(verifiers.verifier_id(check), purpose=purpose, risky=risky)
            if skipped:
                out.append(_unknown(check, small_world, skipped, "verification_skipped"))
                continue
        pool = concurrent.futures.ThreadPoolExecutor(max_workers=1)
        try:
            found = pool.submit(check.verify, small_world, list(trajectory)).result(timeout=timeout_s)
        except concurrent.futures.TimeoutError:
            found = [_unknown(check, small_world, f"timed out after {timeout_s:g} s", "verifier_error")]
        except Exception as err:  # a broken verifier must not lose the experience, nor pass it
            found = [_unknown(check, small_world, f"crashed: {type(err).__name__}: {err}", "verifier_error")]
        finally:
            pool.shutdown(wait=False, cancel_futures=True)
        risky = risky or any(ev.risk_tags for ev in found)
        out.extend(found)
    return out


def decide(evidence: Sequence[Evidence]) -> tuple[Outcome, VerificationLevel]:
    """Outcome and verification level from evidence (see the module docstring)."""
    about_task = [e for e in evidence if e.anchor != "world_model"]
    hard = [e for e in about_task if e.strength is Strength.hard and e.outcome is not Outcome.unknown]
    if any(hacking.RISK_TAG in e.risk_tags for e in about_task) or any(e.outcome is Outcome.failed for e in hard):
        outcome = Outcome.failed
    elif any(e.outcome is Outcome.passed and e.anchor not in verifiers.NON_GOAL_ANCHORS for e in hard):
        outcome = Outcome.passed
    else:
        outcome = Outcome.unknown
    kinds = {e.anchor for e in hard if e.anchor != "rule"}
    if len(kinds) >= 2 and any(e.anchor not in verifiers.NON_GOAL_ANCHORS for e in hard):
        level = VerificationLevel.independent_anchors
    elif any(e.anchor not in verifiers.NON_GOAL_ANCHORS for e in hard):
        level = VerificationLevel.hard_anchor
    elif any(e.strength is Strength.soft and e.outcome is not Outcome.unknown for e in about_task):
        level = VerificationLevel.model_judge
    elif any(e.anchor == "self_report" and e.outcome is not Outcome.unknown for e in about_task):
        level = VerificationLevel.self_report
    else:
        level = VerificationLevel.none
    return outcome, level


def assess(small_world: SmallWorld, trajectory: list[Step], *, base: Experience | None = None,
           extra: Sequence[Verifier] = (), budget: VerificationBudget | None = None, purpose: Purpose = "record",
           timeout_s: float = 120.0) -> Experience:
    """Run the small world's verifiers (plus the always-on ones and `extra`) and build the Experience.
    A verifier in `extra` replaces the one the registry would build by the same id.

    `base` is the experience the harness recorded (its id, policy and versions are kept).
    """
    checks: list[Verifier] = []
    missing: list[Evidence] = []
    given = {verifiers.verifier_id(check) for check in extra}  # e.g. `CaseVerifier(store)`: it replaces the one by id
    for id_ in dict.fromkeys([*ALWAYS, *small_world.verifiers]):
        if id_ in given:
            continue
        try:
            checks.append(registry.make(id_))
        except RegistryError as err:  # a check that cannot be built has not passed: say so
            missing.append(_unknown(id_, small_world, f"verifier {id_} could not be built: {err}", "verifier_error"))
    checks.extend(extra)
    exp = base or Experience(small_world=small_world, policy=PolicyInfo(model="unknown"))
    found = missing + run_verifiers(small_world, trajectory, checks, budget=budget, purpose=purpose,
                                    timeout_s=timeout_s)
    found = [e.model_copy(update={"experience_id": exp.id}) for e in found]
    outcome, level = decide(found)
    risk_tags = sorted({t for e in found for t in e.risk_tags} | set(exp.risk_tags))
    return exp.model_copy(update={
        "steps": list(trajectory),
        "evidence": found,
        "outcome": outcome,
        "verification": level,
        "score": {Outcome.passed: 1.0, Outcome.failed: 0.0}.get(outcome),
        "credit": step_credit(trajectory, outcome, found),
        "attribution": attribute(small_world, trajectory, found, outcome),
        "risk_tags": risk_tags,
        "content_hash": "",
    }).sealed()


def assess_experience(experience: Experience, *, extra: Sequence[Verifier] = (),
                      budget: VerificationBudget | None = None, purpose: Purpose = "record",
                      timeout_s: float = 120.0) -> Experience:
    """`assess` for an experience the harness recorded."""
    return assess(experience.small_world, experience.steps, base=experience, extra=extra, budget=budget,
                  purpose=purpose, timeout_s=timeout_s)


def lesson_level(supporters: Sequence[Experience], k: int, *,
                 min_level: VerificationLevel = VerificationLevel.hard_anchor) -> VerificationLevel:
    """The level a lesson (a skill's trace, a rule's statement) reaches from the experiences that back it.

    `reproduced` once experiences with a decided outcome, verified at `min_level` or better, back it in
    at least `k` distinct small worlds (the same task solved twice is one small world, not two);
    otherwise the strongest level one of them reached. One experience alone never reaches `reproduced`,
    which is why `decide` stops at `independent_anchors`.
    """
    decided = [e for e in supporters if e.outcome is not Outcome.unknown]
    worlds = {e.small_world.id for e in decided if e.verification.rank >= min_level.rank}
    if len(worlds) >= k:
        return VerificationLevel.reproduced
    return max((e.verification for e in decided), key=lambda v: v.rank, default=VerificationLevel.none)
