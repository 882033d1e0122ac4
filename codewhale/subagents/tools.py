"""agent_open, agent_eval and agent_close: the model's handle on the manager."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from codewhale.permissions import ApprovalClass
from codewhale.subagents.roles import role_help
from codewhale.subagents.spawn import SpawnError
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


class AgentOpen(_AgentTool):
    name = "agent_open"
    # Opens in one response run together, so their records share one durable write.
    sequential = False
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
            projection = self.manager.open(arguments, opener=self.opener)
        except SpawnError as error:
            raise ToolError(str(error)) from None
        # The id goes to the model next: a crash after that must still find the record.
        await self.manager.writer.durable()
        return self.reply(projection)


class AgentEval(_AgentTool):
    name = "agent_eval"
    # `block` waits up to an hour (timeout_ms is capped there); the dispatcher's limit sits above.
    timeout_secs = 3600 + 60
    description = (
        "Inspect a sub-agent (by agent_id or name), optionally send it a message (delivered "
        "at its next step; interrupt: true drops its pending inputs first), resume an "
        "interrupted one with continue: true, or block up to timeout_ms for it to finish."
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

    def summary(self, arguments: Mapping[str, Any]) -> str:
        return str(arguments.get("agent_id") or arguments.get("name") or "")

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolResult:
        try:
            return self.reply(await self.manager.evaluate(arguments, self.opener))
        except SpawnError as error:
            raise ToolError(str(error)) from None


class AgentClose(_AgentTool):
    name = "agent_close"
    description = "Cancel a running sub-agent (no-op if it already finished); returns its state."
    parameters = {
        "type": "object",
        "properties": {"agent_id": {"type": "string"}, "name": {"type": "string"}},
    }

    def summary(self, arguments: Mapping[str, Any]) -> str:
        return str(arguments.get("agent_id") or arguments.get("name") or "")

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolResult:
        reference = arguments.get("agent_id") or arguments.get("name") or arguments.get("id")
        try:
            return self.reply(await self.manager.close(reference, self.opener))
        except SpawnError as error:
            raise ToolError(str(error)) from None


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
        AgentTypes(manager, opener),
    ]
