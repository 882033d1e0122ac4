"""Making a child: its record, its first messages and its engine (new, or from a transcript).

A child's engine gets its own context (the opener's, narrowed to the child's
authority and cwd), inbox, usage meter (rolling up into the opener's), client and
tools; a child that may open children of its own also gets a seat (`Opener`),
and the agent tools bound to that seat.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from codewhale.authority import Authority
from codewhale.engine import events
from codewhale.engine.compaction import CompactionPolicy
from codewhale.engine.conversation import Conversation, Inbox, UsageMeter
from codewhale.engine.loop import Engine
from codewhale.providers.client import ChatClient
from codewhale.skills import SkillSet
from codewhale.subagents import launch
from codewhale.subagents.child import Child, Opener
from codewhale.subagents.definitions import DefinitionSet
from codewhale.subagents.records import WorkerRecord, new_agent_id
from codewhale.subagents.roster import Roster
from codewhale.subagents.spawn import SpawnRequest
from codewhale.subagents.state.owners import this_process
from codewhale.subagents.store import SubagentStore
from codewhale.subagents.worktree import in_a_worktree
from codewhale.tools.base import Tool, ToolContext
from codewhale.tools.registry import ToolRegistry
from codewhale.work_state import WorkState

DEFAULT_CHILD_STEPS = 60


@dataclass
class ChildBuilder:
    workspace: Path
    # The session's own context: memory, network, the shared mode switch and grants.
    context: ToolContext
    client: ChatClient
    store: SubagentStore
    roster: Roster
    definitions: DefinitionSet
    tools: Callable[[], list[Tool]]
    # The agent tools for a seat (bound to the manager, which builds this builder).
    agent_tools: Callable[[Opener], list[Tool]]
    on_event: Callable[[Child, events.Event], None]
    memory_text: Callable[[], str | None]
    api_timeout: float
    session_id: str
    session_boot_id: str
    branch: str | None
    # The session's [context] settings; each child's window follows its own model.
    compaction: CompactionPolicy
    # The session's skills, for the ones an agent definition preloads.
    skills: SkillSet = field(default_factory=SkillSet)

    def create(self, request: SpawnRequest, opener: Opener) -> Child:
        """A new child with its record and engine, not yet started."""
        agent_id = new_agent_id()
        owner = this_process()
        record = WorkerRecord(
            run_id="run_" + secrets.token_hex(6),
            agent_id=agent_id,
            name=request.name or agent_id,
            nickname=self.roster.nickname(),
            objective=request.prompt,
            description=request.description,
            type=request.type_name,
            role=request.role.value,
            model=request.model,
            workspace=str(request.workspace),
            git_branch=self.branch,
            session_boot_id=self.session_boot_id,
            allowed_tools=list(request.allowed_tools or ()),
            color=request.definition.color if request.definition else None,
            fork_context=request.fork_context,
            max_depth=request.max_depth,
            owner_pid=owner.pid,
            owner_start=owner.start,
            session_id=self.session_id,
            parent_agent_id=opener.agent_id,
            authority=launch.child_authority(request, opener.authority).to_json(),
            budget=request.budget.to_json(),
        )
        record.artifacts["transcript"] = str(self.store.transcript_path(agent_id))
        child = Child(record=record, opener=opener, budget=request.budget)
        prompt = launch.system_prompt(request, self.memory_text(), self.skills)
        parent_prefix = opener.conversation.request_prefix() if request.fork_context else None
        messages = launch.first_messages(
            request,
            prompt,
            parent_prefix=parent_prefix,
            fork_state_text=launch.fork_state(
                self.context.mode,
                str(self.workspace),
                opener.context.work.snapshot(),
                self.roster.unfinished_ids(),
            ),
        )
        # A forked child offers its opener's tool list so the prefix stays byte-identical;
        # its authority still decides what runs.
        fork_tools = opener.conversation.tools if request.fork_context else None
        self.build_engine(child, messages[:-1], fork_tools=fork_tools)
        child.first_prompt = messages[-1]["content"]
        return child

    def rebuild(self, child: Child) -> None:
        """A child from an earlier run: its engine again, from its persisted transcript."""
        record = child.record
        saved = self.store.load_transcript(record.agent_id)
        count = (record.checkpoint or {}).get("messages", len(saved))
        messages = launch.complete_prefix(saved[: int(count)])
        if len(messages) < len(saved):
            # Rewrite the transcript so it stays the conversation the child continues.
            self.store.rewrite_transcript(record.agent_id, messages)
        self.build_engine(child, messages, written=len(messages))

    def build_engine(
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
            # Writes in a worktree (its own, or its opener's) are not the session's until
            # agent_apply brings them in, which records them then.
            changes=None if in_a_worktree(Path(record.workspace)) else self.context.changes,
        )
        inbox = Inbox()
        # A continuation counts on from what the child spent before; its opener (perhaps
        # another one now) has been charged for that already, and is charged only anew.
        if child.meter is not None:
            meter = replace(child.meter, parent=child.opener.meter)
        else:
            meter = UsageMeter(parent=child.opener.meter)
        child.meter = meter
        tools = self.tools()
        conversation = Conversation(messages)
        seat = None
        if record.max_depth > 0:
            seat = Opener(
                record.agent_id, conversation, inbox, meter, context, record.max_depth - 1
            )
            tools += self.agent_tools(seat)
        registry = ToolRegistry(tools)
        definition = self.definitions.definitions.get(record.type)
        child.seat = seat
        child.engine = Engine(
            client=self.client.clone(),
            tools=registry,
            context=context,
            conversation=conversation,
            offered_tools=fork_tools or launch.offered_tools(registry, authority),
            emit=lambda event: self.on_event(child, event),
            model=record.model,
            max_steps=(definition.max_steps if definition else None) or DEFAULT_CHILD_STEPS,
            recorder=launch.ChildRecorder(self.store, record, written),
            inbox=inbox,
            meter=meter,
            hold=self.roster.hold_for(seat) if seat is not None else lambda: False,
            request_timeout_secs=self.api_timeout,
            requester=f"{record.nickname} ({record.name}, {record.type})",
            compaction=self.compaction,
        )
