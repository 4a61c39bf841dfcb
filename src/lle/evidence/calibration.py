"""World-model calibration: how well the model's `expect` predicted each step's real effect.

The measure is deliberately simple and documented: the share of the content words of `expect`
(lower-cased, 3+ letters, not stop words) that appear in what really happened — the observation,
the error and the names of the changed targets. 1.0: everything predicted showed up; 0.0: none did.
It is weak evidence about the model's internal world model M, never about the task's outcome.
"""

from __future__ import annotations

import re

from lle.actions import copies_placeholder
from lle.core import Evidence, Outcome, SmallWorld, Step, Strength
from lle.evidence.verifiers import evidence, verifier

STOP_WORDS = frozenset(
    "the and that this with will then from into have has was are for not but you its".split()  # noqa: SIM905
)
WORD = re.compile(r"[a-z0-9_]{3,}")


def content_words(text: str) -> set[str]:
    return {w for w in WORD.findall(text.lower()) if w not in STOP_WORDS}


def calibration(step: Step) -> float | None:
    """Share of `expect`'s content words found in the real effect; None when nothing was predicted."""
    predicted = content_words(step.request.expect)
    if not predicted or copies_placeholder(step.request.expect):  # a copied slot predicts nothing
        return None
    happened = " ".join([step.effect.observation, step.effect.error or "",
                         *(c.target for c in step.effect.changes)]).lower()
    return round(sum(1 for w in predicted if w in happened) / len(predicted), 4)


@verifier("verifier/world-model-v1")
class WorldModelCalibration:
    """Per step: weak evidence (`anchor="world_model"`) with the calibration in its confidence."""

    THRESHOLD = 0.5

    def verify(self, small_world: SmallWorld, trajectory: list[Step]) -> list[Evidence]:
        out = []
        for step in trajectory:
            score = calibration(step)
            if score is None:
                continue
            out.append(evidence(self, small_world, anchor="world_model", step=step.index, strength=Strength.weak,
                                outcome=Outcome.passed if score >= self.THRESHOLD else Outcome.failed,
                                confidence=score, detail={"calibration": score}))
        return out
