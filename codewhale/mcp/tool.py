"""An MCP server's tool as one of ours: `mcp__<server>__<tool>`, the server's JSON schema,
and an approval class from the user's trust in the server.

Tool's name, schema and approval are class attributes (the built-in tools declare them
so), so each server tool gets a small class of its own.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar, cast

from codewhale.mcp import names
from codewhale.mcp.server import McpServer
from codewhale.permissions import ApprovalClass
from codewhale.tools.base import Tool, ToolContext, ToolError, ToolResult

if TYPE_CHECKING:
    from mcp import types

# Some servers describe a tool in pages; the model needs what it does, not a manual.
MAX_DESCRIPTION_CHARS = 2000
SUMMARY_CHARS = 120


class McpTool(Tool):
    server_name: ClassVar[str]
    remote_name: ClassVar[str]

    def __init__(self, server: McpServer) -> None:
        self.server = server
        self._schema = super().schema()

    def schema(self) -> dict[str, Any]:
        # The same dict every time: the request encoder reuses its bytes by identity.
        return self._schema

    def summary(self, arguments: Mapping[str, Any]) -> str:
        text = json.dumps(dict(arguments), ensure_ascii=False)
        return text if len(text) <= SUMMARY_CHARS else text[: SUMMARY_CHARS - 1] + "…"

    def approval_text(self, arguments: Mapping[str, Any]) -> str:
        return f"MCP server {self.server_name}: {self.remote_name} {self.summary(arguments)}"

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolResult:
        from codewhale.mcp.results import result_text

        result = await self.server.call(self.remote_name, arguments)
        text = self.server.scrub(result_text(result))
        if result.isError:
            raise ToolError(f"{self.name} reported an error: {text}")
        return ToolResult(text)


def make_tool(server: McpServer, listed: types.Tool) -> McpTool | None:
    """Our tool for one the server listed; None when its name cannot reach a model API."""
    name = names.tool_name(server.name, listed.name)
    if not names.valid_function_name(name):
        return None
    schema = dict(listed.inputSchema or {})
    schema.setdefault("type", "object")
    schema.setdefault("properties", {})
    description = (listed.description or listed.title or f"{listed.name} from {server.name}")[
        :MAX_DESCRIPTION_CHARS
    ]
    attributes = {
        "name": name,
        "description": description,
        "parameters": schema,
        "server_name": server.name,
        "remote_name": listed.name,
        # A read-only server's tools run without asking; any other's as a shell command does.
        "approval": ApprovalClass.AUTO if server.spec.read_only else ApprovalClass.REQUIRED,
    }
    tool_class = cast(type[McpTool], type(f"McpTool_{name}", (McpTool,), attributes))
    return tool_class(server)
