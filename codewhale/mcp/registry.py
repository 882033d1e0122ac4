"""The parent's tool registry: the built-in tools, then each MCP server's once it is up."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from codewhale.mcp.hub import McpHub
from codewhale.tools.base import Tool
from codewhale.tools.registry import ToolRegistry


class SessionTools(ToolRegistry):
    """Servers start after the session is built, so their tools join it later.

    `offered` is the list the parent's engine sends with every request (its
    `offered_tools`): a server's tools are added to it in place when the server comes
    up, so the next request offers them; until then, and while nothing changes, it stays
    the same list of the same dicts, which keeps the request prefix cacheable.
    """

    def __init__(self, tools: Iterable[Tool], hub: McpHub) -> None:
        super().__init__(tools)
        self._hub = hub
        self._builtin = super().schemas()
        self.offered: list[dict[str, Any]] = self._current()
        hub.subscribe(self._refresh)

    def __contains__(self, name: object) -> bool:
        return super().__contains__(name) or (
            isinstance(name, str) and self._hub.tool(name) is not None
        )

    def names(self) -> list[str]:
        return [*super().names(), *(tool.name for tool in self._hub.tools())]

    def get(self, name: str) -> Tool:
        if not super().__contains__(name) and (tool := self._hub.tool(name)) is not None:
            return tool
        return super().get(name)

    def schemas(self) -> list[dict[str, Any]]:
        return self.offered

    def _current(self) -> list[dict[str, Any]]:
        return [*self._builtin, *(tool.schema() for tool in self._hub.tools())]

    def _refresh(self) -> None:
        current = self._current()
        if current != self.offered:
            self.offered[:] = current
