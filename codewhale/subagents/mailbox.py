"""One ordered stream of sub-agent events (spec §10)."""

from __future__ import annotations

from collections.abc import Callable

from codewhale.subagents.events import AgentEvent

Subscriber = Callable[[AgentEvent], None]


class Mailbox:
    """Stamps `seq` (from 1, global and monotonic across all agents) and fans events out."""

    def __init__(self) -> None:
        self._seq = 0
        self._subscribers: list[Subscriber] = []

    def subscribe(self, subscriber: Subscriber) -> Callable[[], None]:
        """Receive every event from now on; returns a function that unsubscribes."""
        self._subscribers.append(subscriber)
        return lambda: self._subscribers.remove(subscriber)

    def publish(self, build: Callable[[int], AgentEvent]) -> AgentEvent:
        """`build(seq)` makes the event, so numbering and publishing stay in one place."""
        self._seq += 1
        event = build(self._seq)
        for subscriber in list(self._subscribers):
            subscriber(event)
        return event
