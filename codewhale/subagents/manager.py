"""The SubAgentManager: the one owner of every child's record and lifecycle.

It composes the parts that each do one job: `Admission` (cap and launch slots),
`Lifecycle` (the state table and the one move function), `LivenessMonitor`
(heartbeat), `delivery` (messages in, completions out) and `launch` (what a child
starts from). Children are detached background tasks: cancelling the parent's turn
does not touch them.
"""

from __future__ import annotations

import asyncio
import os
import secrets
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from codewhale.authority import Authority
from codewhale.config_models import SubagentsConfig
from codewhale.engine import events
from codewhale.engine.conversation import Conversation, Inbox, UsageMeter
from codewhale.engine.loop import Engine
from codewhale.engine.prompt import git_branch
from codewhale.handles import HandleStore
from codewhale.providers.client import ChatClient
from codewhale.providers.settings import ProviderSettings
from codewhale.subagents import delivery, launch
from codewhale.subagents import events as agent_events
from codewhale.subagents.admission import QUEUE_HEARTBEAT_SECS, QUEUED_TEXT, Admission
from codewhale.subagents.child import Child, Opener
from codewhale.subagents.definitions import DefinitionSet
from codewhale.subagents.lifecycle import ChildState, Lifecycle, reconcile_dead_owners
from codewhale.subagents.liveness import LivenessMonitor, stall_message
from codewhale.subagents.mailbox import Mailbox
from codewhale.subagents.progress import ChildProgress
from codewhale.subagents.records import (
    WHALES,
    AgentSnapshot,
    WorkerRecord,
    new_agent_id,
    now_ms,
    snapshot_of_record,
)
from codewhale.subagents.roles import AGENT_TOOLS
from codewhale.subagents.runner import ChildRunner
from codewhale.subagents.spawn import SpawnError, SpawnRequest, first_of, parse_spawn
from codewhale.subagents.store import (
    FLUSH_DELAY_SECS,
    CoalescedWriter,
    StateFileError,
    SubagentStore,
)
from codewhale.tools.base import Tool
from codewhale.tools.registry import ToolRegistry
from codewhale.work_state import WorkState

__all__ = ["QUEUED_TEXT", "SubAgentManager"]

DEFAULT_CHILD_STEPS = 60
CONTINUE_NOTE = (
    "Your previous run was interrupted ({reason}). Continue the assignment from where you "
    "stopped; your earlier messages and tool results are above."
)

ToolsFactory = Callable[[], list[Tool]]
AgentToolsFactory = Callable[["SubAgentManager", Opener], list[Tool]]


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
        emit: Callable[[events.Event], None] = lambda event: None,
        memory_text: Callable[[], str | None] = lambda: None,
        heartbeat_timeout_secs: float | None = None,
        queue_heartbeat_secs: float = QUEUE_HEARTBEAT_SECS,
        api_timeout_secs: float | None = None,
    ) -> None:
        self.workspace = workspace.resolve()
        self.client = client
        self.settings = settings
        self.config = config
        self.definitions = definitions
        self.handles = handles
        # The session's own conversation: its context is what children's contexts copy
        # (memory, network and the shared mode switch and approval grants).
        self.root = root
        self.context = root.context
        self.session_id = session_id
        self.tools_factory = tools_factory
        # What `allowed_tools` may name; the same for every child, so computed once.
        self.known_tools = frozenset(
            [*(tool.name for tool in tools_factory()), *sorted(AGENT_TOOLS)]
        )
        self.agent_tools_factory = agent_tools_factory
        self.emit = emit
        self.memory_text = memory_text
        self.api_timeout = api_timeout_secs or config.api_timeout_secs
        self.session_boot_id = "boot_" + secrets.token_hex(6)
        self.mailbox = Mailbox()
        self.mailbox.subscribe(emit)
        self.store = SubagentStore(self.workspace)
        self.admission = Admission(
            config.max_concurrent, config.launch_concurrency, queue_heartbeat_secs
        )
        self.lifecycle = Lifecycle(self.mailbox, self._persist)
        self.liveness = LivenessMonitor(
            heartbeat_timeout_secs or config.heartbeat_timeout_secs,
            lambda: self._children.values(),
            self._stalled,
        )
        self._children: dict[str, Child] = {}
        self.runner = ChildRunner(
            admission=self.admission,
            lifecycle=self.lifecycle,
            liveness=self.liveness,
            mailbox=self.mailbox,
            children=self._children,
            write_now=lambda: self.writer.mark_dirty(0),
        )
        self.progress = ChildProgress(
            lifecycle=self.lifecycle,
            mailbox=self.mailbox,
            liveness=self.liveness,
            children=self._children,
            emit=emit,
            dirty=lambda: self.writer.mark_dirty(FLUSH_DELAY_SECS),
        )
        self._branch = git_branch(self.workspace)
        self.state_error: str | None = None
        self._prior = reconcile_dead_owners(self._load_prior())
        self.writer = CoalescedWriter(self.store, self._all_records, enabled=self._persisting)

    @property
    def max_concurrent(self) -> int:
        return self.admission.max_concurrent

    @property
    def heartbeat_timeout(self) -> float:
        return self.liveness.timeout

    def _persisting(self) -> bool:
        return self.state_error is None

    def _load_prior(self) -> list[WorkerRecord]:
        try:
            return self.store.load()
        except StateFileError as error:
            # Keep working, but never overwrite a file we could not read.
            self.state_error = f"{error}; sub-agent records will not be saved this session"
            return []

    # -- the tree ------------------------------------------------------------------------

    def hold_for(self, opener: Opener) -> Callable[[], bool]:
        """For an engine: whether children it opened are still running.

        A child whose record has ended has already posted its completion, so it no
        longer holds its opener even while its task winds down.
        """
        return lambda: any(
            c.live and not c.record.terminal and c.opener is opener for c in self._children.values()
        )

    def adopt_session(self) -> str | None:
        """Take over this conversation's children from an earlier run (resume/continue).

        They appear in listings and can be continued; returns the one runtime event that
        tells the model which of them the restart interrupted, or None.
        """
        mine = [r for r in self._prior if r.session_id == self.session_id]
        for record in mine:
            self._adopt(record, self.root)
        return delivery.interrupted_by_restart(mine)

    def _adopt(self, record: WorkerRecord, opener: Opener) -> Child:
        self._prior = [r for r in self._prior if r is not record]
        if record.status == "interrupted" and record.checkpoint is None:
            # The state file may lag the transcript (coalesced writes): trust the file.
            lines = len(self.store.load_transcript(record.agent_id))
            if lines:
                record.checkpoint = self.store.checkpoint(record.agent_id, lines)
        child = Child(record=record, opener=opener)
        child.done.set()
        self._children[record.agent_id] = child
        return child

    # -- reading -----------------------------------------------------------------------

    def live_count(self) -> int:
        return sum(1 for child in self._children.values() if child.live)

    def has_live_children(self) -> bool:
        return self.live_count() > 0

    def snapshot(self) -> tuple[AgentSnapshot, ...]:
        return tuple(snapshot_of_record(c.record) for c in self._children.values())

    def snapshot_of(self, agent_id: str) -> AgentSnapshot | None:
        child = self._children.get(agent_id)
        return snapshot_of_record(child.record) if child is not None else None

    def records(self, include_archived: bool = False) -> list[dict[str, Any]]:
        current = [c.record.to_json() for c in self._children.values()]
        if not include_archived:
            return current
        prior = []
        for record in self._prior:
            data = record.to_json()
            data["from_prior_session"] = True
            prior.append(data)
        return prior + current

    def find(self, reference: Any, opener: Opener | None = None) -> Child:
        """By id, then unique name, then unique nickname; earlier runs' records too."""
        if not isinstance(reference, str) or not reference.strip():
            raise SpawnError("agent_eval/agent_close need 'name' or 'agent_id'")
        reference = reference.strip()
        if reference in self._children:
            return self._children[reference]
        for record in self._prior:
            if record.agent_id == reference:
                return self._adopt(record, opener or self.root)
        for key in ("name", "nickname"):
            matches = [
                c for c in self._children.values() if _matches(getattr(c.record, key), reference)
            ]
            if len(matches) > 1:
                raise SpawnError(f"Agent session name '{reference}' is ambiguous; use an agent_id")
            if matches:
                return matches[0]
        raise SpawnError(f"Agent session {reference} not found")

    def projection(self, child: Child, **extra: Any) -> dict[str, Any]:
        handle = self.handles.put_file(
            f"agent:{child.agent_id}", "transcript", self.store.transcript_path(child.agent_id)
        )
        return child.record.projection(transcript_handle=handle, **extra)

    # -- opening -----------------------------------------------------------------------

    def open(self, arguments: dict[str, Any], *, opener: Opener | None = None) -> dict[str, Any]:
        """Validate, admit and start a child; returns its projection at once."""
        opener = opener or self.root
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
        self.admission.check_capacity(self.live_count())
        if request.name is not None:
            self._check_name_free(request.name)
        child = self._create(request, opener)
        self._children[child.agent_id] = child
        self.lifecycle.enter(child.record, QUEUED_TEXT)
        self.runner.start(child)
        if opener.agent_id is not None:
            self.mailbox.publish(
                lambda seq: agent_events.AgentSpawned(
                    seq=seq, agent_id=opener.agent_id or "", child_agent_id=child.agent_id
                )
            )
        return self.projection(child)

    def _check_name_free(self, name: str) -> None:
        for other in self._children.values():
            if other.record.name == name and not other.record.terminal:
                age = (now_ms() - other.record.created_at_ms) // 1000
                raise SpawnError(
                    f"Agent session name '{name}' is already used by {other.record.agent_id} "
                    f"({other.record.status}, {age}s old)"
                )

    def _nickname(self) -> str:
        # Unique among this conversation's children, which is where nicknames resolve.
        taken = {c.record.nickname for c in self._children.values()}
        for round_ in range(1, 1000):
            for whale in WHALES:
                name = whale if round_ == 1 else f"{whale}-{round_}"
                if name not in taken:
                    return name
        return new_agent_id()  # pragma: no cover - a thousand rounds of whales

    def _create(self, request: SpawnRequest, opener: Opener) -> Child:
        agent_id = new_agent_id()
        authority = launch.child_authority(request, opener.authority)
        record = WorkerRecord(
            run_id="run_" + secrets.token_hex(6),
            agent_id=agent_id,
            name=request.name or agent_id,
            nickname=self._nickname(),
            objective=request.prompt,
            description=request.description,
            type=request.type_name,
            role=request.role.value,
            model=request.model,
            workspace=str(request.workspace),
            git_branch=self._branch,
            session_boot_id=self.session_boot_id,
            allowed_tools=list(request.allowed_tools),
            fork_context=request.fork_context,
            max_depth=request.max_depth,
            owner_pid=os.getpid(),
            session_id=self.session_id,
            parent_agent_id=opener.agent_id,
            authority=authority.to_json(),
        )
        record.artifacts["transcript"] = str(self.store.transcript_path(agent_id))
        child = Child(record=record, opener=opener)
        prompt = launch.system_prompt(request, self.memory_text())
        parent_prefix = None
        if request.fork_context:
            parent_prefix = opener.conversation.request_prefix()
        messages = launch.first_messages(
            request,
            prompt,
            parent_prefix=parent_prefix,
            fork_state_text=launch.fork_state(
                self.context.mode,
                str(self.workspace),
                opener.context.work.snapshot(),
                [c.agent_id for c in self._children.values() if not c.record.terminal],
            ),
        )
        # A forked child offers its opener's tool list so the prefix stays byte-identical;
        # its authority still decides what runs.
        fork_tools = opener.conversation.tools if request.fork_context else None
        self._build_engine(child, messages[:-1], fork_tools=fork_tools)
        child.first_prompt = messages[-1]["content"]
        return child

    def _build_engine(
        self,
        child: Child,
        messages: list[dict[str, Any]],
        *,
        fork_tools: list[dict[str, Any]] | None = None,
        written: int = 0,
    ) -> None:
        """The child's engine, its context and (for max_depth > 0) its own seat."""
        record = child.record
        authority = Authority.from_json(record.authority)
        context = replace(
            self.context,
            workspace=Path(record.workspace),
            session_id=f"agent:{record.agent_id}",
            work=WorkState(),
            journal=type(self.context.journal)(),
            authority=authority,
        )
        inbox = Inbox()
        meter = UsageMeter(parent=child.opener.meter)
        tools = self.tools_factory()
        seat = None
        conversation = Conversation(messages)
        if record.max_depth > 0:
            seat = Opener(
                record.agent_id, conversation, inbox, meter, context, record.max_depth - 1
            )
            tools += self.agent_tools_factory(self, seat)
        registry = ToolRegistry(tools)
        definition = self.definitions.definitions.get(record.type)
        child.seat = seat
        child.engine = Engine(
            client=self.client.clone(),
            tools=registry,
            context=context,
            conversation=conversation,
            offered_tools=fork_tools or launch.offered_tools(registry, authority),
            emit=lambda event: self.progress.on_event(child, event),
            model=record.model,
            max_steps=(definition.max_steps if definition else None) or DEFAULT_CHILD_STEPS,
            recorder=launch.ChildRecorder(self.store, record, written),
            inbox=inbox,
            meter=meter,
            hold=self.hold_for(seat) if seat is not None else lambda: False,
            request_timeout_secs=float(self.api_timeout),
            requester=f"{record.nickname} ({record.name}, {record.type})",
        )

    def stop(self, child: Child, state: ChildState, message: str) -> None:
        self.runner.stop(child, state, message)

    def _stalled(self, child: Child) -> None:
        self.stop(child, ChildState.CANCELLED, stall_message(self.heartbeat_timeout))

    async def close(self, reference: Any, opener: Opener | None = None) -> dict[str, Any]:
        child = self.find(reference, opener)
        if not child.record.terminal:
            self.stop(child, ChildState.CANCELLED, "cancelled")
            await child.done.wait()
        elif child.record.status == "interrupted" and child.task is None:
            # Closing a continuable child from an earlier run: it will not be continued.
            self.lifecycle.move(child.record, ChildState.QUEUED, "closed by its opener")
            self.lifecycle.move(child.record, ChildState.CANCELLED, "cancelled")
        return self.projection(child)

    async def shutdown(self) -> None:
        """Quitting: running children are recorded interrupted("parent session closed")."""
        for child in self._children.values():
            self.stop(child, ChildState.INTERRUPTED, delivery.SESSION_CLOSED)
        pending = [c.done.wait() for c in self._children.values() if c.task is not None]
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
        if message is not None:
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
            with self._waiting(opener):
                try:
                    await asyncio.wait_for(asyncio.shield(child.done.wait()), timeout_ms / 1000)
                except TimeoutError:
                    extra["timed_out"] = True
        return self.projection(child, **extra)

    def _waiting(self, opener: Opener | None) -> _Wait:
        """A child blocked in agent_eval waits on another: not a stall."""
        waiter = self._children.get(opener.agent_id or "") if opener is not None else None
        return _Wait(self, waiter)

    def _continue(self, child: Child, opener: Opener | None) -> dict[str, Any]:
        record = child.record
        if record.status != "interrupted" or record.checkpoint is None:
            return {"resumed": False, "reason": f"agent is {record.status}; nothing to continue"}
        try:
            self.admission.check_capacity(self.live_count())
        except SpawnError:
            return {"resumed": False, "reason": "sub-agent limit reached"}
        reason = record.error or "interrupted"
        if opener is not None:
            child.opener = opener  # its completion goes to whoever continued it
        if child.engine is None:
            self._rebuild(child)
        else:
            child.engine.client = self.client.clone()
        self.lifecycle.move(record, ChildState.QUEUED, "continuing from its checkpoint")
        record.owner_pid = os.getpid()
        record.session_boot_id = self.session_boot_id
        self.runner.start(child, resume_note=CONTINUE_NOTE.format(reason=reason))
        return {"resumed": True}

    def _rebuild(self, child: Child) -> None:
        """A child from an earlier run: its engine again, from its persisted transcript."""
        record = child.record
        saved = self.store.load_transcript(record.agent_id)
        count = (record.checkpoint or {}).get("messages", len(saved))
        messages = launch.complete_prefix(saved[: int(count)])
        if len(messages) < len(saved):
            # Rewrite the transcript so it stays the conversation the child continues.
            self.store.rewrite_transcript(record.agent_id, messages)
        self._build_engine(child, messages, written=len(messages))

    # -- persistence -----------------------------------------------------------------------------

    def _persist(self, record: WorkerRecord, urgent: bool) -> None:
        self.writer.mark_dirty(0 if urgent else FLUSH_DELAY_SECS)

    def _all_records(self) -> list[WorkerRecord]:
        current = [c.record for c in self._children.values()]
        ids = {r.agent_id for r in current}
        return [r for r in self._prior if r.agent_id not in ids] + current

    async def flush(self) -> None:
        await self.writer.flush()


class _Wait:
    """Marks a child as waiting on other children for the length of a `with` block."""

    def __init__(self, manager: SubAgentManager, child: Child | None) -> None:
        self.manager = manager
        self.child = child

    def __enter__(self) -> None:
        if self.child is not None and not self.child.record.terminal:
            self.manager.lifecycle.move(
                self.child.record, ChildState.WAITING_FOR_CHILDREN, "waiting in agent_eval"
            )

    def __exit__(self, *exc_info: object) -> None:
        if self.child is not None and not self.child.record.terminal:
            self.manager.lifecycle.move(self.child.record, ChildState.RUNNING_TOOL)
            self.manager.liveness.touch(self.child)


def _matches(value: str, reference: str) -> bool:
    return value == reference or value.lower() == reference.lower()
