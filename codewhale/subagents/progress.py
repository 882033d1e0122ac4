"""What a child's engine events mean for its record: the translation from the engine's
vocabulary (deltas, tool calls, waits, usage) to lifecycle moves and mailbox events.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

from codewhale.engine import events
from codewhale.subagents import events as agent_events
from codewhale.subagents.child import Child
from codewhale.subagents.lifecycle import ChildState, Lifecycle
from codewhale.subagents.liveness import LivenessMonitor
from codewhale.subagents.mailbox import Mailbox
from codewhale.subagents.records import USAGE_KEYS, WorkerRecord

# How often a streaming child's text tail is published (the UI's live preview).
PROGRESS_INTERVAL_SECS = 0.25


class ChildProgress:
    def __init__(
        self,
        *,
        lifecycle: Lifecycle,
        mailbox: Mailbox,
        liveness: LivenessMonitor,
        children: Mapping[str, Child],
        emit: Callable[[events.Event], None],
        dirty: Callable[[WorkerRecord], None],
    ) -> None:
        self.lifecycle = lifecycle
        self.mailbox = mailbox
        self.liveness = liveness
        # Every child by id, to roll usage up through the ancestors.
        self.children = children
        # The session's event sink: a child's approval requests are resolved there.
        self.emit = emit
        # Schedules a coalesced write of a changed record.
        self.dirty = dirty

    def on_event(self, child: Child, event: events.Event) -> None:
        """Apply one engine event of `child`: a lifecycle move, a mailbox event, or both."""
        self.liveness.touch(child)
        record = child.record
        move = self.lifecycle.move
        if isinstance(event, events.ApprovalRequested):
            move(record, ChildState.WAITING_FOR_USER, f"waiting for approval: {event.tool}")
            self.emit(event)  # the session's approval channel resolves it
        elif isinstance(event, events.ApprovalResolved):
            move(record, ChildState.RUNNING_TOOL, f"approval {event.decision}")
            self.emit(event)
        elif isinstance(event, events.ToolCallStarted):
            record.tool_calls += 1
            record.activity = f"step {record.steps_taken} · {event.name}"
            moved = move(
                record,
                ChildState.RUNNING_TOOL,
                event.summary or event.name,
                tool=event.name,
                summary=event.summary,
            )
            if not moved:  # parallel reads: already running a tool, still announce this one
                self.mailbox.publish(
                    lambda seq: agent_events.AgentToolStarted(
                        seq=seq,
                        agent_id=child.agent_id,
                        tool=event.name,
                        summary=event.summary,
                        step=record.steps_taken,
                    )
                )
        elif isinstance(event, events.ToolCallFinished):
            self.mailbox.publish(
                lambda seq: agent_events.AgentToolFinished(
                    seq=seq,
                    agent_id=child.agent_id,
                    tool=event.name,
                    ok=event.ok,
                    step=record.steps_taken,
                )
            )
        elif isinstance(event, events.AssistantMessage):
            # The step's answer is complete: show its end even if the throttle held it
            # back, then start the next step's preview empty.
            if child.text_tail != child.published_tail:
                self._publish_tail(child)
            child.text_tail = child.published_tail = ""
            record.steps_taken += 1
            if not event.interrupted:
                move(record, ChildState.RUNNING)
        elif isinstance(event, events.TurnStarted | events.SteerAccepted):
            move(record, ChildState.MODEL_WAIT)
        elif isinstance(event, events.AssistantDelta):
            self._streaming(child, event.text)
        elif isinstance(event, events.ReasoningDelta):
            # Thinking is progress, but the preview shows only the answer being written.
            move(record, ChildState.MODEL_WAIT)
        elif isinstance(event, events.WaitStarted):
            move(record, ChildState.WAITING_FOR_CHILDREN, "waiting for its sub-agents")
        elif isinstance(event, events.WaitEnded):
            move(record, ChildState.RUNNING)
        elif isinstance(event, events.UsageEvent):
            self._add_usage(child, event)
        self.dirty(record)

    def _streaming(self, child: Child, text: str) -> None:
        self.lifecycle.move(child.record, ChildState.MODEL_WAIT)
        child.add_text(text)
        if time.monotonic() - child.last_tail_publish >= PROGRESS_INTERVAL_SECS:
            self._publish_tail(child)

    def _publish_tail(self, child: Child) -> None:
        """A progress event carrying the end of what the child is writing (the whole tail)."""
        record = child.record
        child.last_tail_publish = time.monotonic()
        child.published_tail = tail = child.text_tail
        record.activity = f"step {record.steps_taken + 1} · writing"
        self.mailbox.publish(
            lambda seq: agent_events.AgentProgress(
                seq=seq,
                agent_id=child.agent_id,
                message=record.activity,
                worker_status=record.worker_status,
                text_tail=tail,
            )
        )

    def _add_usage(self, child: Child, event: events.UsageEvent) -> None:
        """The child's own totals, and a roll-up into every ancestor's record."""
        values = (event.input, event.output, event.cache_hit, event.cache_miss)
        amounts = dict(zip(USAGE_KEYS, values, strict=True))
        record = child.record
        for key, value in amounts.items():
            record.usage[key] += value
        ancestor = self.children.get(record.parent_agent_id or "")
        while ancestor is not None:
            for key, value in amounts.items():
                ancestor.record.descendant_usage[key] += value
            self.dirty(ancestor.record)
            ancestor = self.children.get(ancestor.record.parent_agent_id or "")
        self.mailbox.publish(
            lambda seq: agent_events.AgentUsage(
                seq=seq, agent_id=child.agent_id, **dict(record.usage)
            )
        )
