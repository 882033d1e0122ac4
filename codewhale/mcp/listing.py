"""MCP servers as plain text, for `/mcp` and `codewhale mcp list`."""

from __future__ import annotations

from codewhale.mcp.hub import ServerStatus
from codewhale.mcp.server import ServerState
from codewhale.sanitize import clean_text

# What to do about a state, said once under the server's line.
_HINTS = {
    ServerState.UNTRUSTED: "not started: trust it with /mcp trust (app) or `codewhale mcp trust`",
    ServerState.DISABLED: "enabled = false in the config",
    ServerState.WAITING: "starts with the session",
}
DESCRIPTION_CHARS = 70


def format_statuses(statuses: list[ServerStatus]) -> str:
    if not statuses:
        return (
            "No MCP servers. Add [mcp.servers.<name>] to your config, or a .mcp.json to "
            "the project (docs/MCP.md)."
        )
    blocks = []
    for status in statuses:
        source = "config" if status.source == "config" else ".mcp.json"
        access = "read-only, no approval" if status.read_only else "asks before each call"
        lines = [
            f"{status.name}  {status.state.value}  ({status.transport}, {source}, {access})",
            f"  {status.target}",
        ]
        if status.error:
            lines.append(f"  {status.error}")
        if hint := _HINTS.get(status.state):
            lines.append(f"  {hint}")
        for tool in status.tools:
            about = tool.description
            if len(about) > DESCRIPTION_CHARS:
                about = about[: DESCRIPTION_CHARS - 1] + "…"
            lines.append(f"  - {tool.name}" + (f": {about}" if about else ""))
        if status.skipped_tools:
            lines.append(
                f"  left out (name too long for the model API): {', '.join(status.skipped_tools)}"
            )
        lines.append(f"  log: {status.log_file}")
        blocks.append("\n".join(lines))
    # Server-supplied names and descriptions reach a terminal: control characters go.
    return clean_text("\n\n".join(blocks))
