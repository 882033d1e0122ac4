"""The state one engine works on, built before it so others can hold it too.

A `Conversation` is the message list and the tool list one model sees; a child
forked from it copies exactly the prefix of its last request. An `Inbox` takes
what arrives while a turn runs (the user's steers, runtime events such as a
child's completion) and hands it over in arrival order. A `UsageMeter` counts
tokens, and passes what a child spends up to every ancestor.
"""

from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from codewhale.providers.types import Usage


@dataclass
class Conversation:
    """`messages` only ever grows (recorders append from it), except that clear() empties it.

    After a compaction, requests carry a view of it instead: the system prompt, the
    summary standing for messages[1:recent_start], then messages[recent_start:] as they are.
    """

    messages: list[dict[str, Any]]
    # The tool schemas and the number of messages the last request carried: a forked
    # child starts from exactly those, byte for byte.
    tools: list[dict[str, Any]] = field(default_factory=list)
    last_request_size: int = 0
    summary: dict[str, Any] | None = None
    recent_start: int = 0
    # Counts clear()s, so work begun on the conversation before one can tell.
    epoch: int = 0
    # Sizes of the first messages as compact JSON in bytes, where known without encoding
    # them (a resumed session's, from the file it was read from; None: not known). The
    # first context estimate takes them instead of encoding every message.
    known_sizes: list[int | None] = field(default_factory=list)

    def request_messages(self) -> list[dict[str, Any]]:
        """What the model is sent: the same dicts every time, so the same bytes."""
        if self.summary is None:
            return self.messages
        return [self.messages[0], self.summary, *self.messages[self.recent_start :]]

    def request_prefix(self) -> list[dict[str, Any]]:
        return self.request_messages()[: self.last_request_size]

    def compact(self, summary: dict[str, Any], recent_start: int) -> None:
        """From now on `summary` stands for every message before `recent_start`."""
        self.summary, self.recent_start = summary, recent_start

    def rewind(self, keep: int) -> None:
        """Back to the first `keep` messages (at least the system prompt; /rewind)."""
        keep = max(keep, 1)
        del self.messages[keep:]
        del self.known_sizes[keep:]
        if self.summary is not None and keep < self.recent_start:
            # The summary stands for messages partly gone: the ones kept are sent as they are.
            self.summary, self.recent_start = None, 0
        self.epoch += 1

    def clear(self) -> None:
        """Back to the system prompt alone."""
        del self.messages[1:]
        del self.known_sizes[1:]
        self.summary, self.recent_start = None, 0
        self.epoch += 1


@dataclass(frozen=True)
class InboxItem:
    text: str
    # A steer is the user's own words (shown as such); otherwise a runtime event.
    steer: bool


class Inbox:
    """Messages for the next safe point of a turn, in the order they arrived."""

    def __init__(self) -> None:
        self._items: deque[InboxItem] = deque()
        self._arrived = asyncio.Event()
        self._next: list[asyncio.Future[None]] = []

    def steer(self, text: str) -> None:
        self._put(InboxItem(text, steer=True))

    def runtime_event(self, text: str) -> None:
        self._put(InboxItem(text, steer=False))

    def _put(self, item: InboxItem) -> None:
        self._items.append(item)
        self._arrived.set()
        waiters, self._next = self._next, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    def drain(self) -> list[InboxItem]:
        items = list(self._items)
        self._items.clear()
        self._arrived.clear()
        return items

    def drop_steers(self) -> None:
        """Forget steers not yet delivered (agent_eval's `interrupt`); runtime events stay."""
        kept = [item for item in self._items if not item.steer]
        self._items = deque(kept)
        if not kept:
            self._arrived.clear()

    def runtime_events(self) -> list[str]:
        """The runtime events not yet handed over, oldest first."""
        return [item.text for item in self._items if not item.steer]

    def withdraw(self, text: str) -> bool:
        """Take back a runtime event not yet handed over; False if it is no longer waiting."""
        for item in self._items:
            if not item.steer and item.text == text:
                self._items.remove(item)
                if not self._items:
                    self._arrived.clear()
                return True
        return False

    def __bool__(self) -> bool:
        return bool(self._items)

    @property
    def has_steer(self) -> bool:
        return any(item.steer for item in self._items)

    async def wait(self) -> None:
        """Return as soon as something is in the inbox."""
        await self._arrived.wait()

    async def next_arrival(self) -> None:
        """Return when one more item arrives, whatever is already waiting."""
        waiter = asyncio.get_running_loop().create_future()
        self._next.append(waiter)
        await waiter

    async def steered(self) -> None:
        """Return once a steer is waiting (at once if one already is)."""
        while not self.has_steer:
            await self.next_arrival()


@dataclass
class UsageMeter:
    """Tokens (and dollars, where prices are known) of one conversation and its delegates.

    Each response is priced when it arrives (prices can depend on the time of day), so
    the meter sums costs rather than pricing a total.
    """

    parent: UsageMeter | None = None
    own: Usage = field(default_factory=Usage)
    delegated: Usage = field(default_factory=Usage)
    cost: float = 0.0
    # Some response had no known price: the cost shown is then a lower bound.
    unpriced: bool = False

    @property
    def total(self) -> Usage:
        return self.own + self.delegated

    @property
    def cost_usd(self) -> float | None:
        return None if self.unpriced and not self.cost else self.cost

    def add_own(self, usage: Usage, cost: float | None = None) -> None:
        self.own += usage
        self._charge(cost)
        if self.parent is not None:
            self.parent.add_delegated(usage, cost)

    def add_delegated(self, usage: Usage, cost: float | None = None) -> None:
        """Spent on this conversation's behalf (children, grandchildren, RLM sub-calls)."""
        self.delegated += usage
        self._charge(cost)
        if self.parent is not None:
            self.parent.add_delegated(usage, cost)

    def _charge(self, cost: float | None) -> None:
        if cost is None:
            self.unpriced = True
        else:
            self.cost += cost

    def since(self, earlier: dict[str, Any]) -> UsageMeter:
        """What was spent after `earlier` (a to_json of this meter) was taken."""
        before = UsageMeter.from_json(earlier)
        return UsageMeter(
            own=self.own - before.own,
            delegated=self.delegated - before.delegated,
            cost=self.cost - before.cost,
            unpriced=self.unpriced,
        )

    def to_json(self) -> dict[str, Any]:
        """The totals so far, for the session file: a resumed session counts on from them."""
        return {
            "own": _usage_json(self.own),
            "delegated": _usage_json(self.delegated),
            "cost": self.cost,
            "unpriced": self.unpriced,
        }

    @classmethod
    def from_json(cls, data: Any) -> UsageMeter:
        """Totals written by to_json; anything unreadable starts from zero."""
        if not isinstance(data, dict):
            return cls()
        cost = data.get("cost")
        return cls(
            own=_usage_from_json(data.get("own")),
            delegated=_usage_from_json(data.get("delegated")),
            cost=float(cost) if isinstance(cost, int | float) else 0.0,
            unpriced=data.get("unpriced") is True,
        )


_USAGE_FIELDS = (
    "input_tokens",
    "output_tokens",
    "cache_hit_tokens",
    "cache_miss_tokens",
    "reasoning_tokens",
)


def _usage_json(usage: Usage) -> dict[str, int]:
    counts = {name: getattr(usage, name) for name in _USAGE_FIELDS}
    return counts | ({"estimated": True} if usage.estimated else {})


def _usage_from_json(data: Any) -> Usage:
    if not isinstance(data, dict):
        return Usage()
    return Usage(
        **{
            name: value
            for name in _USAGE_FIELDS
            if isinstance(value := data.get(name), int) and not isinstance(value, bool)
        },
        estimated=data.get("estimated") is True,
    )
