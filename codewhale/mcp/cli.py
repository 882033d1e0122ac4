"""`codewhale mcp list | trust | untrust`: a workspace's MCP servers without the app."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys

from codewhale.config import load_for_command
from codewhale.mcp.hub import McpHub, ServerStatus, trust_file
from codewhale.mcp.listing import format_statuses
from codewhale.mcp.specs import project_specs
from codewhale.mcp.trust import TrustStore
from codewhale.paths import user_dirs

USAGE = """usage: codewhale mcp ACTION

  list [--json]        servers, their state and tools (starts each trusted server briefly)
  trust [NAME ...]     let this project's .mcp.json servers start (all of them by default)
  untrust [NAME ...]   forget that trust (all of this project's servers by default)
"""


def run_mcp_command(args: argparse.Namespace) -> int:
    action = getattr(args, "mcp_command", None)
    if action is None:
        print(USAGE, file=sys.stderr, end="")
        return 2
    if action == "list":
        return _list(args)
    return _trust(args, revoke=action == "untrust")


def _list(args: argparse.Namespace) -> int:
    if (loaded := load_for_command(args.workspace_path, args.overrides)) is None:
        return 2
    hub = McpHub.from_config(loaded.config.mcp, args.workspace_path, user_dirs())

    async def look() -> tuple[list[str], list[ServerStatus]]:
        try:
            return await hub.ready(), hub.statuses()  # as they are, before closing
        finally:
            await hub.close()

    problems, statuses = asyncio.run(look())
    warnings = [*loaded.warnings, *hub.warnings]
    if args.json:
        document = {
            "workspace": str(args.workspace_path),
            "servers": [status.to_json() for status in statuses],
            "warnings": warnings,
        }
        print(json.dumps(document, indent=2, ensure_ascii=False))
    else:
        for warning in warnings:
            print(f"warning: {warning}", file=sys.stderr)
        print(format_statuses(statuses))
    return 1 if problems else 0


def _trust(args: argparse.Namespace, *, revoke: bool) -> int:
    warnings: list[str] = []
    specs = project_specs(args.workspace_path, warnings)
    for warning in warnings:
        print(f"warning: {warning}", file=sys.stderr)
    wanted = set(args.names) if args.names else {spec.name for spec in specs}
    unknown = sorted(wanted - {spec.name for spec in specs})
    if unknown:
        print(
            f"codewhale: not in {args.workspace_path / '.mcp.json'}: {', '.join(unknown)}",
            file=sys.stderr,
        )
        return 2
    if not wanted:
        print(f"No servers in {args.workspace_path / '.mcp.json'}.")
        return 0
    store = TrustStore(trust_file(user_dirs()))
    chosen = [spec for spec in specs if spec.name in wanted]
    if revoke:
        store.revoke(args.workspace_path, wanted)
        print(f"No longer trusted here: {', '.join(sorted(wanted))}")
        return 0
    store.trust(args.workspace_path, chosen)
    for spec in chosen:
        print(f"Trusted {spec.name}: {spec.target()}")
    return 0
