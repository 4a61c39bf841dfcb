"""`VerificationLevel.reproduced`: a lesson backed, at a hard anchor, in k distinct small worlds; the rules
and skills gates admit only reproduced lessons."""

from __future__ import annotations

from lle.core import Experience, Outcome, PolicyInfo, SmallWorld, Split, VerificationLevel
from lle.evidence.evidence import decide, lesson_level
from lle.governance.gates import GateConfig, rules_gate, skills_gate


def exp(task: int, project: str = "a", *, outcome: Outcome = Outcome.passed,
        level: VerificationLevel = VerificationLevel.hard_anchor) -> Experience:
    sw = SmallWorld(id=f"toy/keys-v1:{project}:train:{task}", world="toy/keys-v1", family="toy", project=project,
                    split=Split.train, seed=task, goal="open the vault")
    return Experience(small_world=sw, policy=PolicyInfo(model="scripted"), outcome=outcome, verification=level)


def test_a_lesson_is_reproduced_in_k_distinct_small_worlds() -> None:
    assert lesson_level([exp(0), exp(1)], k=2) is VerificationLevel.reproduced
    assert lesson_level([exp(0), exp(1), exp(2)], k=3) is VerificationLevel.reproduced
    # The same task solved twice is one small world: the strongest single level, not `reproduced`.
    assert lesson_level([exp(0), exp(0)], k=2) is VerificationLevel.hard_anchor
    assert lesson_level([exp(0), exp(1, level=VerificationLevel.independent_anchors)], k=3) is \
        VerificationLevel.independent_anchors
    # Only decided outcomes at the level asked for count.
    assert lesson_level([exp(0), exp(1, outcome=Outcome.unknown)], k=2) is VerificationLevel.hard_anchor
    assert lesson_level([exp(0), exp(1, level=VerificationLevel.model_judge)], k=2) is VerificationLevel.hard_anchor
    assert lesson_level([exp(0), exp(1, level=VerificationLevel.model_judge)], k=2,
                        min_level=VerificationLevel.model_judge) is VerificationLevel.reproduced
    assert lesson_level([], k=2) is VerificationLevel.none


def test_one_experience_never_decides_reproduced() -> None:
    assert decide([])[1] is VerificationLevel.none
    assert max(VerificationLevel, key=lambda v: v.rank) is VerificationLevel.reproduced


def test_the_skills_gate_needs_a_reproduced_trace_across_projects() -> None:
    passed = skills_gate([exp(0, "a"), exp(1, "a"), exp(2, "b")])
    assert passed.passed and passed.reasons[0].startswith("reproduced: 3 successes")
    twice = skills_gate([exp(0, "a"), exp(0, "a"), exp(2, "b")])  # three successes, two small worlds
    assert not twice.passed and any(r.startswith("not reproduced: ") for r in twice.reasons)
    one_project = skills_gate([exp(0, "a"), exp(1, "a"), exp(2, "a")])
    assert not one_project.passed and "1 of 2 projects" in one_project.reasons[0]
    # k is the config's: two small worlds suffice when skills_min_support is 2.
    assert skills_gate([exp(0, "a"), exp(1, "b")], config=GateConfig(skills_min_support=2)).passed


def test_the_rules_gate_needs_a_reproduced_lesson() -> None:
    def gate(supporters: list[Experience], **config: object) -> tuple[bool, list[str]]:
        result = rules_gate("use cents", supporters, [], untrusted=False, contamination_hit=None,
                            config=GateConfig(**config))  # type: ignore[arg-type]
        return result.passed, result.reasons

    ok, reasons = gate([exp(0), exp(1, outcome=Outcome.failed)])  # a failure's lesson backs it too
    assert ok and reasons[0].startswith("reproduced: 2 experiences in 2 small worlds")
    ok, reasons = gate([exp(0), exp(0)])
    assert not ok and reasons == ["not reproduced: 1 of 2 small worlds back it at hard_anchor"]
    assert not gate([exp(0), exp(1)], rules_min_support=3)[0]
    untrusted = rules_gate("ignore the tests", [exp(0), exp(1)], [], untrusted=True, contamination_hit=None)
    assert not untrusted.passed and "independent_anchors" in untrusted.reasons[0]
