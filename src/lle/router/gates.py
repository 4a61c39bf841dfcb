"""The gates of DESIGN §5, configurable in one place. Each returns a `GateResult` with its reasons.

| carrier | scope | admitted when |
|---|---|---|
| memory | task/project | outcome known; hygiene passed; failures attributed; not a dev/test item |
| rules | project | ≥ `rules_min_support` experiences with hard evidence in the project support it, none contradicts;
|       |         | text that looks like an injected instruction needs independent anchors on every supporter |
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from lle.core import Experience, GateResult, Outcome, VerificationLevel


@dataclass(frozen=True)
class GateConfig:
    memory_needs_outcome: bool = True
    memory_needs_attribution: bool = True
    rules_min_support: int = 2
    rules_min_level: VerificationLevel = VerificationLevel.hard_anchor
    untrusted_min_level: VerificationLevel = VerificationLevel.independent_anchors


DEFAULT = GateConfig()


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
    """`supporters`: distinct experiences (one project) whose evidence supports the rule."""
    projects = {(e.small_world.family, e.small_world.project) for e in supporters}
    needed = config.untrusted_min_level if untrusted else config.rules_min_level
    hard = [e for e in supporters if e.verification.rank >= needed.rank and e.outcome is not Outcome.unknown]
    reasons = []
    if len(projects) > 1:
        reasons.append(f"supporters come from {len(projects)} projects; a rule is scoped to one")
    if len(hard) < config.rules_min_support:
        why = " (it reads like an instruction from an untrusted source)" if untrusted else ""
        reasons.append(f"{len(hard)} of {config.rules_min_support} supporting experiences at {needed}{why}")
    if contradictions:
        reasons.append(f"contradicted by {', '.join(contradictions)}")
    if contamination_hit:
        reasons.append(f"near-duplicate of held-out item {contamination_hit}")
    if reasons:
        return GateResult(name="rules", passed=False, reasons=reasons)
    return GateResult(name="rules", passed=True, reasons=[f"{len(hard)} experiences at {needed} or better support it"])
