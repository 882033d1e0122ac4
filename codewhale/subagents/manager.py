"""The SubAgentManager: the one owner of every child's record and lifecycle.

Children are detached background tasks: cancelling the parent's turn does not
touch them. Everything a child does is published on the mailbox in order;
the UI reads immutable snapshots; records are persisted with coalesced writes.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from codewhale.config_models import SubagentsConfig
from codewhale.engine import events
from codewhale.engine.loop import Engine
from codewhale.engine.prompt import git_branch
from codewhale.handles import HandleStore
from codewhale.permissions import Mode
from codewhale.providers.client import ChatClient
from codewhale.providers.settings import ProviderSettings
from codewhale.providers.types import Usage
from codewhale.subagents import child as child_setup
from codewhale.subagents.contract import REMINDER, parse_report, verify_claims
from codewhale.subagents.definitions import DefinitionSet
from codewhale.subagents.mailbox import Mailbox
from codewhale.subagents.records import (
    WHALES,
    AgentSnapshot,
    WorkerRecord,
    new_agent_id,
    now_ms,
    snapshot_of_record,
)
from codewhale.subagents.spawn import SpawnError, SpawnRequest, first_of, parse_spawn
from codewhale.subagents.store import (
    FLUSH_DELAY_SECS,
    CoalescedWriter,
    StateFileError,
    SubagentStore,
    reconcile_dead_owners,
)
from codewhale.tools.base import Tool, ToolContext
from codewhale.tools.registry import ToolRegistry

QUEUED_TEXT = "queued: waiting for a sub-agent launch slot"
QUEUE_HEARTBEAT_SECS = 10.0
DEFAULT_CHILD_STEPS = 60
CONTINUE_NOTE = (
    "Your previous model request timed out. Continue the assignment from where you stopped."
)
PROGRESS_INTERVAL_SECS = 0.25


@dataclass
class _Child:
    record: WorkerRecord
    request: SpawnRequest
    engine: Engine = field(init=False)
    task: asyncio.Task[None] | None = None
    done: asyncio.Event = field(default_factory=asyncio.Event)
    last_progress: float = field(default_factory=time.monotonic)
    stop: tuple[str, str] | None = None  # (status, message) set by whoever stops it
    # The engine that opened it (the parent, or a child with max_depth > 0): completions
    # and token usage go back to it.
    owner: Engine | None = None
    last_progress_publish: float = 0.0
    pending_first_prompt: str | None = None


class SubAgentManager:
    def __init__(
        self,
        *,
        workspace: Path,
        client: ChatClient,
        settings: ProviderSettings,
        config: SubagentsConfig,
        tools_factory: Callable[[], list[Tool]],
        handles: HandleStore,
        definitions: DefinitionSet,
        parent_mode: Callable[[], Mode],
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
        self.tools_factory = tools_factory
        self.handles = handles
        self.definitions = definitions
        self.parent_mode = parent_mode
        self.emit = emit
        self.memory_text = memory_text
        self.max_concurrent = config.max_concurrent
        self.heartbeat_timeout = heartbeat_timeout_secs or config.heartbeat_timeout_secs
        self.api_timeout = api_timeout_secs or config.api_timeout_secs
        self.queue_heartbeat = queue_heartbeat_secs
        self.session_boot_id = "boot_" + secrets.token_hex(6)
        self.mailbox = Mailbox()
        self.store = SubagentStore(self.workspace)
        self._launch = asyncio.Semaphore(config.launch_concurrency or config.max_concurrent)
        self._children: dict[str, _Child] = {}
        self._parent_engine: Engine | None = None
        self._branch = git_branch(self.workspace)
        self._monitor: asyncio.Task[None] | None = None
        self.state_error: str | None = None
        self._prior = reconcile_dead_owners(self._load_prior())
        self.writer = CoalescedWriter(self.store, self._all_records, enabled=self._persisting)
        self.child_usage = Usage()

    # -- wiring ------------------------------------------------------------------------

    def attach_parent(self, engine: Engine) -> None:
        """The parent engine whose turn waits for children and receives completions."""
        self._parent_engine = engine
        engine.children_pending = lambda: self.has_live_children_of(engine)

    def _persisting(self) -> bool:
        return self.state_error is None

    def _load_prior(self) -> list[WorkerRecord]:
        try:
            return self.store.load()
        except StateFileError as error:
            # Keep working, but never overwrite a file we could not read.
            self.state_error = f"{error}; sub-agent records will not be saved this session"
            return []

    # -- reading -----------------------------------------------------------------------

    def live_count(self) -> int:
        return sum(1 for c in self._children.values() if c.task is not None and not c.task.done())

    def has_live_children(self) -> bool:
        return self.live_count() > 0

    def has_live_children_of(self, engine: Engine) -> bool:
        return any(
            c.owner is engine and c.task is not None and not c.task.done()
            for c in self._children.values()
        )

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

    def find(self, reference: Any) -> _Child:
        if not isinstance(reference, str) or not reference.strip():
            raise SpawnError("agent_eval/agent_close need 'name' or 'agent_id'")
        reference = reference.strip()
        if reference in self._children:
            return self._children[reference]
        matches = [c for c in self._children.values() if c.record.name == reference]
        if len(matches) > 1:
            raise SpawnError(f"Agent session name '{reference}' is ambiguous; use an agent_id")
        if not matches:
            raise SpawnError(f"Agent session {reference} not found")
        return matches[0]

    def projection(self, child: _Child, **extra: Any) -> dict[str, Any]:
        handle = self.handles.put_file(
            f"agent:{child.record.agent_id}",
            "transcript",
            self.store.transcript_path(child.record.agent_id),
        )
        return child.record.projection(transcript_handle=handle, **extra)

    # -- opening -----------------------------------------------------------------------

    def open(self, arguments: dict[str, Any], *, opener: Engine | None = None) -> dict[str, Any]:
        """Validate, admit and start a child; returns its projection at once."""
        all_tools = [tool.name for tool in self.tools_factory()]
        request = parse_spawn(
            arguments,
            workspace=self.workspace,
            definitions=self.definitions,
            known_tools={*all_tools, "agent_open", "agent_eval", "agent_close"},
            config=self.config,
            settings=self.settings,
        )
        running = self.live_count()
        if running >= self.max_concurrent:
            raise SpawnError(
                f"Sub-agent limit reached (max {self.max_concurrent}, running {running}). "
                "Close or wait for an existing agent to finish."
            )
        if request.name is not None:
            self._check_name_free(request.name)
        child = self._create_child(request, all_tools, opener)
        child.owner = opener or self._parent_engine
        self._children[child.record.agent_id] = child
        self._start(child)
        self._publish(child, "queued", message=QUEUED_TEXT, worker_status="queued")
        spawner = self._child_of(child.owner)
        if spawner is not None:
            self._publish(spawner, "child_spawned", child_agent_id=child.record.agent_id)
        return self.projection(child)

    def _check_name_free(self, name: str) -> None:
        for other in self._children.values():
            if other.record.name == name and not other.record.terminal:
                age = (now_ms() - other.record.created_at_ms) // 1000
                raise SpawnError(
                    f"Agent session name '{name}' is already used by {other.record.agent_id} "
                    f"({other.record.status}, {age}s old)"
                )

    def _create_child(
        self, request: SpawnRequest, all_tools: list[str], opener: Engine | None
    ) -> _Child:
        agent_id = new_agent_id()
        record = WorkerRecord(
            run_id="run_" + secrets.token_hex(6),
            agent_id=agent_id,
            name=request.name or agent_id,
            nickname=WHALES[len(self._children) % len(WHALES)],
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
        )
        record.artifacts["transcript"] = str(self.store.transcript_path(agent_id))
        record.add_event("queued", QUEUED_TEXT)
        allowed = child_setup.allowed_tool_names(
            request, [*all_tools, "agent_open", "agent_eval", "agent_close"]
        )
        tools = self.tools_factory()
        if request.max_depth > 0:
            from codewhale.subagents.tools import agent_tools

            tools += agent_tools(self, depth=request.max_depth - 1)
        registry = ToolRegistry(tools)
        mode = self.parent_mode()
        context = ToolContext(
            workspace=request.workspace,
            session_id=f"agent:{agent_id}",
            handles=self.handles,
            mode=mode,
            shell_ceiling=child_setup.shell_ceiling(request.role),
            posture_name=request.type_name,
        )
        prompt = child_setup.system_prompt(request, self.memory_text())
        parent_prefix = None
        offered = [registry.get(name).schema() for name in allowed if name in registry]
        if request.fork_context and opener is not None:
            parent_prefix = opener.messages[: opener.last_request_size]
            offered = opener.schemas()  # same tool list keeps the prefix byte-identical
        messages = child_setup.first_messages(
            request,
            prompt,
            parent_prefix=parent_prefix,
            fork_state_text=child_setup.fork_state(
                mode,
                str(self.workspace),
                opener.context.work.snapshot() if opener is not None else {},
                [c.record.agent_id for c in self._children.values() if not c.record.terminal],
            ),
        )
        child = _Child(record=record, request=request)
        child.engine = Engine(
            client=self.client.clone(),
            tools=registry,
            context=context,
            system_prompt=prompt,
            emit=lambda event: self._on_child_event(child, event),
            model=request.model,
            max_steps=(request.definition.max_steps if request.definition else None)
            or DEFAULT_CHILD_STEPS,
            messages=messages[:-1],
            request_timeout_secs=float(self.api_timeout),
            offered_tools=offered,
            tool_policy=child_setup.tool_policy(request, allowed),
            requester=f"{record.nickname} ({record.name}, {record.type})",
            recorder=child_setup.ChildRecorder(self.store, record),
        )
        child.pending_first_prompt = messages[-1]["content"]
        if request.max_depth > 0:
            from codewhale.subagents.tools import bind_opener

            bind_opener(tools, child.engine)
            engine = child.engine
            engine.children_pending = lambda: self.has_live_children_of(engine)
        return child

    def _child_of(self, engine: Engine | None) -> _Child | None:
        return next((c for c in self._children.values() if c.engine is engine), None)

    # -- running -------------------------------------------------------------------------

    async def _run(self, child: _Child, *, resume: bool = False) -> None:
        record = child.record
        try:
            async with self._launch_slot(child):
                record.status = "running"
                record.started_at_ms = record.started_at_ms or now_ms()
                self._set_worker(child, "starting")
                self._publish(child, "started", message="started", worker_status="starting")
                child.last_progress = time.monotonic()
                if resume:
                    result = await child.engine.continue_turn(CONTINUE_NOTE)
                else:
                    result = await child.engine.run_turn(child.pending_first_prompt or "")
                if result.status == "completed":
                    result = await self._remind_if_malformed(child, result)
                    report = parse_report(result.final_text)
                    if report["well_formed"]:
                        # git status runs in a thread: a blocking subprocess would stall
                        # every other child's stream for its duration.
                        record.verification = await asyncio.to_thread(
                            verify_claims, Path(record.workspace), report
                        )
                self._finish(child, result)
        except asyncio.CancelledError:
            self._finish_stopped(child)

    def _start(self, child: _Child, *, resume: bool = False) -> None:
        child.done = asyncio.Event()
        child.task = asyncio.get_running_loop().create_task(self._run(child, resume=resume))
        child.task.add_done_callback(lambda _: self._settle(child))
        self._ensure_monitor()

    def _settle(self, child: _Child) -> None:
        """Runs when the task ends, even one cancelled before its first line executed."""
        if not child.record.terminal:
            self._finish_stopped(child)
        child.done.set()
        self._mark_dirty(delay=0)
        # Its connections are idle now; a continuation opens fresh ones.
        asyncio.get_running_loop().create_task(child.engine.client.aclose())

    @contextlib.asynccontextmanager
    async def _launch_slot(self, child: _Child):
        acquire = asyncio.ensure_future(self._launch.acquire())
        try:
            while True:
                done, _ = await asyncio.wait({acquire}, timeout=self.queue_heartbeat)
                if done:
                    break
                self._publish(child, "progress", message=QUEUED_TEXT, worker_status="queued")
        except asyncio.CancelledError:
            if acquire.done() and not acquire.cancelled():
                self._launch.release()
            else:
                acquire.cancel()
            raise
        try:
            yield
        finally:
            self._launch.release()

    async def _remind_if_malformed(self, child: _Child, result):
        report = parse_report(result.final_text)
        if report["well_formed"] or child.engine.max_steps - result.steps < 1:
            return result
        child.engine.max_steps -= result.steps
        retry = await child.engine.run_turn(REMINDER)
        if retry.status != "completed":
            return result
        retry.steps += result.steps
        return retry

    def _finish(self, child: _Child, result) -> None:
        record = child.record
        if child.stop is not None:
            self._finish_stopped(child)
            return
        record.steps_taken = max(record.steps_taken, result.steps)
        record.finished_at_ms = now_ms()
        if result.status == "completed":
            record.status = "completed"
            record.result = result.final_text
            record.report = parse_report(result.final_text)
            kind, message = "completed", "completed"
        elif result.status == "timed_out":
            record.status = "interrupted"
            record.error = f"{result.error}; checkpoint preserved for continuation"
            kind, message = "interrupted", record.error
        else:
            record.status = "failed"
            record.error = result.error or f"turn ended with status {result.status}"
            record.result = result.final_text or None
            kind, message = "failed", record.error
        self._set_worker(child, record.status)
        record.add_event(record.status, message)
        self._publish(child, kind, message=message, worker_status=record.status)
        self._deliver_completion(child)

    def _finish_stopped(self, child: _Child) -> None:
        record = child.record
        status, message = child.stop or ("cancelled", "cancelled")
        record.status = status
        record.finished_at_ms = now_ms()
        record.result = message if status == "cancelled" else record.result
        record.error = message if status != "cancelled" else None
        self._set_worker(child, status)
        record.add_event(status, message)
        self._publish(child, status, message=message, worker_status=status)
        self._deliver_completion(child)

    def _deliver_completion(self, child: _Child) -> None:
        parent = child.owner
        if parent is None:
            return
        record = child.record
        summary = " ".join(
            ((record.report or {}).get("summary") or record.result or record.error or "").split()
        )
        line = f"{record.nickname} ({record.agent_id}, {record.type}) {record.status}: {summary}"
        done = {
            "agent_id": record.agent_id,
            "type": record.type,
            "status": record.status,
            "summary_complete": bool((record.report or {}).get("well_formed")),
            "next_action": _next_action(record),
        }
        parent.inject_runtime_event(
            '<codewhale:runtime_event kind="subagent_completion">\n'
            "This is an internal runtime event, not a message from the user.\n"
            f"{line[:240]}\n"
            f"<codewhale:subagent.done>{json.dumps(done)}</codewhale:subagent.done>\n"
            "</codewhale:runtime_event>"
        )

    # -- child events ----------------------------------------------------------------------

    def _on_child_event(self, child: _Child, event: events.Event) -> None:
        child.last_progress = time.monotonic()
        record = child.record
        if isinstance(event, events.ApprovalRequested):
            self._set_worker(child, "waiting_for_user")
            self.emit(event)  # the parent's approval channel resolves it
        elif isinstance(event, events.ApprovalResolved):
            self._set_worker(child, "running_tool")
            self.emit(event)
        elif isinstance(event, events.ToolCallStarted):
            record.activity = f"step {record.steps_taken} · {event.name}"
            self._set_worker(child, "running_tool")
            record.add_event(
                "running_tool",
                event.summary or event.name,
                step=record.steps_taken,
                tool=event.name,
            )
            self._publish(
                child,
                "tool_call_started",
                tool=event.name,
                summary=event.summary,
                step=record.steps_taken,
            )
        elif isinstance(event, events.ToolCallFinished):
            self._publish(
                child, "tool_call_completed", tool=event.name, ok=event.ok, step=record.steps_taken
            )
        elif isinstance(event, events.AssistantMessage):
            record.steps_taken += 1
            self._set_worker(child, "running")
        elif isinstance(event, (events.TurnStarted, events.SteerAccepted)):
            self._set_worker(child, "model_wait")
        elif isinstance(event, events.AssistantDelta | events.ReasoningDelta):
            self._set_worker(child, "model_wait")
            now = time.monotonic()
            if now - child.last_progress_publish >= PROGRESS_INTERVAL_SECS:
                child.last_progress_publish = now
                record.activity = f"step {record.steps_taken + 1} · writing"
                self._publish(
                    child, "progress", message=record.activity, text_tail=event.text[-200:]
                )
        elif isinstance(event, events.UsageEvent):
            usage = Usage(event.input, event.output, event.cache_hit, event.cache_miss)
            for key, value in (
                ("input", event.input),
                ("output", event.output),
                ("cache_hit", event.cache_hit),
                ("cache_miss", event.cache_miss),
            ):
                record.usage[key] += value
            self.child_usage += usage
            if child.owner is not None:
                child.owner.add_external_usage(usage)
            self._publish(child, "token_usage", **dict(record.usage))
        self._mark_dirty()

    def _set_worker(self, child: _Child, status: str) -> None:
        child.record.worker_status = status
        child.record.updated_at_ms = now_ms()

    def _publish(self, child: _Child, kind: str, **data: Any) -> None:
        envelope = self.mailbox.publish(kind, child.record.agent_id, **data)
        self.emit(events.AgentEvent(envelope=envelope))

    # -- stopping ----------------------------------------------------------------------------

    def stop(self, child: _Child, status: str, message: str) -> None:
        if child.record.terminal or child.task is None or child.task.done():
            return
        child.stop = (status, message)
        if child.engine.running:
            child.engine.cancel()
        else:
            child.task.cancel()

    async def close(self, reference: Any) -> dict[str, Any]:
        child = self.find(reference)
        if not child.record.terminal:
            self.stop(child, "cancelled", "cancelled")
            await child.done.wait()
        return self.projection(child)

    async def shutdown(self) -> None:
        """Quitting: running children are recorded interrupted("parent session closed")."""
        for child in self._children.values():
            self.stop(child, "interrupted", "parent session closed")
        pending = [c.done.wait() for c in self._children.values() if c.task is not None]
        if pending:
            await asyncio.gather(*pending)
        if self._monitor is not None:
            self._monitor.cancel()
        await self.flush()

    def _ensure_monitor(self) -> None:
        if self._monitor is None or self._monitor.done():
            self._monitor = asyncio.get_running_loop().create_task(self._watch_heartbeats())

    async def _watch_heartbeats(self) -> None:
        interval = min(max(self.heartbeat_timeout / 4, 0.05), 5.0)
        while self.has_live_children():
            await asyncio.sleep(interval)
            now = time.monotonic()
            for child in list(self._children.values()):
                if child.record.status != "running" or child.stop is not None:
                    continue
                if now - child.last_progress > self.heartbeat_timeout:
                    self.stop(
                        child,
                        "cancelled",
                        f"Auto-cancelled after {self.heartbeat_timeout:g}s without "
                        "sub-agent progress.",
                    )

    # -- agent_eval ----------------------------------------------------------------------------

    async def evaluate(self, arguments: dict[str, Any]) -> dict[str, Any]:
        child = self.find(first_of(arguments, "agent_id", "name", "agent_name", "id"))
        extra: dict[str, Any] = {}
        message = first_of(arguments, "message", "input")
        if message is not None:
            extra["message_delivery"] = self._deliver(
                child, str(message), bool(arguments.get("interrupt"))
            )
        continuing = bool(arguments.get("continue"))
        if continuing:
            extra["continuation"] = self._continue(child)
        block = arguments.get("block", continuing)
        if block and not child.record.terminal:
            timeout_ms = arguments.get("timeout_ms", 30_000)
            if not isinstance(timeout_ms, int) or isinstance(timeout_ms, bool):
                timeout_ms = 30_000
            timeout_ms = min(max(timeout_ms, 1_000), 3_600_000)
            try:
                await asyncio.wait_for(asyncio.shield(child.done.wait()), timeout_ms / 1000)
            except TimeoutError:
                extra["timed_out"] = True
        return self.projection(child, **extra)

    def _deliver(self, child: _Child, message: str, interrupt: bool) -> dict[str, Any]:
        if child.record.terminal:
            return {
                "delivered": False,
                "reason": "session already terminated; follow-up not delivered",
            }
        if interrupt:
            child.engine.clear_steers()
        child.engine.steer(message)
        return {"delivered": True, "interrupted_pending": interrupt}

    def _continue(self, child: _Child) -> dict[str, Any]:
        record = child.record
        if record.status != "interrupted" or record.checkpoint is None:
            return {"resumed": False, "reason": f"agent is {record.status}; nothing to continue"}
        if self.live_count() >= self.max_concurrent:
            return {"resumed": False, "reason": "sub-agent limit reached"}
        record.status = "pending"
        record.error = None
        record.finished_at_ms = None
        child.stop = None
        child.engine.client = self.client.clone()
        self._start(child, resume=True)
        return {"resumed": True}

    # -- persistence -----------------------------------------------------------------------------

    def _mark_dirty(self, delay: float = FLUSH_DELAY_SECS) -> None:
        self.writer.mark_dirty(delay)

    def _all_records(self) -> list[WorkerRecord]:
        current = [c.record for c in self._children.values()]
        ids = {r.agent_id for r in current}
        return [r for r in self._prior if r.agent_id not in ids] + current

    async def flush(self) -> None:
        await self.writer.flush()


def _next_action(record: WorkerRecord) -> str:
    if record.status == "completed":
        return "review the report and verify claimed side effects"
    if record.status == "interrupted" and record.checkpoint:
        return "agent_eval with continue: true to resume, or agent_close"
    return "read the error; reopen with a corrected assignment if needed"
