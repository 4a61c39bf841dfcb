"""What `lle.policies.batched`'s decoder passes around: requests, results and where its time went."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any


@dataclass
class DecodeStats:
    """Where the decoder's time went (seconds) and what it evaluated; read by the benchmark."""

    rounds: int = 0
    decode_s: float = 0.0
    prompt_s: float = 0.0
    """The part of `decode_s` spent on prompt rounds (the rest: generation rounds)."""
    generate_s: float = 0.0
    sample_s: float = 0.0
    prompt_tokens: int = 0
    """Prompt tokens evaluated (after prefix reuse)."""
    prompt_tokens_requested: int = 0
    shared_tokens: int = 0
    """Prompt tokens taken from another slot's KV cells instead of evaluated."""
    reused_tokens: int = 0
    """Prompt tokens found in the slot's own KV cells (the episode's previous step)."""
    generated_tokens: int = 0
    most_together: int = 0
    """The most sequences whose next tokens one round evaluated."""
    restarts: int = 0


@dataclass
class Request:
    """One step waiting for, or in, the decoder: its prompt, sampling settings, slot and what it generated."""

    tokens: list[int]
    grammar: str
    temperature: float
    seed: int
    max_tokens: int
    repeat_penalty: float
    affinity: int | None
    reuse: bool = True
    owner: int | None = None
    """The episode asking (`BatchedDecoder.new_owner`): a slot's cached tokens are reused only by their owner."""
    thread: int = 0
    """The calling thread: an episode thread keeps its slot from one episode to the next."""
    done: threading.Event = field(default_factory=threading.Event)
    error: Exception | None = None
    slot: int = -1
    pending: list[int] = field(default_factory=list)
    generated: list[int] = field(default_factory=list)
    finish_reason: str = ""
    sampler: Any = None
    """The whole chain (sampling at temperature > 0), or, greedy, the grammar sampler alone (`_greedy`)."""


@dataclass(frozen=True)
class Decoded:
    """One decode's result: the text, the token counts and which slot served it."""

    text: str
    prompt_tokens: int
    completion_tokens: int
    finish_reason: str
    slot: int


def common_prefix(a: list[int], b: list[int]) -> int:
    """Length of the common prefix of two token lists."""
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i
