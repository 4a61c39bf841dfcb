"""C: what the model sees. `ContextBuilder` builds it in sections within a token budget."""

from lle.context.builder import ContextBuilder, estimate_tokens

__all__ = ["ContextBuilder", "estimate_tokens"]
