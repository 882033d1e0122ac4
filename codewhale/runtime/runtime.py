"""The Runtime: what the TUI and `codewhale exec` may do to a conversation.

Every operation a front end needs is a method here, so the rules (which state a
change touches, what gets persisted, what children see) live in one place rather
than in each front end.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from codewhale.config import LoadedConfig
from codewhale.engine.compaction import Compaction, CompactionError
from codewhale.engine.conversation import UsageMeter
from codewhale.engine.events import ErrorEvent, Event
from codewhale.engine.loop import Engine, TurnResult
from codewhale.engine.turn_hooks import (
    keep_going,
    prompt_submitted,
    session_end,
    session_start,
    with_context,
)
from codewhale.hooks.listing import hook_lines
from codewhale.hooks.settings import HookEntry
from codewhale.mcp.hub import McpHub, ServerStatus
from codewhale.mcp.specs import ServerSpec
from codewhale.permissions import Mode
from codewhale.providers.client import ChatClient
from codewhale.providers.local_server import LocalServer
from codewhale.providers.settings import ProviderSettings
from codewhale.providers.types import Usage
from codewhale.rlm.sessions import RlmManager
from codewhale.rules.ruleset import PermissionRules
from codewhale.runtime.background import TaskOutput, TaskSnapshot, output_of, snapshot_of
from codewhale.runtime.events import BackgroundTaskChanged, StorageError
from codewhale.runtime.relay import RelayError, earlier_handoff, save_handoff
from codewhale.runtime.rewind import Checkpoints, RewindOutcome, RewindPoint, title_of
from codewhale.runtime.slash_prompts import relay_prompt
from codewhale.runtime.spending import AgentSpending, spending_of
from codewhale.sessions.store import SessionInfo
from codewhale.sessions.writer import SaveFailure, SessionWriter
from codewhale.skills import SkillSet
from codewhale.subagents.card import transcript_lines
from codewhale.subagents.catalog import TypeEntry
from codewhale.subagents.definition_trust import pick_held, trust_held
from codewhale.subagents.manager import SubAgentManager
from codewhale.subagents.records import AgentSnapshot
from codewhale.subagents.spawn import SpawnError, validate_model
from codewhale.tools.background import BackgroundTask
from codewhale.tools.file_timeline import apply_restore, plan_restore
from codewhale.tools.session_changes import FileChange, compare


class RlmSummary(NamedTuple):
    name: str
    context_chars: int
    evals: int
    calls: int


class RuntimeRequestError(ValueError):
    """A front-end request the runtime refuses; the message says why and what to do."""


@dataclass
class Runtime:
    engine: Engine
    info: SessionInfo
    writer: SessionWriter
    client: ChatClient
    loaded: LoadedConfig
    manager: SubAgentManager
    rlm: RlmManager
    mcp: McpHub
    warnings: list[str] = field(default_factory=list)
    local_server: LocalServer | None = None
    # Whether it goes on with an earlier session's conversation (--continue, --resume).
    resumed: bool = False
    # The skills found for this workspace (`/skills`, `/<name>`, the `skill` tool).
    skills: SkillSet = field(default_factory=SkillSet)
    _closed: bool = False
    # The SessionStart hooks still to run before the next prompt: their `source`.
    _starting: str | None = None
    # The totals this process started from (a resumed session's earlier spending).
    _opened_with: dict[str, Any] = field(default_factory=dict)
    # Write failures not yet told to the front end (one from opening the session file).
    _unreported: list[SaveFailure] = field(default_factory=list)
    # The prompts of this run, for /rewind.
    _checkpoints: Checkpoints = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._opened_with = self.engine.meter.to_json()
        self._starting = "resume" if self.resumed else "startup"
        changes = self.engine.context.changes
        timeline = changes.timeline if changes is not None else None
        self._checkpoints = Checkpoints(self.engine.conversation, timeline)
        self.engine.on_prompt = self._checkpoints.prompt_sent
        # A write failure is reported as it happens; one from opening (a read-only disk)
        # with the first turn, so that `exec --json`'s session record still comes first.
        if self.writer.failure is not None:
            self._unreported.append(self.writer.failure)
        self.writer.on_failure = self._report_storage_failure
        # Front ends show background tasks as they start and end (the sidebar, exec --json).
        self.engine.context.background.on_change = self._report_background_change

    # -- what front ends read --------------------------------------------------------------

    @property
    def settings(self) -> ProviderSettings:
        return self.client.settings

    @property
    def workspace(self) -> Path:
        return self.engine.context.workspace

    @property
    def sandboxed(self) -> bool:
        """Whether shell commands and RLM code run in the OS sandbox."""
        return self.rlm.sandboxed

    @property
    def mode(self) -> Mode:
        return self.engine.context.mode

    @property
    def model(self) -> str:
        return self.engine.model or self.settings.model

    @property
    def messages(self) -> list[dict[str, Any]]:
        return self.engine.messages

    @property
    def usage(self) -> Usage:
        """Every token of the session: its own requests, children at any depth, RLM calls."""
        return self.engine.usage

    @property
    def cost_usd(self) -> float | None:
        """Dollars spent so far, where the provider's prices are known (None otherwise)."""
        return self.engine.meter.cost_usd

    def spent_this_run(self) -> UsageMeter:
        """Tokens and cost since this process opened the session (not a resumed past)."""
        return self.engine.meter.since(self._opened_with)

    @property
    def turn_running(self) -> bool:
        return self.engine.running

    def storage_problems(self) -> list[str]:
        """One line per kind of file this session could not write (its session file, its
        sub-agents' state), e.g. `could not save the session to PATH: No space left on
        device`; empty when everything was saved."""
        problems = []
        if self.writer.failure is not None:
            problems.append(self.writer.failure.line())
        if self.manager.write_failure is not None:
            problems.append(str(self.manager.write_failure))
        return problems

    def _report_storage_failure(self, failure: SaveFailure) -> None:
        self.engine.emit(
            StorageError(path=str(failure.path), reason=failure.reason, message=failure.line())
        )

    def _report_earlier_failures(self) -> None:
        while self._unreported:
            self._report_storage_failure(self._unreported.pop(0))

    def context_use(self) -> tuple[int, int]:
        """(tokens the next request would carry, the model's context window)."""
        return self.engine.context_use()

    def tools_context(self) -> int:
        """Tokens of `context_use` that every request carries besides the conversation:
        the tool schemas offered."""
        engine = self.engine
        return engine.compactor.tools_size(engine.schemas())

    def work(self) -> dict[str, Any]:
        return self.engine.context.work.snapshot()

    def agents(self) -> tuple[AgentSnapshot, ...]:
        return self.manager.snapshot()

    def agent_snapshot(self, agent_id: str) -> AgentSnapshot | None:
        return self.manager.snapshot_of(agent_id)

    def agent_records(self) -> list[dict[str, Any]]:
        """Every child's record as plain data, as `codewhale agents list --json` gives it."""
        return self.manager.records()

    def agent_streamed_text(self, agent_id: str) -> str:
        """What the child's current model request has streamed so far."""
        return self.manager.streamed_text(agent_id)

    def agent_last_output(self, agent_id: str) -> float | None:
        """When the child last streamed anything (wall clock), while it could."""
        return self.manager.last_output_at(agent_id)

    def agent_cost(self, agent_id: str) -> float | None:
        return self.manager.cost_of(agent_id)

    def children_waited_on(self, since: float) -> list[AgentSnapshot]:
        """The children a wait that started at `since` is for."""
        return self.manager.waited_on(since)

    def live_children(self) -> int:
        return self.manager.live_count()

    def rlm_summaries(self) -> list[RlmSummary]:
        """Each open RLM session: its name, context size, evals and sub-calls so far."""
        return [
            RlmSummary(name, len(s.context), s.evals, s.kernel.rpc_count)
            for name, s in self.rlm.sessions.items()
        ]

    def agent_spending(self) -> list[AgentSpending]:
        """Tokens and cost of each child (its own children included), in delegation order."""
        return spending_of(self.manager.roster)

    def agent_types(self) -> list[TypeEntry]:
        """Roles and agent definitions as `codewhale agents types` lists them."""
        return self.manager.catalog.entries()

    def trust_agent_types(self, names: Sequence[str]) -> list[str]:
        """Trust these project agent definitions here (as `codewhale agents trust` does);
        this session uses them from its next agent_open. Returns the names trusted."""
        definitions = self.manager.definitions
        try:
            chosen = pick_held(definitions, names)
        except LookupError as error:
            raise RuntimeRequestError(str(error)) from None
        trust_held(definitions, self.workspace, chosen)
        return [hold.definition.name for hold in chosen]

    # -- turns -----------------------------------------------------------------------------

    async def submit(self, prompt: str) -> TurnResult:
        """Run one user turn (and anything queued behind it) to its end."""
        self._report_earlier_failures()
        # The model is offered the MCP servers' tools from its first request on.
        await self.mcp.ready()
        try:
            return await self._hooked_turn(prompt)
        finally:
            self.writer.record_meter(self.engine.meter.to_json())

    async def _hooked_turn(self, prompt: str) -> TurnResult:
        """The turn between its hooks: SessionStart (once per start, resume, clear or
        compaction), UserPromptSubmit (may refuse the prompt or add context) and Stop (may
        keep the turn going)."""
        hooks = self.engine.context.hooks
        context = list(await session_start(hooks, self._starting, self.model))
        self._starting = None
        submitted = await prompt_submitted(hooks, prompt)
        if submitted.refusal:
            self.engine.emit(ErrorEvent(message=submitted.refusal))
            return TurnResult("failed", 0, Usage(), error=submitted.refusal)
        result = await self.engine.run_turn(with_context(prompt, [*context, *submitted.context]))
        return await keep_going(hooks, result, self.engine.continue_turn)

    def steer(self, text: str) -> None:
        """A user message for the running turn's next safe point, in the order typed."""
        self.engine.steer(text)

    def queue(self, text: str) -> None:
        """A prompt to run as its own turn once the current one ends."""
        self.engine.queue(text)

    def cancel_turn(self) -> bool:
        """Stop the running turn (children keep running); False if none was running."""
        return self.engine.cancel()

    # -- settings that reach the whole tree ------------------------------------------------------

    def set_mode(self, mode: Mode) -> None:
        """Switch the session's mode; every running child sees it at its next tool call."""
        self.engine.context.modes.current = mode

    @property
    def accept_edits(self) -> bool:
        """Agent mode's "accept edits" posture: file changes run without asking."""
        return self.engine.context.modes.accept_edits

    def set_accept_edits(self, on: bool) -> None:
        """Turn the posture on or off for the whole tree, running children included."""
        self.engine.context.modes.accept_edits = on

    def set_model(self, model: str) -> None:
        try:
            validate_model(model, self.settings)
        except SpawnError as error:
            raise RuntimeRequestError(
                f"{error}. To use another model, set provider = custom and base_url (or "
                "--base-url) to an endpoint that serves it."
            ) from None
        self.engine.model = model

    def clear(self) -> None:
        """Start the conversation afresh (system prompt kept); children keep running."""
        if self.engine.running:
            raise RuntimeRequestError("a turn is running; press Esc first, then /clear")
        self.engine.conversation.clear()
        self.writer.record_clear()
        self._starting = "clear"

    async def compact(self) -> Compaction:
        """Summarise the older turns into one message now; the newest stay as they are."""
        if self.engine.running:
            raise RuntimeRequestError(
                "a turn is running (it compacts by itself when the context fills up); "
                "press Esc first, then /compact"
            )
        try:
            done = await self.engine.compact()
        except CompactionError as error:
            raise RuntimeRequestError(f"nothing was compacted: {error}") from None
        self._starting = "compact"
        return done

    async def revert(self, turns: int) -> str:
        """Restore the files changed in the last `turns` turns; says which."""
        from codewhale.tools.base import ToolError
        from codewhale.tools.work import RevertTurn

        try:
            result = await RevertTurn().run({"turns": turns}, self.engine.context)
        except ToolError as error:
            raise RuntimeRequestError(str(error)) from None
        return result.output

    def rewind_points(self) -> list[RewindPoint]:
        """The prompts of this run /rewind can go back to, newest first."""
        return self._checkpoints.points()

    async def rewind(self, number: int, *, conversation: bool, files: bool) -> RewindOutcome:
        """Go back to just before prompt `number`: the conversation, the files, or both.

        Files: every write in the work tree since (the parent's, children's there, applied
        ones) is undone, except on a file changed by other means since, which is left as
        it is and named. The user's own action, so like /revert not held to the mode.
        """
        if self.engine.running:
            raise RuntimeRequestError("a turn is running; press Esc first, then /rewind")
        point = self._checkpoints.find(number)
        if point is None:
            raise RuntimeRequestError(
                f"prompt {number} is no longer in the conversation; run /rewind to pick one"
            )
        if conversation and not point.conversation:
            raise RuntimeRequestError(
                "that prompt was summarised by a compaction: only the files can go back to it"
            )
        outcome = RewindOutcome(prompt=point.text)
        if files:
            await self._rewind_files(point, outcome)
        if conversation:
            messages = self.engine.messages
            outcome.dropped_messages = len(messages) - point.index
            self.writer.record_rewind(messages, point.index, title_of(messages[: point.index]))
            self.engine.conversation.rewind(point.index)
        return outcome

    async def _rewind_files(self, point: RewindPoint, outcome: RewindOutcome) -> None:
        changes = self.engine.context.changes
        if changes is None or point.mark is None:
            raise RuntimeRequestError("this session does not record file changes to rewind")
        if live := self.manager.live_count():
            raise RuntimeRequestError(
                f"{live} sub-agent(s) still running may write files meanwhile; wait for them "
                "or cancel them (/agent cancel NAME), then /rewind"
            )
        timeline = changes.timeline
        plan = await asyncio.to_thread(plan_restore, self.workspace, timeline, point.mark)
        restored, refused = await asyncio.to_thread(apply_restore, self.workspace, plan, timeline)
        outcome.restored, outcome.skipped = restored, plan.skipped + refused
        # /revert's per-turn pre-images describe writes this has just undone.
        self.engine.context.journal.turns.clear()

    async def changes(self) -> list[FileChange]:
        """The files this session changed (the parent, and children writing in its work
        tree or applied into it), each with who changed it and its diff; read off the loop."""
        ledger = self.engine.context.changes
        if ledger is None:
            return []
        return await asyncio.to_thread(compare, self.workspace, ledger.touched(self._author_name))

    def _author_name(self, author: str) -> str:
        """A context's session id as /diff names it: "parent", or the child's nickname."""
        if not author.startswith("agent:"):
            return "parent"
        agent_id = author.removeprefix("agent:")
        snapshot = self.manager.snapshot_of(agent_id)
        return snapshot.nickname if snapshot is not None else agent_id

    def memory(self) -> tuple[bool, Path | None]:
        """Whether memory is on, and the file the model sees."""
        context = self.engine.context
        return context.memory_enabled, context.memory_file

    def relay_snapshot(self, focus: str) -> str:
        """The state of the session a /relay hand-off is written from."""
        work = self.engine.context.work
        agents = [f"{s.agent_id} {s.type} {s.status}: {s.description}" for s in self.agents()]
        return "\n".join(
            [
                f"- workspace: {self.workspace}",
                f"- mode: {self.mode.value}",
                f"- model: {self.model}",
                f"- focus: {focus.strip() or '(none given)'}",
                f"- checklist: {work.render_checklist()}",
                f"- plan: {work.render_plan() or '(none)'}",
                f"- open sub-agents: {'; '.join(agents) or 'none'}",
                f"- open RLM sessions: {', '.join(self.rlm.sessions) or 'none'}",
            ]
        )

    def relay_request(self, focus: str) -> str:
        """The prompt of a /relay: the model answers with the hand-off document."""
        snapshot = self.relay_snapshot(focus)
        return relay_prompt(focus, snapshot, earlier_handoff(self.workspace))

    def save_relay(self, result: TurnResult) -> Path:
        """Save a /relay turn's answer as the hand-off file; says why not if it cannot."""
        if result.status != "completed":
            why = f": {result.error}" if result.error else ""
            raise RuntimeRequestError(
                f"the hand-off was not written: the turn ended {result.status}{why}"
            )
        try:
            return save_handoff(self.workspace, result.final_text)
        except RelayError as error:
            raise RuntimeRequestError(f"the hand-off was not written: {error}") from None

    # -- children --------------------------------------------------------------------------

    async def agent(self, reference: str) -> dict[str, Any]:
        """One child's projection, by id, name or nickname."""
        return await self._manager_call(self.manager.evaluate({"agent_id": reference}))

    def agent_record(self, reference: str) -> dict[str, Any]:
        """One child's record (as `codewhale agents show` reads it), by id, name or nickname."""
        try:
            child = self.manager.find(reference)
        except SpawnError as error:
            raise RuntimeRequestError(str(error)) from None
        data = child.record.to_json()
        data["transcript_lines"] = transcript_lines(self.transcript_path(child.agent_id))
        return data

    async def continue_agent(self, reference: str) -> dict[str, Any]:
        """Run an interrupted child on from its checkpoint (this run's or an earlier one's)."""
        return await self._manager_call(
            self.manager.evaluate({"agent_id": reference, "continue": True, "block": False})
        )

    async def message_agent(
        self, reference: str, text: str, *, interrupt: bool = False
    ) -> dict[str, Any]:
        """Delivered like agent_eval's message: a steer for a running child (`interrupt` drops
        its pending ones), a new run for a completed or failed one (`message_delivery.revived`)."""
        return await self._manager_call(
            self.manager.evaluate({"agent_id": reference, "message": text, "interrupt": interrupt})
        )

    async def cancel_agent(self, reference: str) -> dict[str, Any]:
        return await self._manager_call(self.manager.close(reference))

    async def apply_agent(self, reference: str) -> dict[str, Any]:
        """Merge a finished isolated child's changes into the work tree (agent_apply's code).

        The user's own action, so like /revert it is not held to the session's mode.
        """
        return await self._manager_call(self.manager.apply(reference))

    async def _manager_call(self, call: Any) -> dict[str, Any]:
        try:
            result: dict[str, Any] = await call
        except SpawnError as error:
            raise RuntimeRequestError(str(error)) from None
        return result

    def transcript_path(self, agent_id: str) -> Path:
        return self.manager.store.transcript_path(agent_id)

    def agent_messages(self, agent_id: str) -> list[dict[str, Any]]:
        """One child's conversation so far; read it and `watch_agent` in one step, none is lost."""
        return self.manager.messages_of(agent_id)

    def watch_agent(self, agent_id: str, watcher: Callable[[Event], None]) -> Callable[[], None]:
        """Follow one child live: its raw engine events from now on; returns the unsubscribe."""
        return self.manager.watch(agent_id, watcher)

    # -- background shell tasks ------------------------------------------------------------

    def _report_background_change(self, task: BackgroundTask) -> None:
        snapshot = snapshot_of(task)
        self.engine.emit(
            BackgroundTaskChanged(
                task_id=snapshot.task_id, command=snapshot.command, status=snapshot.status
            )
        )

    def background_tasks(self) -> list[TaskSnapshot]:
        """Every background task of the session (the whole tree's), in the order started."""
        background = self.engine.context.background
        return [snapshot_of(task) for task in background.all()]

    def background_output(self, task_id: str, since: int = 0) -> TaskOutput:
        """What the task printed after byte `since` (as far as it is kept), and its state."""
        return output_of(self._background_task(task_id), since)

    async def kill_background(self, task_id: str) -> TaskSnapshot:
        """Stop the task (its whole process group), as shell_kill does; its final state."""
        task = self._background_task(task_id)
        await self.engine.context.background.kill(task)
        return snapshot_of(task)

    def _background_task(self, task_id: str) -> BackgroundTask:
        task = self.engine.context.background.get(task_id)
        if task is None:
            raise RuntimeRequestError(f"no background task '{task_id}' in this session")
        return task

    # -- MCP servers -----------------------------------------------------------------------

    async def start_mcp(self) -> list[str]:
        """Start the trusted MCP servers in the background and wait for them; returns one
        line per server that is not usable (why, and its log)."""
        return await self.mcp.ready()

    @property
    def permission_rules(self) -> PermissionRules:
        """The session's allow/ask/deny rules, shared with every child (/permissions)."""
        return self.engine.context.rules

    @property
    def tool_names(self) -> frozenset[str]:
        """The names of the tools this session has now (MCP servers' included)."""
        return frozenset(self.engine.tools.names())

    def mcp_untrusted(self) -> list[ServerSpec]:
        """This project's .mcp.json servers the user has not trusted (they do not start)."""
        return self.mcp.untrusted()

    def mcp_statuses(self) -> list[ServerStatus]:
        return self.mcp.statuses()

    def trust_mcp(self, names: list[str] | None = None) -> list[str]:
        """Trust this project's .mcp.json servers (all untrusted ones when None), for this
        workspace from now on, and start them; returns the names trusted."""
        return self.mcp.trust(names)

    # -- hooks -----------------------------------------------------------------------------

    def hook_lines(self) -> list[str]:
        """/hooks: every hook by source file, with its event, matcher and command, whether
        it runs, the unused events, and the problems found reading them."""
        hooks = self.engine.context.hooks
        return [*hook_lines(hooks.entries, hooks.is_trusted), *hooks.problems]

    def hooks_untrusted(self) -> list[HookEntry]:
        """This project's hooks the user has not trusted (they do not run)."""
        return self.engine.context.hooks.untrusted()

    def trust_hooks(self) -> int:
        """Trust this project's hooks as they are now, in this workspace; returns how many."""
        return len(self.engine.context.hooks.trust_all())

    # -- the end ---------------------------------------------------------------------------

    async def close(self) -> None:
        """Quit: the turn is recorded interrupted, children stop, files close, servers end."""
        if self._closed:
            return
        self._closed = True
        await self.engine.stop()
        await session_end(self.engine.context.hooks)
        await self.manager.shutdown()
        await self.engine.context.background.close()
        await self.rlm.close_all()
        await self.mcp.close()
        # Children and RLM calls may have spent more since the last turn ended.
        self.writer.record_meter(self.engine.meter.to_json())
        self.writer.close()
        self._report_earlier_failures()
        await self.client.aclose()
        if self.local_server is not None:
            await self.local_server.stop()
