"""The prompt a policy records on its `LLMCall`: what the model was given, so a step can be read later.

Two spellings, one per kind of backend:
- a policy that renders the chat itself (the embedded llama.cpp model, through the GGUF's own chat
  template) records the rendered text, byte for byte what was tokenized;
- a chat API renders on the server, out of sight: the policy records the messages it sent, as
  canonical JSON (`messages_text`), which `lle view` shows as the list of messages.

Both are deterministic functions of the context, so a resumed episode records the same prompts as
an unkilled one.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from lle.core import canonical_json


def messages_text(messages: Sequence[Mapping[str, Any]]) -> str:
    """The chat messages as canonical JSON: `[{"content": …, "role": …}, …]` in the order sent."""
    return canonical_json([dict(m) for m in messages])


def messages_of(prompt: str) -> list[dict[str, str]] | None:
    """The messages a `messages_text` prompt holds, or None when `prompt` is rendered text."""
    if not prompt.startswith("[{"):
        return None
    try:
        value = json.loads(prompt)
    except ValueError:
        return None
    if isinstance(value, list) and all(isinstance(m, dict) and {"role", "content"} <= m.keys() for m in value):
        return [{"role": str(m["role"]), "content": str(m["content"])} for m in value]
    return None
