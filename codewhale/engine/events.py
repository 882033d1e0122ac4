"""The one event vocabulary: the TUI, `exec --json`, session files and records all read it.

Every event has `type` and `ts` (Unix seconds). `to_dict()` gives the JSON shape
documented in docs/EVENTS.md.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar


@dataclass(frozen=True, kw_only=True)
class Event:
    type: ClassVar[str] = "event"
    ts: float = field(default_factory=time.time)

    def to_dict(self) -> dict[str, Any]:
        kind = type(self)
        # Its fields but the private ones (a future, a reply slot), listed once per class:
        # dataclasses.fields() builds the list again on every call.
        names = _PUBLIC_FIELDS.get(kind)
        if names is None:
            names = tuple(item.name for item in fields(self) if not item.name.startswith("_"))
            _PUBLIC_FIELDS[kind] = names
        data: dict[str, Any] = {"type": self.type}
        for name in names:
            data[name] = getattr(self, name)
        return data


_PUBLIC_FIELDS: dict[type[Event], tuple[str, ...]] = {}


@dataclass(frozen=True, kw_only=True)
class TurnStarted(Event):
    type: ClassVar[str] = "turn_started"
    turn: int
    prompt: str


@dataclass(frozen=True, kw_only=True)
class AssistantDelta(Event):
    type: ClassVar[str] = "assistant_delta"
    text: str


@dataclass(frozen=True, kw_only=True)
class ReasoningDelta(Event):
    type: ClassVar[str] = "reasoning_delta"
    text: str


@dataclass(frozen=True, kw_only=True)
class AssistantMessage(Event):
    type: ClassVar[str] = "assistant_message"
    content: str
    reasoning: str = ""
    tool_calls: int = 0
    finish_reason: str = ""
    interrupted: bool = False


@dataclass(frozen=True, kw_only=True)
class ToolCallStarted(Event):
    type: ClassVar[str] = "tool_call_started"
    call_id: str
    name: str
    arguments: str
    summary: str = ""


@dataclass(frozen=True, kw_only=True)
class ToolCallFinished(Event):
    type: ClassVar[str] = "tool_call_finished"
    call_id: str
    name: str
    ok: bool
    output_preview: str
    duration_ms: int = 0
    display: str | None = None


@dataclass(frozen=True, kw_only=True)
class ApprovalRequested(Event):
    """Carries the request's future: whoever handles approvals resolves it."""

    type: ClassVar[str] = "approval_requested"
    request_id: str
    tool: str
    summary: str
    arguments: str
    requester: str = "parent"
    # The rule "always" would grant, in words shown before the choice (approval_rules),
    # e.g. "exec_shell commands starting `git log` (except …)".
    scope: str = ""
    # What the call would change, worked out without writing: a unified diff for the file
    # tools, or why the dry run failed. Empty for tools that change no files.
    preview: str = ""
    # A file change (Agent mode's edit review): the "this file" and "accept edits" answers
    # apply. `files`: the workspace files it would write, which "this file" covers.
    file_change: bool = False
    files: tuple[str, ...] = ()
    _future: asyncio.Future[str] | None = field(default=None, compare=False, repr=False)
    # The user's words to the model with a denial, filled in by `resolve`.
    _message: list[str] = field(default_factory=list, compare=False, repr=False)

    def resolve(self, decision: str, message: str = "") -> None:
        """decision: a value listed in docs/EVENTS.md ('approve', 'deny', …); `message`
        goes to the model with a 'deny'."""
        if self._future is not None and not self._future.done():
            if message:
                self._message.append(message)
            self._future.set_result(decision)

    @property
    def message(self) -> str:
        """What the user said to the model with the answer ('' if nothing)."""
        return self._message[0] if self._message else ""


@dataclass(frozen=True, kw_only=True)
class ApprovalResolved(Event):
    type: ClassVar[str] = "approval_resolved"
    request_id: str
    tool: str
    decision: str
    # What the user told the model with a 'deny' ('' if nothing).
    message: str = ""


@dataclass(frozen=True, kw_only=True)
class SteerAccepted(Event):
    type: ClassVar[str] = "steer_accepted"
    text: str


@dataclass(frozen=True, kw_only=True)
class WaitStarted(Event):
    """The turn is held open, waiting (e.g. on its children); not a stall."""

    type: ClassVar[str] = "wait_started"
    reason: str


@dataclass(frozen=True, kw_only=True)
class WaitEnded(Event):
    type: ClassVar[str] = "wait_ended"
    reason: str


@dataclass(frozen=True, kw_only=True)
class Retrying(Event):
    """A model request failed in a way worth retrying; attempt `attempt` starts in `delay` s.

    Never sent once part of the response was streamed: that request fails instead.
    """

    type: ClassVar[str] = "retrying"
    attempt: int
    max_attempts: int
    delay: float
    reason: str  # "HTTP 429, Retry-After", "HTTP 503", "connection failed", ...


@dataclass(frozen=True, kw_only=True)
class UsageEvent(Event):
    type: ClassVar[str] = "usage"
    input: int
    output: int
    cache_hit: int
    cache_miss: int
    # The server sent no counts: these were worked out from the request and answer sizes.
    estimated: bool = False


@dataclass(frozen=True, kw_only=True)
class TurnComplete(Event):
    type: ClassVar[str] = "turn_complete"
    status: str  # completed | failed | interrupted | max_steps
    steps: int
    usage: dict[str, int]
    final_text: str = ""


@dataclass(frozen=True, kw_only=True)
class HookRan(Event):
    """A lifecycle hook ran (docs/HOOKS.md); `outcome`: ok | blocked | error | timed_out."""

    type: ClassVar[str] = "hook"
    event: str
    matcher: str
    command: str
    source: str
    outcome: str
    exit_code: int | None
    duration_ms: int
    message: str = ""
    status_message: str = ""
    agent_id: str = ""

    def line(self) -> str:
        """One line for a person: `PreToolUse hook blocked: ./guard.sh — no rm here (12 ms)`."""
        who = f" ({self.agent_id})" if self.agent_id else ""
        first = self.message.strip().splitlines()[0][:160] if self.message.strip() else ""
        said = f" — {first}" if first else ""
        return (
            f"{self.event} hook{who} {self.outcome.replace('_', ' ')}: "
            f"{self.command[:80]}{said} ({self.duration_ms} ms)"
        )


@dataclass(frozen=True, kw_only=True)
class ErrorEvent(Event):
    type: ClassVar[str] = "error"
    message: str


@dataclass(frozen=True, kw_only=True)
class WarningEvent(Event):
    """Something the user should know that stops nothing (said once per conversation)."""

    type: ClassVar[str] = "warning"
    message: str
