"""What a child starts from: its authority, tools, prompt, first messages and recorder."""

from __future__ import annotations

import json
from typing import Any

from codewhale.authority import Authority
from codewhale.engine.instructions import project_instructions
from codewhale.permissions import Mode
from codewhale.skills import SkillSet
from codewhale.subagents.records import WorkerRecord
from codewhale.subagents.roles import role_authority, role_prompt
from codewhale.subagents.spawn import SpawnRequest, assignment_message
from codewhale.subagents.store import SubagentStore
from codewhale.tools.registry import ToolRegistry


def child_authority(request: SpawnRequest, opener: Authority) -> Authority:
    """The opener's authority narrowed by the role and its tool list."""
    role = role_authority(request.role, request.type_name, request.allowed_tools)
    return opener.narrowed(role)


def offered_tools(registry: ToolRegistry, authority: Authority) -> list[dict[str, Any]]:
    """Schemas of the tools this authority could ever use (the mode may narrow further)."""
    return [
        tool.schema()
        for tool in (registry.get(name) for name in registry.names())
        if authority.offers(tool.name, tool.approval, plan_artifact=tool.plan_artifact)
    ]


def system_prompt(request: SpawnRequest, memory: str | None, skills: SkillSet) -> str:
    definition = request.definition
    prompt = role_prompt(
        request.role,
        intro=definition.prompt if definition is not None else None,
        role_name=request.type_name,
    )
    for name in definition.skills if definition is not None else ():
        # Preloaded (`skills:` in the agent file); one not installed is warned about at start.
        if (skill := skills.get(name)) is not None:
            prompt += f"\n\n# Skill: {skill.name}\n\n{skill.instructions}"
    if instructions := project_instructions(request.workspace):
        prompt += f"\n\n{instructions}"
    if memory:
        prompt += f"\n\n# The user's memory notes\n\n{memory.strip()}"
    return prompt


def fork_state(mode: Mode, workspace: str, work: dict[str, Any], agents: list[str]) -> str:
    state = {
        "mode": mode.value,
        "workspace": workspace,
        "checklist": work.get("checklist", []),
        "checklist_percent_complete": work.get("percent_complete", 0),
        "plan": work.get("plan", []),
        "open_sub_agents": agents,
    }
    return f"<codewhale:fork_state>{json.dumps(state, ensure_ascii=False)}</codewhale:fork_state>"


def first_messages(
    request: SpawnRequest,
    prompt: str,
    *,
    parent_prefix: list[dict[str, Any]] | None,
    fork_state_text: str,
) -> list[dict[str, Any]]:
    """Fresh: role prompt + assignment. Forked: parent prefix, fork state, role, assignment."""
    assignment = {"role": "user", "content": assignment_message(request)}
    if parent_prefix is None:
        return [{"role": "system", "content": prompt}, assignment]
    return [
        *parent_prefix,
        {"role": "system", "content": fork_state_text},
        {
            "role": "system",
            "content": f"<codewhale:subagent_context>{prompt}</codewhale:subagent_context>",
        },
        assignment,
    ]


def complete_prefix(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The longest prefix a model accepts: no assistant tool calls left unanswered.

    A crash between writing a response and its tool results can leave such a tail.
    """
    end = len(messages)
    index = 0
    while index < len(messages):
        message = messages[index]
        calls = (message.get("tool_calls") or []) if message.get("role") == "assistant" else []
        if calls:
            wanted = {call.get("id") for call in calls}
            answered = set()
            cursor = index + 1
            while cursor < len(messages) and messages[cursor].get("role") == "tool":
                answered.add(messages[cursor].get("tool_call_id"))
                cursor += 1
            if not wanted <= answered:
                end = index
                break
            index = cursor
            continue
        index += 1
    return messages[:end]


class ChildRecorder:
    """Appends a child's new messages to its transcript; the checkpoint is its length.

    The transcript holds every message in order, so "the first N lines" is a complete,
    continuable checkpoint without writing a second copy of the conversation.
    """

    # Events go to the mailbox instead; the transcript holds messages only.
    recorded_events: frozenset[str] = frozenset()

    def __init__(self, store: SubagentStore, record: WorkerRecord, written: int = 0) -> None:
        self.store = store
        self.record = record
        self._written = written

    def record_messages(self, messages: list[dict[str, Any]]) -> None:
        if len(messages) == self._written:
            return
        self.store.append_transcript(self.record.agent_id, messages[self._written :])
        self._written = len(messages)
        self.record.checkpoint = self.store.checkpoint(self.record.agent_id, len(messages))

    def record_event(self, event: dict[str, Any]) -> None:
        """Never called: no event type is recorded."""

    def sync(self) -> None:
        """Transcript lines are flushed as they are written."""
