"""One child lifecycle: the states, the legal moves between them, and the one function
that performs a move.

`apply_move` is the only code that changes a child's status (a test checks it): it
checks the move is in the table, stamps the time and updates the record. A running child
moves through `Lifecycle.move`, which also schedules the state-file write and publishes
one typed event; `reconcile_dead_owners` moves records read from disk, whose process is
gone, to interrupted before anyone listens (and `codewhale agents list` writes nothing).
Textual's Worker does the same with WorkerState and its single state setter.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import StrEnum
from typing import Any

from codewhale.subagents import events as agent_events
from codewhale.subagents.mailbox import Mailbox
from codewhale.subagents.records import WorkerRecord, now_ms
from codewhale.subagents.state.owners import owner_alive
from codewhale.subagents.store import RESTART_REASON


class ChildState(StrEnum):
    QUEUED = "queued"
    STARTING = "starting"
    RUNNING = "running"
    MODEL_WAIT = "model_wait"
    RUNNING_TOOL = "running_tool"
    WAITING_FOR_USER = "waiting_for_user"
    WAITING_FOR_CHILDREN = "waiting_for_children"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"
    INTERRUPTED = "interrupted"

    @property
    def terminal(self) -> bool:
        return self in TERMINAL

    @property
    def waiting(self) -> bool:
        """Waiting on someone else (the user, its children): time here is not a stall."""
        return self in WAITING

    @property
    def status(self) -> str:
        """The coarse status of spec §5: pending, running or the terminal state."""
        if self is ChildState.QUEUED:
            return "pending"
        return self.value if self.terminal else "running"


ACTIVE = frozenset(
    {
        ChildState.RUNNING,
        ChildState.MODEL_WAIT,
        ChildState.RUNNING_TOOL,
        ChildState.WAITING_FOR_USER,
        ChildState.WAITING_FOR_CHILDREN,
    }
)
WAITING = frozenset({ChildState.WAITING_FOR_USER, ChildState.WAITING_FOR_CHILDREN})
TERMINAL = frozenset(
    {ChildState.COMPLETED, ChildState.FAILED, ChildState.CANCELLED, ChildState.INTERRUPTED}
)

TRANSITIONS: dict[ChildState, frozenset[ChildState]] = {
    ChildState.QUEUED: frozenset({ChildState.STARTING}) | TERMINAL,
    ChildState.STARTING: ACTIVE | TERMINAL,
    **{state: (ACTIVE - {state}) | TERMINAL for state in ACTIVE},
    # An interrupted child (API timeout, restart, quit) can be continued; a completed or
    # failed one revived with a follow-up (agent_eval's message), on its own transcript.
    ChildState.INTERRUPTED: frozenset({ChildState.QUEUED}),
    ChildState.COMPLETED: frozenset({ChildState.QUEUED}),
    ChildState.FAILED: frozenset({ChildState.QUEUED}),
    ChildState.CANCELLED: frozenset(),
}


class LifecycleError(RuntimeError):
    """A move the table does not allow: a bug in the caller, never the model's doing."""


def state_of(record: WorkerRecord) -> ChildState:
    return ChildState(record.worker_status)


def apply_move(
    record: WorkerRecord, to: ChildState, message: str = "", *, tool: str | None = None
) -> bool:
    """Check and apply one move to a record; False if it is already in that state."""
    current = state_of(record)
    if current is to:
        return False
    if to not in TRANSITIONS[current]:
        raise LifecycleError(f"{record.agent_id}: {current.value} -> {to.value} is not allowed")
    stamp = now_ms()
    record.worker_status = to.value
    record.status = to.status
    if to is ChildState.STARTING and record.started_at_ms is None:
        record.started_at_ms = stamp
    if to is ChildState.QUEUED:
        record.finished_at_ms = None
        record.error = None
    if to.terminal:
        record.finished_at_ms = stamp
    record.add_event(to.value, message or to.value, step=record.steps_taken, tool=tool)
    record.updated_at_ms = stamp
    return True


def reconcile_dead_owners(records: list[WorkerRecord]) -> list[WorkerRecord]:
    """Records left unfinished by a process that no longer exists become interrupted;
    another live process's (a second run in this workspace) are left to it."""
    for record in records:
        if not state_of(record).terminal and not owner_alive(record.owner_pid, record.owner_start):
            record.error = RESTART_REASON
            apply_move(record, ChildState.INTERRUPTED, RESTART_REASON)
    return records


class Lifecycle:
    """Performs moves; `persist(record, urgent)` schedules the state-file write."""

    def __init__(self, mailbox: Mailbox, persist: Callable[[WorkerRecord, bool], None]) -> None:
        self.mailbox = mailbox
        self.persist = persist

    def enter(self, record: WorkerRecord, message: str) -> None:
        """A new record enters the table queued: written at once and announced."""
        if state_of(record) is not ChildState.QUEUED or record.events:
            raise LifecycleError(f"{record.agent_id} has already entered the lifecycle")
        record.add_event(ChildState.QUEUED.value, message)
        self.persist(record, True)
        self.mailbox.publish(_announcement(record, ChildState.QUEUED, message, None, ""))

    def move(
        self,
        record: WorkerRecord,
        to: ChildState,
        message: str = "",
        *,
        tool: str | None = None,
        summary: str = "",
    ) -> bool:
        """Move `record` to `to`; False (and nothing happens) if it is already there."""
        if not apply_move(record, to, message, tool=tool):
            return False
        text = message or to.value
        self.persist(record, to is ChildState.QUEUED or to.terminal)
        self.mailbox.publish(_announcement(record, to, text, tool, summary))
        return True


def _announcement(
    record: WorkerRecord, to: ChildState, message: str, tool: str | None, summary: str
) -> Callable[[int], agent_events.AgentEvent]:
    """The one typed event a move publishes (the mailbox stamps its sequence number)."""
    common: dict[str, Any] = {"agent_id": record.agent_id}
    if to is ChildState.QUEUED:
        return lambda seq: agent_events.AgentQueued(seq=seq, message=message, **common)
    if to is ChildState.STARTING:
        return lambda seq: agent_events.AgentStarted(seq=seq, message=message, **common)
    if to.terminal:
        return lambda seq: agent_events.AgentFinished(
            seq=seq, status=to.value, message=message, **common
        )
    if to is ChildState.RUNNING_TOOL and tool is not None:
        return lambda seq: agent_events.AgentToolStarted(
            seq=seq, tool=tool, summary=summary, step=record.steps_taken, **common
        )
    return lambda seq: agent_events.AgentProgress(
        seq=seq, message=message, worker_status=to.value, **common
    )
