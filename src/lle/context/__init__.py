"""C: what the model sees. `BudgetedContextBuilder` builds it in sections within a token budget."""

from lle.context.builder import BudgetedContextBuilder, estimate_tokens

__all__ = ["BudgetedContextBuilder", "estimate_tokens"]
