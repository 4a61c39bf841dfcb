"""Math worlds over reasoning-gym: a safe calculator tool and math-verify as the symbolic anchor."""

from lle.worlds.base import AnchorResult
from lle.worlds.math.anchor import verify
from lle.worlds.math.calculator import CalculatorError, evaluate
from lle.worlds.math.world import ArithFamily, EquationsFamily, GsmFamily, MathFamily, MathWorld, reference_actions

__all__ = ["AnchorResult", "ArithFamily", "CalculatorError", "EquationsFamily", "GsmFamily", "MathFamily",
           "MathWorld", "evaluate", "reference_actions", "verify"]
