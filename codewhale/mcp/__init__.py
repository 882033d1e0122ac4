"""MCP servers as tools: configured in `[mcp.servers.*]` or a project `.mcp.json` (docs/MCP.md).

Importing this package loads nothing: the `mcp` SDK is imported only when a server starts,
which is after the app's first frame.
"""
