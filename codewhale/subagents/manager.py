"""The SubAgentManager: the one owner of every child's record and lifecycle.

It composes the parts that each do one job: `Roster` (the children and lookup),
`ChildBuilder` (records and engines), `Admission` (cap and launch slots),
`Lifecycle` (the state table and the one move function), `ChildRunner` (a child's
run to its end), `LivenessMonitor` (heartbeat), `delivery` (messages in,
completions out). Children are detached background tasks: cancelling the parent's
turn does not touch them.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

from codewhale.config_models import SubagentsConfig
from codewhale.engine import events
from codewhale.engine.compaction import CompactionPolicy
from codewhale.handles import HandleStore
from codewhale.providers.client import ChatClient
from codewhale.providers.settings import ProviderSettings
from codewhale.skills import SkillSet
from codewhale.subagents import delivery
from codewhale.subagents import events as agent_events
from codewhale.subagents.admission import QUEUE_HEARTBEAT_SECS, QUEUED_TEXT, Admission
from codewhale.subagents.builder import ChildBuilder
from codewhale.subagents.catalog import AgentCatalog
from codewhale.subagents.child import Child, Opener
from codewhale.subagents.definitions import DefinitionSet
from codewhale.subagents.isolation import WorktreeKeeper, tree_of
from codewhale.subagents.lifecycle import ChildState, Lifecycle, reconcile_dead_owners
from codewhale.subagents.liveness import LivenessMonitor, stall_message
from codewhale.subagents.mailbox import Mailbox
from codewhale.subagents.progress import ChildProgress
from codewhale.subagents.records import (
    REVIVABLE,
    AgentSnapshot,
    WorkerRecord,
    snapshot_of_record,
)
from codewhale.subagents.roles import served_tools
from codewhale.subagents.roster import Roster
from codewhale.subagents.runner import ChildRunner
from codewhale.subagents.spawn import (
    FanOutLimitError,
    SpawnError,
    SpawnRequest,
    first_of,
    parse_spawn,
)
from codewhale.subagents.state.owners import this_process
from codewhale.subagents.state_log import FLUSH_DELAY_SECS, CoalescedWriter
from codewhale.subagents.store import StateFileError, StateWriteError, SubagentStore
from codewhale.subagents.wait import (
    WaitMode,
    WaitOutcome,
    parse_wait,
    wait_for,
    wait_reply,
    waited_children,
    withdraw_completions,
)
from codewhale.subagents.worktree import Isolation, Prepared, in_a_worktree
from codewhale.tools.base import Tool
from codewhale.tools.journal import PreImage
from codewhale.tools.session_changes import images_of

__all__ = ["QUEUED_TEXT", "SubAgentManager"]

REVIVE_NOTE = (
    "Your opener has a follow-up on your last assignment (your earlier messages, tool "
    "results and report are above). Work on it, then end with a new report in the same "
    "format.\n\nFollow-up:\n{message}"
)
CONTINUE_NOTE = (
    "Your previous run was interrupted ({reason}). Continue the assignment from where you "
    "stopped; your earlier messages and tool results are above."
)

ToolsFactory = Callable[[], list[Tool]]
AgentToolsFactory = Callable[["SubAgentManager", Opener], list[Tool]]
EventWatcher = Callable[[events.Event], None]


class SubAgentManager:
    def __init__(
        self,
        *,
        workspace: Path,
        client: ChatClient,
        settings: ProviderSettings,
        config: SubagentsConfig,
        definitions: DefinitionSet,
        handles: HandleStore,
        root: Opener,
        session_id: str,
        tools_factory: ToolsFactory,
        agent_tools_factory: AgentToolsFactory,
        # The checked-out branch at session start (engine.prompt.git_branch), for records.
        branch: str | None,
        emit: Callable[[events.Event], None] = lambda event: None,
        memory_text: Callable[[], str | None] = lambda: None,
        heartbeat_timeout_secs: float | None = None,
        queue_heartbeat_secs: float = QUEUE_HEARTBEAT_SECS,
        api_timeout_secs: float | None = None,
        compaction: CompactionPolicy | None = None,
        mcp_servers: Iterable[str] = (),
        skills: SkillSet | None = None,
    ) -> None:
        self.workspace = workspace.resolve()
        # Per conversation: (its current turn, children it opened in that turn), for
        # max_children_per_turn.
        self._opened_in_turn: dict[str | None, tuple[int, int]] = {}
        self.client = client
        self.settings = settings
        self.config = config
        self.definitions = definitions
        self.handles = handles
        # The session's own conversation: the opener of top-level children.
        self.root = root
        self.session_id = session_id
        tools = tools_factory()
        # What `allowed_tools` may name; the same for every child, so computed once. MCP
        # servers list their tools only once up, so their names are known by server.
        self.known_tools = served_tools((tool.name for tool in tools), mcp_servers)
        self.catalog = AgentCatalog(definitions, tools, config, settings.base_url)
        self.session_boot_id = "boot_" + secrets.token_hex(6)
        self.mailbox = Mailbox()
        self.mailbox.subscribe(emit)
        self._emit = emit
        self.store = SubagentStore(self.workspace)
        self.state_error: str | None = None
        self.roster = Roster(self.store, reconcile_dead_owners(self._load_prior()))
        # Damage found in the state file as it was read (set aside): one warning each.
        self.state_warnings = list(self.store.warnings)
        self.store.warnings.clear()
        # The first state, journal or transcript write the disk refused this run.
        self.write_failure: StateWriteError | None = None
        self.writer = CoalescedWriter(
            self.store,
            self.roster.all_records,
            enabled=lambda: self.state_error is None,
            on_failure=self._write_failed,
            on_warning=lambda text: emit(agent_events.StateDamageSetAside(message=text)),
        )
        # Children opened with isolation: worktree. Their worktrees finished long enough
        # ago go now; the records' new state is written with the first snapshot.
        self.worktrees = WorktreeKeeper(
            keep_hours=config.worktree_keep_hours,
            persist=lambda record: self.writer.mark_dirty(record, 0),
        )
        self.worktrees.prune(self.roster.all_records())
        self.mailbox.subscribe(self._summarize_isolated)
        self.admission = Admission(
            config.max_concurrent, config.launch_concurrency, queue_heartbeat_secs
        )
        self.lifecycle = Lifecycle(self.mailbox, self._persist)
        self.liveness = LivenessMonitor(
            heartbeat_timeout_secs or config.heartbeat_timeout_secs,
            lambda: self.roster.children.values(),
            self._stalled,
        )
        self.runner = ChildRunner(
            admission=self.admission,
            lifecycle=self.lifecycle,
            liveness=self.liveness,
            mailbox=self.mailbox,
            children=self.roster.children,
            write_now=lambda: self.writer.mark_dirty(None, 0),
            before_end=self._summarize_in_thread,
            on_write_failure=self._write_failed,
        )
        # Front ends following one child live (the agent screen), by agent id.
        self._watchers: dict[str, list[EventWatcher]] = {}
        self.progress = ChildProgress(
            lifecycle=self.lifecycle,
            mailbox=self.mailbox,
            liveness=self.liveness,
            children=self.roster.children,
            emit=emit,
            dirty=self.writer.mark_dirty,
        )
        self.builder = ChildBuilder(
            workspace=self.workspace,
            context=root.context,
            client=client,
            store=self.store,
            roster=self.roster,
            definitions=definitions,
            tools=tools_factory,
            agent_tools=lambda seat: agent_tools_factory(self, seat),
            on_event=self._child_event,
            memory_text=memory_text,
            api_timeout=float(api_timeout_secs or config.api_timeout_secs),
            session_id=session_id,
            session_boot_id=self.session_boot_id,
            branch=branch,
            compaction=compaction or CompactionPolicy(),
            skills=skills or SkillSet(),
        )

    @property
    def max_concurrent(self) -> int:
        return self.admission.max_concurrent

    @property
    def heartbeat_timeout(self) -> float:
        return self.liveness.timeout

    def _load_prior(self) -> list[WorkerRecord]:
        try:
            return self.store.load()
        except StateFileError as error:
            # Keep working, but never overwrite a file we could not read.
            self.state_error = f"{error}; sub-agent records will not be saved this session"
            return []

    def hold_for(self, opener: Opener) -> Callable[[], bool]:
        return self.roster.hold_for(opener)

    def adopt_session(self) -> str | None:
        """Take over this conversation's children from an earlier run (resume/continue).

        They appear in listings and can be continued; returns the one runtime event that
        tells the model which of them the restart interrupted, or None.
        """
        return delivery.interrupted_by_restart(
            self.roster.adopt_session(self.session_id, self.root)
        )

    # -- reading -----------------------------------------------------------------------

    def live_count(self) -> int:
        return self.roster.live_count()

    def has_live_children(self) -> bool:
        return self.live_count() > 0

    def snapshot(self) -> tuple[AgentSnapshot, ...]:
        return self.roster.snapshot()

    def snapshot_of(self, agent_id: str) -> AgentSnapshot | None:
        child = self.roster.get(agent_id)
        return snapshot_of_record(child.record) if child is not None else None

    def records(self, include_archived: bool = False) -> list[dict[str, Any]]:
        return self.roster.records(include_archived)

    def find(self, reference: Any, opener: Opener | None = None) -> Child:
        return self.roster.find(reference, opener or self.root)

    def projection(self, child: Child, **extra: Any) -> dict[str, Any]:
        handle = self.handles.put_file(
            f"agent:{child.agent_id}", "transcript", self.store.transcript_path(child.agent_id)
        )
        return child.record.projection(transcript_handle=handle, **extra)

    # -- following one child -----------------------------------------------------------

    def watch(self, agent_id: str, watcher: EventWatcher) -> Callable[[], None]:
        """Receive `agent_id`'s raw engine events from now on; returns the unsubscribe."""
        self._watchers.setdefault(agent_id, []).append(watcher)

        def unwatch() -> None:
            watchers = self._watchers.get(agent_id, [])
            if watcher in watchers:
                watchers.remove(watcher)
            if not watchers:
                self._watchers.pop(agent_id, None)

        return unwatch

    def waited_on(self, since: float) -> list[AgentSnapshot]:
        """The session's own children a turn held open since `since` (wall clock) waits for:
        those running, and those that ended after it (a front end asks a little later)."""
        since_ms = int(since * 1000)
        return [
            snapshot_of_record(c.record)
            for c in self.roster
            if c.opener is self.root
            and ((c.live and not c.record.terminal) or (c.record.finished_at_ms or 0) >= since_ms)
        ]

    def last_output_at(self, agent_id: str) -> float | None:
        """When (wall clock) a running child last streamed or ran a tool; None while it
        is not expected to (queued, ended, waiting on the user or its own children)."""
        child = self.roster.get(agent_id)
        if child is None or not child.live:
            return None
        state = child.state
        if state.waiting or state.terminal or state is ChildState.QUEUED:
            return None
        return child.last_output_at

    def cost_of(self, agent_id: str) -> float | None:
        """What a child and its own children cost this run; None: unknown (no price for a
        model, or a child an earlier run left)."""
        child = self.roster.get(agent_id)
        return child.meter.cost_usd if child is not None and child.meter is not None else None

    def streamed_text(self, agent_id: str) -> str:
        """The answer a child's current step has written so far ("" between steps)."""
        child = self.roster.get(agent_id)
        return child.engine.streamed_text() if child is not None and child.engine else ""

    def messages_of(self, agent_id: str) -> list[dict[str, Any]]:
        """A child's conversation so far: its engine's while it lives here, else its transcript."""
        child = self.roster.get(agent_id)
        if child is not None and child.engine is not None:
            return list(child.engine.messages)
        return self.store.load_transcript(agent_id)

    def _child_event(self, child: Child, event: events.Event) -> None:
        # The record first, so a watcher reading the child's snapshot sees this event applied.
        self.progress.on_event(child, event)
        if isinstance(event, events.UsageEvent):
            self.runner.check_spending(child)
        for watcher in tuple(self._watchers.get(child.agent_id, ())):
            watcher(event)

    # -- opening -----------------------------------------------------------------------

    def open(self, arguments: dict[str, Any], *, opener: Opener | None = None) -> dict[str, Any]:
        """Validate, admit and start a child; returns its projection at once.

        The worktree of an isolated child is made here, blocking; agent_open uses open_async.
        """
        opener = opener or self.root
        request = self._checked(arguments, opener)
        prepared = None
        if request.isolation is Isolation.WORKTREE:
            prepared = self.worktrees.prepare(request.workspace)
        return self._start(request, opener, prepared)

    async def open_async(
        self, arguments: dict[str, Any], *, opener: Opener | None = None
    ) -> dict[str, Any]:
        """`open`, with an isolated child's worktree made in a thread: checking out a large
        repository takes seconds, which the other children's streams should not wait for."""
        opener = opener or self.root
        request = self._checked(arguments, opener)
        if request.isolation is not Isolation.WORKTREE:
            return self._start(request, opener, None)
        prepared = await self.worktrees.prepare_in_thread(request.workspace)
        try:
            self._check_room(request)  # other opens ran meanwhile
        except SpawnError:
            await asyncio.to_thread(self.worktrees.discard, prepared)
            raise
        return self._start(request, opener, prepared)

    def _checked(self, arguments: dict[str, Any], opener: Opener) -> SpawnRequest:
        request = parse_spawn(
            arguments,
            workspace=opener.context.workspace,
            definitions=self.definitions,
            known_tools=self.known_tools,
            config=self.config,
            settings=self.settings,
        )
        if request.max_depth > opener.depth:
            raise SpawnError(
                f"max_depth must be at most {opener.depth} for a sub-agent opened here"
            )
        self._check_fan_out(opener)
        self._check_room(request)
        return request

    def _opened_this_turn(self, opener: Opener) -> int:
        """Children `opener` opened in its current turn (its journal counts its turns)."""
        turn, opened = self._opened_in_turn.get(opener.agent_id, (-1, 0))
        return opened if turn == opener.context.journal.current_turn else 0

    def _check_fan_out(self, opener: Opener) -> None:
        limit = self.config.max_children_per_turn
        if limit is not None and self._opened_this_turn(opener) >= limit:
            raise FanOutLimitError(
                f"this turn has opened {limit} sub-agents, the most one turn may "
                f"([subagents] max_children_per_turn = {limit}); work with their results, "
                "or ask the user to raise the limit"
            )

    def _check_room(self, request: SpawnRequest) -> None:
        self.admission.check_capacity(self.live_count())
        if request.name is not None:
            self.roster.check_name_free(request.name)

    def _start(
        self, request: SpawnRequest, opener: Opener, prepared: Prepared | None
    ) -> dict[str, Any]:
        if prepared is not None:
            request = replace(request, workspace=prepared.workspace)
        child = self.builder.create(request, opener)
        turn = opener.context.journal.current_turn
        self._opened_in_turn[opener.agent_id] = (turn, self._opened_this_turn(opener) + 1)
        if prepared is not None:
            try:
                self.worktrees.adopt(child.record, prepared)
            except SpawnError:
                self.worktrees.discard(prepared)
                raise
        self.roster.add(child)
        self.lifecycle.enter(child.record, QUEUED_TEXT)
        self.runner.start(child)
        if opener.agent_id is not None:
            self.mailbox.publish(
                lambda seq: agent_events.AgentSpawned(
                    seq=seq, agent_id=opener.agent_id or "", child_agent_id=child.agent_id
                )
            )
        return self.projection(child)

    async def record_opened(self, agent_id: str) -> None:
        """Make a new child's record durable before the model hears its id; if the disk
        refuses, the child is stopped (failed, with the reason) and SpawnError says so."""
        try:
            await self.writer.durable()
        except StateWriteError as error:
            child = self.roster.get(agent_id)
            if child is None or child.record.terminal:
                # It ran to its end while the write was tried (its completion follows).
                raise SpawnError(f"{error}; sub-agent {agent_id} is not saved") from None
            self.stop(child, ChildState.FAILED, str(error))
            raise SpawnError(f"{error}; sub-agent {agent_id} was stopped") from None

    def stop(self, child: Child, state: ChildState, message: str) -> None:
        self.runner.stop(child, state, message)

    def _stalled(self, child: Child) -> None:
        self.stop(child, ChildState.CANCELLED, stall_message(self.heartbeat_timeout))

    async def close(
        self, reference: Any, opener: Opener | None = None, keep_worktree: bool | None = None
    ) -> dict[str, Any]:
        child = self.find(reference, opener)
        if not child.record.terminal:
            self.stop(child, ChildState.CANCELLED, "cancelled")
            await child.done.wait()
        elif child.record.status == "interrupted" and child.task is None:
            # Closing a continuable child from an earlier run: it will not be continued.
            self.lifecycle.move(child.record, ChildState.QUEUED, "closed by its opener")
            self.lifecycle.move(child.record, ChildState.CANCELLED, "cancelled")
        extra: dict[str, Any] = {}
        if child.record.worktree is not None:
            extra["worktree_action"] = await self.worktrees.close(child.record, keep_worktree)
        return self.projection(child, **extra)

    # -- isolated children ---------------------------------------------------------------

    async def apply(self, reference: Any, opener: Opener | None = None) -> dict[str, Any]:
        """agent_apply: merge a finished isolated child's changes into the work tree."""
        child = self.find(reference, opener)
        before = await asyncio.to_thread(self._images_before_apply, child.record)
        reply = await self.worktrees.apply(child.record)
        if reply["applied"] and self.builder.context.changes is not None:
            self.builder.context.changes.record_all(before, f"agent:{child.agent_id}")
            workspace, written = self.builder.context.workspace, [path for path, _ in before]
            after = await asyncio.to_thread(images_of, workspace, written)
            self.builder.context.changes.wrote_all(after)  # for /rewind
        # "Applied" must survive a restart before the model hears of it: never apply twice.
        try:
            await self.writer.durable()
        except StateWriteError as error:
            raise SpawnError(f"the changes were applied, but {error}") from None
        return reply

    def _images_before_apply(self, record: WorkerRecord) -> list[tuple[Path, PreImage | None]]:
        """What the files agent_apply will write hold now, for /diff; none when it writes
        into another child's worktree, which is not the session's work tree."""
        tree = tree_of(record)
        if tree is None or in_a_worktree(Path(tree.source)):
            return []  # not isolated: worktrees.apply refuses it, saying why
        return images_of(self.builder.context.workspace, self.worktrees.targets(record))

    def apply_targets(self, reference: Any, opener: Opener | None = None) -> list[Path]:
        """The files agent_apply would write, for the dispatcher's protected-path check."""
        return self.worktrees.targets(self.find(reference, opener).record)

    def _summarize_isolated(self, event: agent_events.AgentEvent) -> None:
        """An isolated child ended: its diff summary goes into its completion event, which
        its runner sends right after this move."""
        if isinstance(event, agent_events.AgentFinished):
            child = self.roster.get(event.agent_id)
            if child is not None and child.record.worktree is not None:
                self.worktrees.summarize(child.record)

    async def _summarize_in_thread(self, child: Child) -> None:
        if child.record.worktree is not None:
            await self.worktrees.summarize_in_thread(child.record)

    async def shutdown(self) -> None:
        """Quitting: running children are recorded interrupted("parent session closed")."""
        for child in self.roster:
            self.stop(child, ChildState.INTERRUPTED, delivery.SESSION_CLOSED)
        pending = [c.done.wait() for c in self.roster if c.task is not None]
        if pending:
            await asyncio.gather(*pending)
        self.liveness.stop()
        await self.flush()

    # -- agent_eval ----------------------------------------------------------------------------

    async def evaluate(
        self, arguments: dict[str, Any], opener: Opener | None = None
    ) -> dict[str, Any]:
        child = self.find(first_of(arguments, "agent_id", "name", "agent_name", "id"), opener)
        extra: dict[str, Any] = {}
        message = first_of(arguments, "message", "input")
        if message is not None and child.record.status in REVIVABLE:
            # Its completion is sent before its task has unwound; a new run starts after.
            await child.done.wait()
            revival = self._revive(child, opener, str(message))
            extra["revival"] = revival
            extra["message_delivery"] = delivery.revival_delivery(revival)
        elif message is not None:
            extra["message_delivery"] = delivery.deliver_message(
                child, str(message), bool(arguments.get("interrupt"))
            )
        continuing = bool(arguments.get("continue"))
        if continuing:
            extra["continuation"] = self._continue(child, opener)
        block = arguments.get("block", continuing)
        if block and not child.record.terminal:
            timeout_ms = arguments.get("timeout_ms", 30_000)
            if not isinstance(timeout_ms, int) or isinstance(timeout_ms, bool):
                timeout_ms = 30_000
            timeout_ms = min(max(timeout_ms, 1_000), 3_600_000)
            # As agent_wait on one child: a steer from the user ends the block too.
            inbox = (opener or self.root).inbox
            with self._waiting(opener):
                outcome = await wait_for([child], WaitMode.ANY, timeout_ms / 1000, inbox)
            if outcome.timed_out:
                extra["timed_out"] = True
            if outcome.interrupted_by_user:
                extra["interrupted_by_user"] = True
        return self.projection(child, **extra)

    async def wait(self, arguments: dict[str, Any], opener: Opener | None = None) -> dict[str, Any]:
        """agent_wait: until the first (mode any) or every (all) chosen child has ended."""
        opener = opener or self.root
        request = parse_wait(arguments)
        children = waited_children(self.roster, request, opener)
        outcome = WaitOutcome()
        if children:
            with self._waiting(opener, "agent_wait"):
                outcome = await wait_for(children, request.mode, request.timeout_secs, opener.inbox)
        withdraw_completions(opener.inbox, (c.agent_id for c in children if c.record.terminal))
        return wait_reply(children, request.mode, outcome, self.projection)

    @contextmanager
    def _waiting(self, opener: Opener | None, tool: str = "agent_eval") -> Iterator[None]:
        """A child blocked in agent_eval or agent_wait waits on others: not a stall."""
        waiter = self.roster.get(opener.agent_id or "") if opener is not None else None
        if waiter is None or waiter.record.terminal:
            yield
            return
        self.lifecycle.move(waiter.record, ChildState.WAITING_FOR_CHILDREN, f"waiting in {tool}")
        try:
            yield
        finally:
            if not waiter.record.terminal:
                self.lifecycle.move(waiter.record, ChildState.RUNNING_TOOL)
                self.liveness.touch(waiter)

    def _revive(self, child: Child, opener: Opener | None, message: str) -> dict[str, Any]:
        """A new run of a finished child on its own transcript, `message` its next task."""
        try:
            self.admission.check_capacity(self.live_count())
        except SpawnError:
            return {"revived": False, "reason": "sub-agent limit reached"}
        record = child.record
        previous = record.run_id
        # Its clock (duration_ms, the sidebar's elapsed time) and runtime budget are the
        # new run's; tokens and cost count on over all its runs.
        record.started_at_ms = None
        self._restart(child, opener, "revived with a follow-up")
        record.run_id = "run_" + secrets.token_hex(6)
        record.runs += 1
        self.runner.start(child, resume_note=REVIVE_NOTE.format(message=message))
        return {"revived": True, "run_id": record.run_id, "previous_run_id": previous}

    def _restart(self, child: Child, opener: Opener | None, why: str) -> None:
        """Queue an ended child again: its engine back, this process its owner."""
        record = child.record
        if opener is not None:
            child.opener = opener  # its completion goes to whoever restarted it
        if child.engine is None:
            self.builder.rebuild(child)
        else:
            child.engine.client = self.client.clone()
        self.lifecycle.move(record, ChildState.QUEUED, why)
        owner = this_process()
        record.owner_pid, record.owner_start = owner.pid, owner.start
        record.session_boot_id = self.session_boot_id

    def _continue(self, child: Child, opener: Opener | None) -> dict[str, Any]:
        record = child.record
        if record.status != "interrupted" or record.checkpoint is None:
            return {"resumed": False, "reason": f"agent is {record.status}; nothing to continue"}
        try:
            self.admission.check_capacity(self.live_count())
        except SpawnError:
            return {"resumed": False, "reason": "sub-agent limit reached"}
        reason = record.error or "interrupted"
        self._restart(child, opener, "continuing from its checkpoint")
        self.runner.start(child, resume_note=CONTINUE_NOTE.format(reason=reason))
        return {"resumed": True}

    # -- persistence -----------------------------------------------------------------------------

    def _write_failed(self, error: StateWriteError) -> None:
        """The disk refused a write: said once per run (the run goes on in memory)."""
        if self.write_failure is None:
            self.write_failure = error
            self._emit(
                agent_events.StateWriteFailed(
                    path=str(error.path), reason=error.reason, message=str(error)
                )
            )

    def _persist(self, record: WorkerRecord, urgent: bool) -> None:
        self.writer.mark_dirty(record, 0 if urgent else FLUSH_DELAY_SECS)

    async def flush(self) -> None:
        await self.writer.flush()
