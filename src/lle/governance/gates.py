"""The gates of DESIGN §5, configurable in one place. Each returns a `GateResult` with its reasons.

| carrier | scope | admitted when |
|---|---|---|
| any | — | the small world's `writeback` lists the carrier (`writeback_gate`) |
| memory | task/project | outcome known; hygiene passed; failures attributed; not a dev/test item |
| rules | project | the lesson is `reproduced`: hard evidence backs it in ≥ `rules_min_support` small worlds of the
|       |         | project, none contradicts; text that looks like an injected instruction needs independent anchors |
| skills | family | the trace is `reproduced`: hard-verified successes in ≥ `skills_min_support` small worlds of
|        |        | ≥ `skills_min_projects` projects |

Reading follows the small world's `inherits` (`inherited`): an item is shown only when its scope lies
inside one of the scopes the small world inherits.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from lle.core import (
    CarrierKind,
    Evidence,
    Experience,
    GateResult,
    Outcome,
    Scope,
    ScopeLevel,
    SmallWorld,
    Strength,
    VerificationLevel,
)
from lle.evidence.evidence import lesson_level
from lle.governance import intervals


@dataclass(frozen=True)
class GateConfig:
    memory_needs_outcome: bool = True
    memory_needs_attribution: bool = True
    # k of `VerificationLevel.reproduced` for a rule: distinct small worlds of the project backing it.
    rules_min_support: int = 2
    rules_min_level: VerificationLevel = VerificationLevel.hard_anchor
    untrusted_min_level: VerificationLevel = VerificationLevel.independent_anchors
    # k of `VerificationLevel.reproduced` for a skill (distinct small worlds), and the mining support.
    skills_min_support: int = 3
    skills_min_projects: int = 2
    skills_min_level: VerificationLevel = VerificationLevel.hard_anchor
    skills_min_pairs: int = 4
    skills_max_regression: float = 0.0
    skills_retire_drop: float = 0.2
    skills_monitor_min_uses: int = 3
    # Verifier cases: a pass at this level that a later hard fail from one of these anchors contradicts.
    verifier_case_min_level: VerificationLevel = VerificationLevel.hard_anchor
    verifier_case_anchors: frozenset[str] = frozenset({"human", "hidden_test", "replay"})
    dataset_min_level: VerificationLevel = VerificationLevel.hard_anchor
    dataset_dedupe_threshold: float = 0.9


DEFAULT = GateConfig()

_SCOPE_RANK = {ScopeLevel.episode: 0, ScopeLevel.task: 1, ScopeLevel.project: 2, ScopeLevel.family: 3,
               ScopeLevel.global_: 4}


def writeback_gate(exp: Experience, carrier: CarrierKind) -> GateResult | None:
    """The small world's contract: its experience reaches only the carriers its `writeback` lists."""
    allowed = exp.small_world.writeback
    if carrier in allowed:
        return None
    return GateResult(name="writeback", passed=False, reasons=[
        f"writeback forbids {carrier.value}: {exp.small_world.id} writes back to "
        f"{', '.join(c.value for c in allowed) or 'nothing'}"])


def writeback_reasons(exp: Experience, carrier: CarrierKind) -> list[str]:
    """`writeback_gate`'s reasons, for the gates also reached outside the router (`lle export`, verifier-case scans)."""
    forbidden = writeback_gate(exp, carrier)
    return list(forbidden.reasons) if forbidden else []


def covers(outer: Scope, inner: Scope) -> bool:
    """Whether `inner` lies inside `outer`: global covers all, a family its projects, a project its tasks."""
    rank = _SCOPE_RANK[outer.level]
    if _SCOPE_RANK[inner.level] > rank:
        return False
    fields = (("family", 3), ("project", 2), ("task_id", 1))
    return all(getattr(outer, name) == getattr(inner, name) for name, finest in fields if rank <= finest)


def inherited(small_world: SmallWorld, scope: Scope) -> bool:
    """Whether the small world may read an item scoped at `scope` (one of its `inherits` covers it)."""
    return any(covers(outer, scope) for outer in small_world.inherits)


def held_out(exp: Experience) -> GateResult | None:
    """Dev and test experiences never feed any carrier."""
    if exp.small_world.split.value != "train":
        return GateResult(name="held_out", passed=False,
                          reasons=[f"{exp.small_world.id} is a {exp.small_world.split} task: evaluation only"])
    return None


def memory_gate(exp: Experience, *, contamination_hit: str | None, secrets_left: int,
                config: GateConfig = DEFAULT) -> GateResult:
    reasons: list[str] = []
    if config.memory_needs_outcome and exp.outcome is Outcome.unknown:
        reasons.append("outcome unknown: nothing verified to remember")
    if config.memory_needs_attribution and exp.outcome is Outcome.failed and not exp.attribution:
        reasons.append("a failure without attribution teaches nothing")
    if contamination_hit:
        reasons.append(f"near-duplicate of held-out item {contamination_hit}")
    if secrets_left:
        reasons.append(f"hygiene left {secrets_left} secrets")
    if "reward_hacking" in exp.risk_tags and exp.outcome is not Outcome.failed:
        reasons.append("reward hacking suspected")
    if reasons:
        return GateResult(name="memory", passed=False, reasons=reasons)
    return GateResult(name="memory", passed=True, reasons=[f"outcome {exp.outcome} at {exp.verification}; hygiene ok"])


def rules_gate(text: str, supporters: Sequence[Experience], contradictions: Sequence[str], *, untrusted: bool,
               contamination_hit: str | None, config: GateConfig = DEFAULT) -> GateResult:
    """`supporters`: distinct experiences (one project) whose evidence supports the rule; the rule's lesson
    must be `reproduced` in `rules_min_support` small worlds at `rules_min_level` (or `untrusted_min_level`)."""
    projects = {(e.small_world.family, e.small_world.project) for e in supporters}
    needed = config.untrusted_min_level if untrusted else config.rules_min_level
    hard = [e for e in supporters if e.verification.rank >= needed.rank and e.outcome is not Outcome.unknown]
    worlds = {e.small_world.id for e in hard}
    reasons = []
    if len(projects) > 1:
        reasons.append(f"supporters come from {len(projects)} projects; a rule is scoped to one")
    if lesson_level(hard, config.rules_min_support, min_level=needed) is not VerificationLevel.reproduced:
        why = " (it reads like an instruction from an untrusted source)" if untrusted else ""
        reasons.append(f"not reproduced: {len(worlds)} of {config.rules_min_support} small worlds back it at "
                       f"{needed}{why}")
    if contradictions:
        reasons.append(f"contradicted by {', '.join(contradictions)}")
    if contamination_hit:
        reasons.append(f"near-duplicate of held-out item {contamination_hit}")
    if reasons:
        return GateResult(name="rules", passed=False, reasons=reasons)
    return GateResult(name="rules", passed=True, reasons=[
        f"reproduced: {len(hard)} experiences in {len(worlds)} small worlds at {needed} or better support it"])


# --- skills (lle.carriers.skills) ------------------------------------------------------------------


def skills_gate(supporters: Sequence[Experience], *, config: GateConfig = DEFAULT) -> GateResult:
    """A skill candidate: its trace is `reproduced` (hard-verified successes in >= `skills_min_support`
    distinct small worlds; the same task solved twice is one small world, not two) across
    >= `skills_min_projects` projects."""
    good = [e for e in supporters if e.outcome is Outcome.passed and e.small_world.split.value == "train"
            and e.verification.rank >= config.skills_min_level.rank]
    worlds = {e.small_world.id for e in good}
    projects = {(e.small_world.family, e.small_world.project) for e in good}
    reasons = []
    level = lesson_level(good, config.skills_min_support, min_level=config.skills_min_level)
    if level is not VerificationLevel.reproduced:
        reasons.append(f"not reproduced: successes at {config.skills_min_level} in {len(worlds)} of "
                       f"{config.skills_min_support} small worlds needed")
    if len(projects) < config.skills_min_projects:
        reasons.append(f"{len(projects)} of {config.skills_min_projects} projects: a pattern of one project "
                       "is a project rule, not a skill")
    if reasons:
        return GateResult(name="skills", passed=False, reasons=reasons)
    return GateResult(name="skills", passed=True, reasons=[
        f"reproduced: {len(good)} successes at {config.skills_min_level} or better in {len(worlds)} small worlds "
        f"of {len(projects)} projects"])


def skills_replay_gate(pairs: int, used: int, with_skill: int, without: int, *,
                       config: GateConfig = DEFAULT, name: str = "skills_replay",
                       arms: tuple[str, str] = ("with the skill", "without")) -> GateResult:
    """Validation A/B over `pairs` small worlds: successes with the skill offered vs without; `used`
    counts the pairs whose skill arm really called it. Passes on a non-negative effect (within
    `skills_max_regression`) measured on at least `skills_min_pairs` pairs that used it. A context recipe's
    replay is the same gate under its own `name` and `arms` (what its two arms ran under)."""
    effect = (with_skill - without) / pairs if pairs else 0.0
    summary = f"{with_skill}/{pairs} {arms[0]} vs {without}/{pairs} {arms[1]} (effect {effect:+.2f}), used in {used}"
    reasons = []
    if used < config.skills_min_pairs:
        reasons.append(f"{summary}: {config.skills_min_pairs} paired episodes that use it are needed")
    if effect < -config.skills_max_regression:
        reasons.append(f"{summary}: a regression")
    if reasons:
        return GateResult(name=name, passed=False, reasons=reasons)
    return GateResult(name=name, passed=True, reasons=[summary])


def skills_monitor_gate(uses: int, successes: int, baseline: float, *, config: GateConfig = DEFAULT) -> GateResult:
    """An active skill stays while its success rate in use has not dropped more than `skills_retire_drop`
    below its validation baseline (judged after `skills_monitor_min_uses` uses)."""
    rate = successes / uses if uses else 0.0
    summary = f"success {successes}/{uses} = {rate:.2f} in use vs {baseline:.2f} in validation"
    if uses >= config.skills_monitor_min_uses and baseline - rate > config.skills_retire_drop:
        return GateResult(name="skills_monitor", passed=False, reasons=[
            f"{summary}: dropped {baseline - rate:.2f} > {config.skills_retire_drop:.2f}"])
    return GateResult(name="skills_monitor", passed=True, reasons=[summary])


def skills_usefulness_gate(with_n: int, with_passed: int, without_n: int, without_passed: int, *,
                           config: GateConfig = DEFAULT) -> GateResult:
    """An active skill stays while its measured use is not shown to be nil or harmful: train episodes offered the
    library's skills (`with`) against those that were withheld them (`without`), unpaired. It fails when both arms
    have at least `skills_min_pairs` episodes and the 95 % interval of the difference in success (Newcombe's, from
    two Wilson intervals) lies at or below 0; its reason carries the figures."""
    figures = usefulness_figures(with_n, with_passed, without_n, without_passed)
    if min(with_n, without_n) < config.skills_min_pairs:
        return GateResult(name="skills_usefulness", passed=True, reasons=[
            f"{figures}: {config.skills_min_pairs} episodes in each arm are needed to judge it"])
    _, high = intervals.newcombe_unpaired(with_passed, with_n, without_passed, without_n)
    if high <= 0:
        return GateResult(name="skills_usefulness", passed=False, reasons=[
            f"{figures}: no use shown, the interval lies at or below 0"])
    return GateResult(name="skills_usefulness", passed=True, reasons=[figures])


def usefulness_figures(with_n: int, with_passed: int, without_n: int, without_passed: int) -> str:
    """Both arms, the difference in success and its 95 % interval, in points: "with 3/12, without 7/10:
    −28.3 points (−61.0 to +4.4)"."""
    low, high = intervals.newcombe_unpaired(with_passed, with_n, without_passed, without_n)
    diff = (with_passed / with_n if with_n else 0.0) - (without_passed / without_n if without_n else 0.0)
    return (f"with {with_passed}/{with_n}, without {without_passed}/{without_n}: "
            f"{intervals.signed_number(100 * diff)} points ({intervals.interval(100 * low, 100 * high)})")


# --- verifier cases and the dataset (lle.carriers.verifier_cases, lle.carriers.dataset) ---------------


def verifier_case_gate(exp: Experience, contradicting: Sequence[Evidence], *,
                       config: GateConfig = DEFAULT) -> GateResult:
    """A verifier missed a failure: `exp` passed at `verifier_case_min_level` or better, and later hard
    evidence from a stronger anchor (`verifier_case_anchors`: a person, hidden tests, a replay) says
    fail. Passing this gate makes a candidate case; a person still approves it."""
    stronger = [e for e in contradicting if e.outcome is Outcome.failed and e.strength is Strength.hard
                and e.anchor in config.verifier_case_anchors]
    reasons = [] if held_out(exp) else writeback_reasons(exp, CarrierKind.verifier_cases)  # held out says it all
    if held_out(exp):
        reasons.append(f"{exp.small_world.id} is a {exp.small_world.split} task: evaluation only")
    if exp.outcome is not Outcome.passed or exp.verification.rank < config.verifier_case_min_level.rank:
        reasons.append(f"recorded {exp.outcome} at {exp.verification}: no verifier passed it at "
                       f"{config.verifier_case_min_level}, so none missed anything")
    if not stronger:
        anchors = sorted({e.anchor for e in contradicting})
        reasons.append(f"no later hard fail from {sorted(config.verifier_case_anchors)} (later anchors: {anchors})")
    if reasons:
        return GateResult(name="verifier_cases", passed=False, reasons=reasons)
    return GateResult(name="verifier_cases", passed=True, reasons=[
        f"passed at {exp.verification}, then {', '.join(f'{e.anchor} {e.id}' for e in stronger)} said fail"])


def dataset_gate(exp: Experience, *, outcome: Outcome, level: VerificationLevel, secrets_left: int,
                 duplicate_of: str | None, contamination_hit: str | None, unquoted_instructions: int = 0,
                 scope_claims: Sequence[str] = (), config: GateConfig = DEFAULT) -> GateResult:
    """Training data: hard-verified with a decided outcome (from all evidence, later verdicts too),
    scrubbed with no secret left, not a duplicate, no dev/test item nor a copy of one, and no flagged
    untrusted instruction outside a quote (in an observation it is quoted data; anywhere else a model
    trained on the row would learn to say it), and no task text that speaks beyond its own task (`scope_claims`:
    a one-off preference, or an indication aimed at later tasks, the MINJA way: a row would teach either as
    part of every task like it)."""
    reasons = [] if held_out(exp) else writeback_reasons(exp, CarrierKind.dataset)  # held out says it all
    if held_out(exp):
        reasons.append(f"{exp.small_world.id} is a {exp.small_world.split} task: evaluation only")
    if outcome is Outcome.unknown:
        reasons.append("outcome unknown: nothing verified to train on")
    if level.rank < config.dataset_min_level.rank:
        reasons.append(f"verified at {level}, below {config.dataset_min_level}")
    if "reward_hacking" in exp.risk_tags:
        reasons.append("reward hacking suspected")
    if secrets_left:
        reasons.append(f"hygiene left {secrets_left} secrets in the rows")
    if unquoted_instructions:
        reasons.append(f"{unquoted_instructions} flagged untrusted instructions outside quotes in the rows")
    if scope_claims:
        reasons.append(f"the task text speaks beyond its own task ({'; '.join(scope_claims)})")
    if duplicate_of:
        reasons.append(f"duplicate of {duplicate_of}")
    if contamination_hit:
        reasons.append(f"copies held-out item {contamination_hit}")
    if reasons:
        return GateResult(name="dataset", passed=False, reasons=reasons)
    return GateResult(name="dataset", passed=True,
                      reasons=[f"{outcome} at {level}; scrubbed, unique, no held-out item"])
