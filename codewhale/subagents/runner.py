"""Running one child to its end: launch slot, turn, report check, the final move, and
what its end means for others (its opener is told; its own children are stopped).

Only a cancel ends a child `cancelled` (or as whoever stopped it chose). Anything else
that escapes its run (the disk refusing its transcript, a bug) ends it `failed`, with
the reason as its error, which its opener reads in the completion.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path

from codewhale.engine.loop import Engine, TurnResult
from codewhale.engine.turn_hooks import with_context
from codewhale.subagents import delivery
from codewhale.subagents import events as agent_events
from codewhale.subagents.admission import QUEUED_TEXT, Admission
from codewhale.subagents.agent_hooks import agent_started, agent_stopping
from codewhale.subagents.child import Child
from codewhale.subagents.contract import REMINDER, parse_report, verify_claims
from codewhale.subagents.lifecycle import ChildState, Lifecycle
from codewhale.subagents.liveness import LivenessMonitor
from codewhale.subagents.mailbox import Mailbox
from codewhale.subagents.store import StateWriteError

logger = logging.getLogger("codewhale.subagents")


class ChildRunner:
    def __init__(
        self,
        *,
        admission: Admission,
        lifecycle: Lifecycle,
        liveness: LivenessMonitor,
        mailbox: Mailbox,
        children: Mapping[str, Child],
        write_now: Callable[[], None],
        before_end: Callable[[Child], Awaitable[None]] | None = None,
        on_write_failure: Callable[[StateWriteError], None] = lambda error: None,
    ) -> None:
        self.admission = admission
        self.lifecycle = lifecycle
        self.liveness = liveness
        self.mailbox = mailbox
        # Every child by id: an ending child's own children are found here.
        self.children = children
        # Schedules the state-file write at once (a child settled).
        self.write_now = write_now
        # Work for a child whose turn ended, before its final move (off the loop's hands).
        self.before_end = before_end
        # Told when a child failed because the disk refused one of its files.
        self.on_write_failure = on_write_failure

    def start(self, child: Child, *, resume_note: str | None = None) -> None:
        """Run the child as a detached task (a continuation when `resume_note` is given)."""
        child.done = asyncio.Event()
        child.stop = None
        loop = asyncio.get_running_loop()
        child.task = loop.create_task(self._run(child, resume_note))
        child.task.add_done_callback(lambda _: self._settle(child))
        if (secs := child.budget.max_runtime_secs) is not None:
            reason = child.budget.runtime_reason()
            child.deadline = loop.call_later(
                secs, lambda: self.stop(child, ChildState.FAILED, reason)
            )
        self.liveness.ensure_running()

    def check_spending(self, child: Child) -> None:
        """Stop a child that has spent past its budget's tokens or dollars."""
        if child.meter is None:
            return
        meter = child.meter
        if reason := child.budget.spent_reason(meter.total.total_tokens, meter.cost_usd):
            self.stop(child, ChildState.FAILED, reason)

    async def _run(self, child: Child, resume_note: str | None) -> None:
        record = child.record
        engine = child.engine
        assert engine is not None
        try:
            async with self.admission.slot(lambda: self._still_queued(child)):
                self.lifecycle.move(record, ChildState.STARTING, "started")
                self.liveness.touch(child)
                context = await agent_started(engine.context.hooks, record)
                if resume_note is not None:
                    result = await engine.continue_turn(with_context(resume_note, context))
                else:
                    result = await engine.run_turn(with_context(child.first_prompt, context))
                result = await agent_stopping(engine, record, result)
                if result.status == "completed":
                    result = await self._remind_if_malformed(child, engine, result)
                    report = parse_report(result.final_text)
                    if report["well_formed"]:
                        # git status runs in a thread: a blocking subprocess would stall
                        # every other child's stream for its duration.
                        record.verification = await asyncio.to_thread(
                            verify_claims, Path(record.workspace), report
                        )
                if self.before_end is not None:
                    await self.before_end(child)
                self._finish(child, result)
        except asyncio.CancelledError:
            self._finish_stopped(child)
        except Exception as error:
            self._finish_failed(child, error)

    def _still_queued(self, child: Child) -> None:
        self.mailbox.publish(
            lambda seq: agent_events.AgentProgress(
                seq=seq, agent_id=child.agent_id, message=QUEUED_TEXT, worker_status="queued"
            )
        )

    def _settle(self, child: Child) -> None:
        """Runs when the task ends, even one cancelled before its first line executed."""
        if child.deadline is not None:
            child.deadline.cancel()
            child.deadline = None
        if not child.record.terminal:
            self._finish_stopped(child)
        child.done.set()
        self.write_now()
        if child.engine is not None:
            # Its connections are idle now; a continuation opens fresh ones.
            asyncio.get_running_loop().create_task(child.engine.client.aclose())
            if child.record.status == "completed":
                # Nothing continues a completed child and its transcript holds its
                # messages; kept, its engine (conversation, tool schemas) would stay in
                # memory for the whole session, some 40 KB a child.
                child.engine = None
        if child.record.status == "completed":
            # A finished task still holds its coroutine and context (what the run set in
            # its context variables): let them go with it (a revival starts a new task).
            child.task = None

    async def _remind_if_malformed(
        self, child: Child, engine: Engine, result: TurnResult
    ) -> TurnResult:
        report = parse_report(result.final_text)
        if report["well_formed"] or engine.max_steps - result.steps < 1:
            return result
        engine.max_steps -= result.steps
        retry = await engine.run_turn(REMINDER)
        if retry.status != "completed":
            return result
        retry.steps += result.steps
        return retry

    def _finish(self, child: Child, result: TurnResult) -> None:
        record = child.record
        if child.stop is not None:
            self._finish_stopped(child)
            return
        record.steps_taken = max(record.steps_taken, result.steps)
        if result.status == "completed":
            record.result = result.final_text
            record.report = parse_report(result.final_text)
            to, message = ChildState.COMPLETED, "completed"
        elif result.status == "timed_out":
            record.error = f"{result.error}; checkpoint preserved for continuation"
            to, message = ChildState.INTERRUPTED, record.error
        else:
            record.error = result.error or f"turn ended with status {result.status}"
            record.result = result.final_text or None
            to, message = ChildState.FAILED, record.error
        self.lifecycle.move(record, to, message)
        self._ended(child)

    def _finish_failed(self, child: Child, error: Exception) -> None:
        """Its run raised: failed, with what went wrong as its error."""
        if child.record.terminal:
            return  # it had ended before (its final move was made)
        if isinstance(error, StateWriteError):
            self.on_write_failure(error)
            reason = str(error)
        elif isinstance(error, OSError) and error.filename:
            reason = f"could not use {error.filename}: {error.strerror}"
        else:
            reason = f"internal error: {type(error).__name__}: {error}"
            # For a developer who turns logging on; the user sees the one-line reason.
            logger.debug("sub-agent %s failed", child.agent_id, exc_info=error)
        child.record.error = reason
        self.lifecycle.move(child.record, ChildState.FAILED, reason)
        self._ended(child)

    def _finish_stopped(self, child: Child) -> None:
        state, message = child.stop or (ChildState.CANCELLED, "cancelled")
        record = child.record
        if state is ChildState.CANCELLED:
            record.result = message
        else:
            record.error = message
        self.lifecycle.move(record, state, message)
        self._ended(child)

    def _ended(self, child: Child) -> None:
        """Tell its opener, and stop its own children: nobody would hear them finish."""
        child.opener.inbox.runtime_event(delivery.completion_event(child.record))
        for other in self.children.values():
            if other.live and child.seat is not None and other.opener is child.seat:
                self.stop(
                    other, ChildState.CANCELLED, f"cancelled: its opener {child.agent_id} ended"
                )

    def stop(self, child: Child, state: ChildState, message: str) -> None:
        """End a running child as `state`; the first stop's reason stands (a quit right
        after a failure must not record it as interrupted)."""
        if child.record.terminal or not child.live or child.task is None or child.stop:
            return
        child.stop = (state, message)
        if child.engine is not None and child.engine.running:
            child.engine.cancel()
        else:
            child.task.cancel()
