"""F and V: from feedback to anchored evidence (see README.md in this folder)."""

from lle.evidence.budget import VerificationBudget
from lle.evidence.evidence import assess, assess_experience, decide
from lle.evidence.verifiers import verifier

__all__ = ["VerificationBudget", "assess", "assess_experience", "decide", "verifier"]
