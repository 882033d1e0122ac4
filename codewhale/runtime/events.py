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
    HookRan,
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
    AnyAgentEvent,
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


@dataclass(frozen=True, kw_only=True)
class BackgroundTaskChanged(Event):
    """A background shell task started or ended (by itself or killed); read its state
    with `Runtime.background_tasks()`."""

    type: ClassVar[str] = "background_task"
    task_id: str
    command: str
    status: str  # "running", "killed" or "exit N"


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
    "AnyAgentEvent",
    "ApprovalRequested",
    "ApprovalResolved",
    "AssistantDelta",
    "AssistantMessage",
    "BackgroundTaskChanged",
    "CompactionFailed",
    "ContextCompacted",
    "ErrorEvent",
    "Event",
    "HookRan",
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
