"""The append-only message bus: typed messages in the population's store (migration m008).

    post(message)            append it (never changed afterwards)
    inbox(agent, now=…)      what the agent still has to act on: addressed to it, not past its ttl at
                             `now`, not answered by it yet; highest priority first, then oldest first
    messages(…)              everything, for `lle population messages`

An agent is done with a message once it posted a message that replies to it, so acting on a message
twice needs no extra state: the answer is the record. Expiry is decided at read time against the
`now` the caller passes, so the same bus read at the same instant gives the same inbox.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import datetime

from lle.errors import InvalidInputError, UnknownIdError
from lle.population.types import Intent, Message
from lle.store import Store
from lle.store import messages as rows


class Bus:
    """Typed messages over one store."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def post(self, message: Message) -> Message:
        """Append `message`; a reply must name a message that is on the bus."""
        if message.reply_to is not None and message.reply_to not in {m.id for m in self.messages()}:
            raise InvalidInputError(f"message {message.id} replies to {message.reply_to}, which is not on the bus")
        expires = message.expires_at
        rows.append_message(self.store, rows.MessageRow(
            message.id, message.sender, message.intent.value, message.priority, message.created_at.isoformat(),
            None if expires is None else expires.isoformat(), message.model_dump_json()))
        return message

    def messages(self, *, sender: str | None = None, intent: Intent | None = None) -> list[Message]:
        """Every message in the order posted (optionally of one sender or intent)."""
        found = rows.list_messages(self.store, sender=sender, intent=None if intent is None else intent.value)
        return [Message.model_validate(json.loads(r.body)) for r in found]

    def get(self, message_id: str) -> Message:
        for message in self.messages():
            if message.id == message_id:
                return message
        raise UnknownIdError("message", message_id, "list messages with `lle population messages`")

    def replies(self, message_id: str, *, intents: Iterable[Intent] | None = None) -> list[Message]:
        wanted = None if intents is None else set(intents)
        return [m for m in self.messages() if m.reply_to == message_id and (wanted is None or m.intent in wanted)]

    def inbox(self, agent: str, *, now: datetime, intents: Iterable[Intent] | None = None) -> list[Message]:
        """What `agent` still has to act on at `now` (a message past its ttl is ignored)."""
        wanted = None if intents is None else set(intents)
        everything = self.messages()
        answered = {m.reply_to for m in everything if m.sender == agent and m.reply_to}
        found = [m for m in everything if m.for_agent(agent) and not m.expired(now) and m.id not in answered
                 and (wanted is None or m.intent in wanted)]
        return sorted(found, key=lambda m: (-m.priority, m.created_at))
