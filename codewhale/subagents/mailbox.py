"""One ordered stream of sub-agent lifecycle envelopes (spec §10)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

KINDS = frozenset(
    {
        "started",
        "progress",
        "tool_call_started",
        "tool_call_completed",
        "child_spawned",
        "completed",
        "failed",
        "interrupted",
        "cancelled",
        "token_usage",
        "queued",
    }
)

Subscriber = Callable[[dict[str, Any]], None]


class Mailbox:
    """`seq` starts at 1 and is global and monotonic across all agents."""

    def __init__(self) -> None:
        self._seq = 0
        self._subscribers: list[Subscriber] = []

    def subscribe(self, subscriber: Subscriber) -> Callable[[], None]:
        """Receive every envelope from now on; returns a function that unsubscribes."""
        self._subscribers.append(subscriber)
        return lambda: self._subscribers.remove(subscriber)

    def publish(self, kind: str, agent_id: str, **data: Any) -> dict[str, Any]:
        if kind not in KINDS:
            raise ValueError(f"unknown mailbox kind {kind!r}")
        self._seq += 1
        envelope = {
            "seq": self._seq,
            "kind": kind,
            "agent_id": agent_id,
            "ts_ms": int(time.time() * 1000),
            **data,
        }
        for subscriber in list(self._subscribers):
            subscriber(envelope)
        return envelope
