"""Build a child's engine: its posture, tools, prompt, first messages and recorder."""

from __future__ import annotations

import json
from typing import Any

from codewhale.permissions import CommandClass, Mode
from codewhale.subagents.records import WorkerRecord
from codewhale.subagents.roles import AGENT_TOOLS, POSTURES, Role, role_prompt
from codewhale.subagents.spawn import SpawnRequest, assignment_message
from codewhale.subagents.store import SubagentStore


def allowed_tool_names(request: SpawnRequest, all_tools: list[str]) -> list[str]:
    """What the child may run: its posture, narrowed by allowed_tools; agent tools by depth."""
    posture = POSTURES[request.role]
    names = [name for name in all_tools if posture.refusal(name, request.role.value) is None]
    if request.allowed_tools:
        names = [name for name in names if name in request.allowed_tools]
    if request.max_depth == 0:
        names = [name for name in names if name not in AGENT_TOOLS]
    return names


def tool_policy(request: SpawnRequest, allowed: list[str]):
    """A refusal message for any tool outside the child's allowance, naming the role."""
    posture = POSTURES[request.role]
    label = request.type_name

    def refuse(tool: str) -> str | None:
        if tool in allowed:
            return None
        if (reason := posture.refusal(tool, label)) is not None:
            return reason
        if tool in AGENT_TOOLS:
            return f"{tool} is not available: this sub-agent is a leaf worker (max_depth 0)."
        return f"{tool} is not in this sub-agent's allowed_tools ({', '.join(allowed)})."

    return refuse


def shell_ceiling(role: Role) -> CommandClass | None:
    shell = POSTURES[role].shell
    return None if shell in (None, CommandClass.OTHER) else shell


def system_prompt(request: SpawnRequest, memory: str | None) -> str:
    definition = request.definition
    prompt = role_prompt(
        request.role,
        intro=definition.prompt if definition is not None else None,
        role_name=request.type_name,
    )
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


class ChildRecorder:
    """Appends a child's new messages to its transcript; the checkpoint is its length.

    The transcript holds every message in order, so "the first N lines" is a complete,
    continuable checkpoint without writing a second copy of the conversation.
    """

    def __init__(self, store: SubagentStore, record: WorkerRecord) -> None:
        self.store = store
        self.record = record
        self._written = 0

    def record_messages(self, messages: list[dict[str, Any]]) -> None:
        if len(messages) == self._written:
            return
        self.store.append_transcript(self.record.agent_id, messages[self._written :])
        self._written = len(messages)
        self.record.checkpoint = {
            "transcript": str(self.store.transcript_path(self.record.agent_id)),
            "messages": len(messages),
        }

    def record_event(self, event: dict[str, Any]) -> None:
        """Events go to the mailbox instead; the transcript holds messages only."""

    def sync(self) -> None:
        """Transcript lines are flushed as they are written."""
