"""The events a front end consumes, in one namespace: the engine's, the sub-agents' and
the runtime's own (a file the session could not write)."""

from dataclasses import dataclass
from typing import ClassVar

from codewhale.engine.compaction import CompactionFailed, ContextCompacted
from codewhale.engine.events import (
    ApprovalRequested,
    ApprovalResolved,
    AssistantDelta,
    AssistantMessage,
    ErrorEvent,
    Event,
    ReasoningDelta,
    Retrying,
    SteerAccepted,
    ToolCallFinished,
    ToolCallStarted,
    TurnComplete,
    TurnStarted,
    UsageEvent,
    WaitEnded,
    WaitStarted,
    WarningEvent,
)
from codewhale.subagents.events import (
    AgentEvent,
    AgentFinished,
    AgentProgress,
    AgentQueued,
    AgentSpawned,
    AgentStarted,
    AgentToolFinished,
    AgentToolStarted,
    AgentUsage,
    StateDamageSetAside,
    StateWriteFailed,
)
from codewhale.subagents.records import AgentSnapshot


@dataclass(frozen=True, kw_only=True)
class StorageError(Event):
    """A file the session keeps could not be written (a full or read-only disk); the
    conversation goes on in memory and what was written stays loadable."""

    type: ClassVar[str] = "storage_error"
    path: str
    reason: str  # the system's words, e.g. "No space left on device"
    message: str  # the whole problem in one line, for a person


__all__ = [
    "AgentEvent",
    "AgentFinished",
    "AgentProgress",
    "AgentQueued",
    "AgentSnapshot",
    "AgentSpawned",
    "AgentStarted",
    "AgentToolFinished",
    "AgentToolStarted",
    "AgentUsage",
    "ApprovalRequested",
    "ApprovalResolved",
    "AssistantDelta",
    "AssistantMessage",
    "CompactionFailed",
    "ContextCompacted",
    "ErrorEvent",
    "Event",
    "ReasoningDelta",
    "Retrying",
    "StateDamageSetAside",
    "StateWriteFailed",
    "SteerAccepted",
    "StorageError",
    "ToolCallFinished",
    "ToolCallStarted",
    "TurnComplete",
    "TurnStarted",
    "UsageEvent",
    "WaitEnded",
    "WaitStarted",
    "WarningEvent",
]
