"""How MCP tools are named for the model: `mcp__<server>__<tool>`, as Claude Code names them.

`mcp__<server>` alone, in a tool list, stands for every tool of that server. Pure string
rules with no imports, because the authority checks them on every tool call.
"""

from __future__ import annotations

import re

PREFIX = "mcp__"
SEPARATOR = "__"
# What a model API accepts in a function name (OpenAI's rule, which DeepSeek shares).
_FUNCTION_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


def server_entry(server: str) -> str:
    """`mcp__<server>`: every tool of the server, in a tool list."""
    return f"{PREFIX}{server}"


def tool_name(server: str, tool: str) -> str:
    """The model-facing name of one server tool (characters a model API refuses become `_`)."""
    return f"{PREFIX}{server}{SEPARATOR}{_UNSAFE.sub('_', tool)}"


def valid_function_name(name: str) -> bool:
    return bool(_FUNCTION_NAME.match(name))


def server_of(name: str) -> str | None:
    """The server an `mcp__…` name belongs to (entry or tool name); None for other names."""
    if not name.startswith(PREFIX):
        return None
    server = name[len(PREFIX) :].split(SEPARATOR, 1)[0]
    return server or None
