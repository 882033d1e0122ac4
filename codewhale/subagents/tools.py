"""agent_open, agent_eval and agent_close: the model's handle on the manager."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from codewhale.permissions import ApprovalClass
from codewhale.subagents.roles import role_help
from codewhale.subagents.spawn import SpawnError
from codewhale.subagents.worktree import GIT_TIMEOUT_SECS
from codewhale.tools.base import Tool, ToolContext, ToolError, ToolResult

if TYPE_CHECKING:
    from codewhale.subagents.child import Opener
    from codewhale.subagents.manager import SubAgentManager


class _AgentTool(Tool):
    # Never needs approval: a child can do no more than its role and the parent's mode allow,
    # and each of its own calls goes through the usual approval rules (spec §2).
    approval = ApprovalClass.AUTO
    sequential = True

    def __init__(self, manager: SubAgentManager, opener: Opener) -> None:
        self.manager = manager
        # The conversation these tools act for: children opened here report back to it.
        self.opener = opener

    def reply(self, data: dict[str, Any]) -> ToolResult:
        return ToolResult(json.dumps(data, ensure_ascii=False, indent=2))

    def summary(self, arguments: Mapping[str, Any]) -> str:
        """The child the call is about (the tools that name none say their own)."""
        return str(arguments.get("agent_id") or arguments.get("name") or "")

    @staticmethod
    def child_reference(arguments: Mapping[str, Any]) -> Any:
        return arguments.get("agent_id") or arguments.get("name") or arguments.get("id")


class AgentOpen(_AgentTool):
    name = "agent_open"
    # Opens in one response run together, so their records share one durable write.
    sequential = False
    # Making a worktree (isolation) checks the repository out; git's own limit comes first.
    timeout_secs = GIT_TIMEOUT_SECS + 60
    parameters = {
        "type": "object",
        "properties": {
            "prompt": {
                "type": "string",
                "description": "the assignment (aliases: message, objective)",
            },
            "description": {"type": "string", "description": "3-5 word title for the UI"},
            "type": {"type": "string", "description": "role or agent definition name"},
            "role": {"type": "string"},
            "name": {"type": "string", "description": "session name, [A-Za-z0-9._-]+"},
            "allowed_tools": {"type": "array", "items": {"type": "string"}},
            "model": {"type": "string"},
            "fork_context": {"type": "boolean", "description": "start from your own context"},
            "max_depth": {"type": "integer", "description": "0-3; 0 = leaf worker"},
            "cwd": {"type": "string", "description": "directory inside the workspace"},
            "isolation": {
                "type": "string",
                "enum": ["none", "worktree"],
                "description": "worktree: its own git worktree (HEAD + your uncommitted "
                "changes); nothing reaches your files until agent_apply",
            },
            "max_runtime_secs": {"type": "number", "description": "stop it after this long"},
            "max_tokens": {"type": "integer", "description": "stop it past this many tokens"},
            "max_cost_usd": {"type": "number", "description": "stop it past this cost"},
        },
    }

    @property
    def description(self) -> str:  # type: ignore[override]
        return (
            "Open a background sub-agent for a focused task; returns at once with its agent_id. "
            "Keep working: its completion arrives as a runtime event. Types: "
            f"{role_help()}.{self.manager.catalog.routing_text()}"
        )

    def summary(self, arguments: Mapping[str, Any]) -> str:
        return str(arguments.get("description") or arguments.get("prompt") or "")[:80]

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolResult:
        try:
            projection = await self.manager.open_async(arguments, opener=self.opener)
            # The id goes to the model next: a crash after that must still find the record.
            await self.manager.record_opened(projection["agent_id"])
        except SpawnError as error:
            raise ToolError(str(error)) from None
        return self.reply(projection)


class AgentEval(_AgentTool):
    name = "agent_eval"
    # `block` waits up to an hour (timeout_ms is capped there); the dispatcher's limit sits above.
    timeout_secs = 3600 + 60
    description = (
        "Inspect a sub-agent (by agent_id or name), optionally send it a message (delivered "
        "at its next step; interrupt: true drops its pending inputs first; to a completed or "
        "failed one, a new run on its own context with the message as its next task), "
        "resume an interrupted one with continue: true, or block up to timeout_ms for it to "
        "finish."
    )
    parameters = {
        "type": "object",
        "properties": {
            "agent_id": {"type": "string"},
            "name": {"type": "string"},
            "message": {"type": "string"},
            "interrupt": {"type": "boolean"},
            "continue": {"type": "boolean"},
            "block": {"type": "boolean"},
            "timeout_ms": {"type": "integer", "description": "1000-3600000, default 30000"},
        },
    }

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolResult:
        try:
            return self.reply(await self.manager.evaluate(arguments, self.opener))
        except SpawnError as error:
            raise ToolError(str(error)) from None


class AgentWait(_AgentTool):
    name = "agent_wait"
    # Waits up to an hour (timeout_ms is capped there); the dispatcher's limit sits above.
    timeout_secs = 3600 + 60
    description = (
        "Wait for your sub-agents to finish. mode all (default): until every listed one has "
        "ended; any: until the first does. agent_ids (ids or names) default to all your "
        "running sub-agents. Returns which finished (in the order they ended), which still "
        "run, and each one's projection as agent_eval gives it; timed_out: true after "
        "timeout_ms (default 600000, 1000-3600000). A new message for you (the user's, or "
        "your opener's if you are a sub-agent) ends the wait early with "
        "interrupted_by_user: true. Results returned here are not announced again as "
        "runtime events."
    )
    parameters = {
        "type": "object",
        "properties": {
            "agent_ids": {
                "type": "array",
                "items": {"type": "string"},
                "description": "agent ids or names; omitted: all your running sub-agents",
            },
            "mode": {"type": "string", "enum": ["any", "all"]},
            "timeout_ms": {"type": "integer", "description": "1000-3600000, default 600000"},
        },
    }

    def summary(self, arguments: Mapping[str, Any]) -> str:
        ids = arguments.get("agent_ids")
        if isinstance(ids, list):
            ids = ", ".join(map(str, ids))
        listed = ids or "every running sub-agent"
        return f"{arguments.get('mode') or 'all'}: {listed}"[:80]

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolResult:
        try:
            return self.reply(await self.manager.wait(arguments, self.opener))
        except SpawnError as error:
            raise ToolError(str(error)) from None


class AgentClose(_AgentTool):
    name = "agent_close"
    description = (
        "Cancel a running sub-agent (no-op if it already finished); returns its state. "
        "Isolated ones: keep_worktree false deletes the worktree and branch, true keeps them; "
        "left out, the reply asks."
    )
    parameters = {
        "type": "object",
        "properties": {
            "agent_id": {"type": "string"},
            "name": {"type": "string"},
            "keep_worktree": {"type": "boolean"},
        },
    }

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolResult:
        reference = self.child_reference(arguments)
        keep = arguments.get("keep_worktree")
        try:
            return self.reply(await self.manager.close(reference, self.opener, keep))
        except SpawnError as error:
            raise ToolError(str(error)) from None


class AgentApply(_AgentTool):
    name = "agent_apply"
    # It writes the user's files: the mode and the caller's authority decide, as for edits
    # (refused in Plan mode and to read-only children).
    approval = ApprovalClass.SUGGEST
    timeout_secs = GIT_TIMEOUT_SECS + 60
    description = (
        "Merge a finished isolated sub-agent's changes into your work tree (3-way); on a "
        "conflict nothing changes and the files are listed. Once per child."
    )
    parameters = {
        "type": "object",
        "properties": {"agent_id": {"type": "string"}, "name": {"type": "string"}},
    }

    def written_paths(self, arguments: Mapping[str, Any], context: ToolContext) -> list[Path]:
        """The child's changed files: a worktree child writes `.mcp.json` or `.claude/`
        freely in its own tree, and applying that to the work tree asks first."""
        try:
            return self.manager.apply_targets(self.child_reference(arguments), self.opener)
        except SpawnError as error:
            raise ToolError(str(error)) from None

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolResult:
        reference = self.child_reference(arguments)
        try:
            reply = await self.manager.apply(reference, self.opener)
        except SpawnError as error:
            raise ToolError(str(error)) from None
        text = json.dumps(reply, ensure_ascii=False, indent=2)
        return ToolResult(text, ok=not reply.get("conflicts"))


class AgentTypes(_AgentTool):
    name = "agent_types"
    sequential = False
    description = (
        "List the sub-agent types you can open (roles and agent definitions) with their "
        "descriptions; with name, one type in full: description, base role, tools, model."
    )
    parameters = {
        "type": "object",
        "properties": {"name": {"type": "string", "description": "one type to show in full"}},
    }

    def summary(self, arguments: Mapping[str, Any]) -> str:
        return str(arguments.get("name") or "")

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolResult:
        name = arguments.get("name")
        try:
            return self.reply(self.manager.catalog.listing(str(name) if name else None))
        except LookupError as error:
            raise ToolError(str(error)) from None


def agent_tools(manager: SubAgentManager, opener: Opener) -> list[Tool]:
    return [
        AgentOpen(manager, opener),
        AgentEval(manager, opener),
        AgentClose(manager, opener),
        AgentApply(manager, opener),
        AgentTypes(manager, opener),
        AgentWait(manager, opener),
    ]
