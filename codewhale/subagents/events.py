"""Typed sub-agent events: the mailbox's vocabulary (spec §10).

Each is also an engine `Event` of type `agent_event`, so the TUI, `exec --json` and
tests consume one stream. A front end matches on `AnyAgentEvent` by type; `envelope()`
gives the spec's `{seq, kind, agent_id, ...}` for JSON output only.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, ClassVar, TypeAlias

from codewhale.engine.events import Event
from codewhale.subagents.records import now_ms


@dataclass(frozen=True, kw_only=True)
class AgentEvent(Event):
    type: ClassVar[str] = "agent_event"
    KIND: ClassVar[str] = ""
    seq: int
    agent_id: str

    @property
    def kind(self) -> str:
        return self.KIND

    def envelope(self) -> dict[str, Any]:
        """The documented JSON shape (docs/EVENTS.md), written by `exec --json`."""
        data: dict[str, Any] = {
            "seq": self.seq,
            "kind": self.kind,
            "agent_id": self.agent_id,
            "ts_ms": int(self.ts * 1000) if self.ts else now_ms(),
        }
        for item in fields(self):
            if item.name not in ("seq", "agent_id", "ts") and not item.name.startswith("_"):
                data[item.name] = getattr(self, item.name)
        return data

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type, "ts": self.ts, "envelope": self.envelope()}


@dataclass(frozen=True, kw_only=True)
class AgentQueued(AgentEvent):
    KIND: ClassVar[str] = "queued"
    message: str
    worker_status: str = "queued"


@dataclass(frozen=True, kw_only=True)
class AgentStarted(AgentEvent):
    KIND: ClassVar[str] = "started"
    message: str
    worker_status: str = "starting"


@dataclass(frozen=True, kw_only=True)
class AgentProgress(AgentEvent):
    """A change of what the child is doing, or a look at the tail of its stream."""

    KIND: ClassVar[str] = "progress"
    message: str
    worker_status: str = ""
    # The last characters of the text it is writing (a whole tail, not a fragment).
    text_tail: str = ""


@dataclass(frozen=True, kw_only=True)
class AgentToolStarted(AgentEvent):
    KIND: ClassVar[str] = "tool_call_started"
    tool: str
    summary: str = ""
    step: int = 0


@dataclass(frozen=True, kw_only=True)
class AgentToolFinished(AgentEvent):
    KIND: ClassVar[str] = "tool_call_completed"
    tool: str
    ok: bool
    step: int = 0


@dataclass(frozen=True, kw_only=True)
class AgentSpawned(AgentEvent):
    """This child opened a child of its own."""

    KIND: ClassVar[str] = "child_spawned"
    child_agent_id: str


@dataclass(frozen=True, kw_only=True)
class AgentFinished(AgentEvent):
    status: str  # completed | failed | cancelled | interrupted
    message: str
    worker_status: str = ""

    @property
    def kind(self) -> str:
        return self.status

    def __post_init__(self) -> None:
        if not self.worker_status:
            object.__setattr__(self, "worker_status", self.status)


@dataclass(frozen=True, kw_only=True)
class AgentUsage(AgentEvent):
    """Running token totals of the child (its own requests)."""

    KIND: ClassVar[str] = "token_usage"
    input: int
    output: int
    cache_hit: int
    cache_miss: int


# Every mailbox event. A front end matches on it with an `assert_never` default, so mypy
# names each handler a new event would miss (tests/unit/test_agent_event_match.py checks
# that every AgentEvent class is listed here).
AnyAgentEvent: TypeAlias = (
    AgentQueued
    | AgentStarted
    | AgentProgress
    | AgentToolStarted
    | AgentToolFinished
    | AgentSpawned
    | AgentFinished
    | AgentUsage
)


@dataclass(frozen=True, kw_only=True)
class StateWriteFailed(Event):
    """The sub-agent state (a record, journal or transcript) could not be written.

    The run goes on in memory; a front end says `message` once and ends with a failure
    status. Sent at the first failure of a run of them.
    """

    type: ClassVar[str] = "subagent_state_write_failed"
    path: str
    reason: str  # the system's words, e.g. "No space left on device"
    message: str  # "could not write <path>: <reason>"


@dataclass(frozen=True, kw_only=True)
class StateDamageSetAside(Event):
    """A damaged state file was read around, copied aside and rewritten: a warning."""

    type: ClassVar[str] = "subagent_state_damaged"
    message: str
