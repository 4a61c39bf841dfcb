"""The verification budget: cheap checks always run, expensive ones are spent where they matter.

Expensive verifiers (a model judge, full replays, long test suites) run only for experiences
that are about to climb to a carrier where a mistake costs more (skills, the dataset) or that
carry a risk tag, and only while the round's budget lasts. What was skipped is recorded as
`unknown` evidence saying why, so nobody mistakes "not checked" for "checked and fine".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Purpose = Literal["record", "memory", "rules", "skills", "dataset"]
HIGH_VALUE: frozenset[str] = frozenset({"skills", "dataset"})


@dataclass
class VerificationBudget:
    """`units` expensive verifier runs per round (one unit each); the flywheel makes one per train batch."""

    units: int = 20
    spent: int = 0
    skipped: list[str] = field(default_factory=list)

    def allow(self, verifier_id: str, *, purpose: Purpose, risky: bool) -> str | None:
        """None to run the verifier now, else the reason it is skipped (and the skip is counted)."""
        if purpose not in HIGH_VALUE and not risky:
            reason = f"skipped: expensive and the experience is only for {purpose}"
        elif self.spent >= self.units:
            reason = f"skipped: the round's budget of {self.units} expensive checks is spent"
        else:
            self.spent += 1
            return None
        self.skipped.append(verifier_id)
        return reason
