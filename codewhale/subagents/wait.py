"""agent_wait: block until the first (or every) one of your children has ended.

Which children (`agent_ids`, by default every unfinished child of the caller), how
long, and what ends the wait early: a steer in the caller's inbox, i.e. the user's
message, or for a child caller a message from its opener or its agent screen.
The manager holds the caller in `waiting_for_children` meanwhile (never a stall).
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from codewhale.engine.conversation import Inbox
from codewhale.subagents.child import Child, Opener
from codewhale.subagents.roster import Roster
from codewhale.subagents.spawn import SpawnError

DEFAULT_TIMEOUT_MS = 600_000
MIN_TIMEOUT_MS = 1_000
MAX_TIMEOUT_MS = 3_600_000
NOTHING_TO_WAIT_FOR = "Nothing to wait for: none of your sub-agents is still running."
# The completion event's machine-readable part (spec §10), which names the child.
_DONE = re.compile(r"<codewhale:subagent\.done>(.*?)</codewhale:subagent\.done>", re.DOTALL)


class WaitMode(StrEnum):
    ANY = "any"
    ALL = "all"


@dataclass(frozen=True)
class WaitRequest:
    # None: every unfinished child of the caller.
    references: tuple[str, ...] | None
    mode: WaitMode
    timeout_secs: float


@dataclass(frozen=True)
class WaitOutcome:
    timed_out: bool = False
    interrupted_by_user: bool = False


def parse_wait(arguments: dict[str, Any]) -> WaitRequest:
    """Validated agent_wait arguments; a SpawnError carries what the model should fix."""
    raw_ids = arguments.get("agent_ids")
    if isinstance(raw_ids, str):
        raw_ids = [raw_ids]  # one id given as a plain string
    if raw_ids is not None and not (
        isinstance(raw_ids, list) and all(isinstance(i, str) and i.strip() for i in raw_ids)
    ):
        raise SpawnError("agent_ids must be a list of agent ids or names")
    # An empty list means what leaving it out means: every running child of yours.
    references = tuple(dict.fromkeys(i.strip() for i in raw_ids)) if raw_ids else None
    raw_mode = arguments.get("mode") or WaitMode.ALL.value
    try:
        mode = WaitMode(str(raw_mode).strip().lower())
    except ValueError:
        raise SpawnError(f'mode must be "any" or "all", not {raw_mode!r}') from None
    timeout_ms = arguments.get("timeout_ms", DEFAULT_TIMEOUT_MS)
    if not isinstance(timeout_ms, int | float) or isinstance(timeout_ms, bool):
        timeout_ms = DEFAULT_TIMEOUT_MS
    timeout_ms = min(max(timeout_ms, MIN_TIMEOUT_MS), MAX_TIMEOUT_MS)
    return WaitRequest(references, mode, timeout_ms / 1000)


def waited_children(roster: Roster, request: WaitRequest, opener: Opener) -> list[Child]:
    """The children to wait on: those named (each must be the caller's own), or all running."""
    if request.references is None:
        return [c for c in roster if _owned(c, opener) and not c.record.terminal]
    children: list[Child] = []
    for reference in request.references:
        child = roster.find(reference, opener)
        if not _owned(child, opener):
            raise SpawnError(
                f"Agent session {reference} ({child.agent_id}) was not opened by you; "
                "agent_wait waits only on your own sub-agents"
            )
        if child not in children:  # a name and an id of the same child
            children.append(child)
    return children


def _owned(child: Child, opener: Opener) -> bool:
    # Whoever receives its completion owns it: its opener, or whoever continued it.
    return child.opener.agent_id == opener.agent_id


def settled(child: Child) -> bool:
    """Ended, or with nothing running here that could still end it (an earlier run's record)."""
    return child.record.terminal or not child.live


def satisfied(children: Iterable[Child], mode: WaitMode) -> bool:
    ended = [settled(child) for child in children]
    return any(ended) if mode is WaitMode.ANY else all(ended)


async def wait_for(
    children: list[Child], mode: WaitMode, timeout_secs: float, inbox: Inbox
) -> WaitOutcome:
    """Until `mode` is satisfied, the time runs out, or a steer reaches `inbox`."""
    if satisfied(children, mode):
        return WaitOutcome()
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_secs
    endings: set[asyncio.Future[Any]] = {
        asyncio.ensure_future(c.done.wait()) for c in children if not settled(c)
    }
    steered: asyncio.Future[Any] = asyncio.ensure_future(inbox.steered())
    try:
        while not satisfied(children, mode):
            remaining = deadline - loop.time()
            if remaining <= 0:
                return WaitOutcome(timed_out=True)
            done, _ = await asyncio.wait(
                {steered, *endings}, timeout=remaining, return_when=asyncio.FIRST_COMPLETED
            )
            if steered in done and not satisfied(children, mode):
                return WaitOutcome(interrupted_by_user=True)
            endings -= done
        return WaitOutcome()
    finally:
        # Only these waiters end: the events, the children and the inbox are untouched.
        for waiter in (steered, *endings):
            waiter.cancel()


def completion_agent_id(text: str) -> str | None:
    """The child a subagent_completion runtime event reports on, else None."""
    if 'kind="subagent_completion"' not in text or (match := _DONE.search(text)) is None:
        return None
    try:
        done = json.loads(match.group(1))
    except ValueError:
        return None
    agent_id = done.get("agent_id") if isinstance(done, dict) else None
    return agent_id if isinstance(agent_id, str) else None


def withdraw_completions(inbox: Inbox, agent_ids: Iterable[str]) -> None:
    """The wait's reply carries these children's results: their completion events, still
    waiting in the inbox, would only say it again."""
    returned = set(agent_ids)
    for text in inbox.runtime_events():
        if completion_agent_id(text) in returned:
            inbox.withdraw(text)


def wait_reply(
    children: list[Child],
    mode: WaitMode,
    outcome: WaitOutcome,
    projection: Callable[[Child], dict[str, Any]],
) -> dict[str, Any]:
    """Which ended (in the order they did), which still run, and every child's projection."""
    ended = sorted(
        (c for c in children if c.record.terminal),
        key=lambda c: c.record.finished_at_ms or 0,
    )
    reply: dict[str, Any] = {
        "mode": mode.value,
        "finished": [c.agent_id for c in ended],
        "still_running": [c.agent_id for c in children if not c.record.terminal],
    }
    if outcome.timed_out:
        reply["timed_out"] = True
    if outcome.interrupted_by_user:
        reply["interrupted_by_user"] = True
    if not children:
        reply["message"] = NOTHING_TO_WAIT_FOR
    reply["agents"] = [projection(child) for child in children]
    return reply
