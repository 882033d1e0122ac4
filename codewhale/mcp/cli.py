"""`codewhale mcp list | trust | untrust`: a workspace's MCP servers without the app."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from dataclasses import replace
from pathlib import Path

from codewhale.config import load_for_command
from codewhale.mcp.disclosure import trust_details
from codewhale.mcp.hub import McpHub, ServerStatus, trust_file
from codewhale.mcp.listing import format_statuses
from codewhale.mcp.server import PENDING, ServerState
from codewhale.mcp.specs import ServerSpec, project_specs
from codewhale.mcp.trust import TrustStore
from codewhale.paths import user_dirs

USAGE = """usage: codewhale mcp ACTION

  list [--json]        servers, their state and tools (starts each trusted server briefly)
  trust NAME ...       let these of this project's .mcp.json servers start
  trust [--all]        all of them: shown, then asked (y/N), or at once with --all
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
    statuses = [_given_up(status, hub.startup_timeout) for status in statuses]
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


def _given_up(status: ServerStatus, timeout: float) -> ServerStatus:
    """A server still starting when the listing was taken failed to start in time: the
    listing stops it then, where a session would go on waiting."""
    if status.state not in PENDING:
        return status
    why = f"could not start: no answer to its handshake within {timeout:g} s (startup_timeout_secs)"
    return replace(status, state=ServerState.FAILED, error=why)


def _trust(args: argparse.Namespace, *, revoke: bool) -> int:
    if not revoke and args.names and args.all:
        print("codewhale: give the servers' names or --all, not both", file=sys.stderr)
        return 2
    if (loaded := load_for_command(args.workspace_path, args.overrides)) is None:
        return 2
    warnings: list[str] = []
    project_env = frozenset(loaded.config.mcp.project_env)
    specs = project_specs(args.workspace_path, warnings, project_env)
    for warning in [*loaded.warnings, *warnings]:
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
    if not args.names and not args.all:
        # Every server a cloned repository lists, at once: shown first, then asked.
        _show(chosen, store, args.workspace_path, "Trusting lets these servers start:")
        if (answer := _confirm("Trust all of them for this workspace? [y/N] ")) is None:
            print(
                "codewhale: not asking without a terminal: pass the names of the servers "
                "to trust, or --all to trust every one listed above",
                file=sys.stderr,
            )
            return 2
        if not answer:
            print("Nothing trusted.")
            return 1
    else:
        _show(chosen, store, args.workspace_path, "Trusting:")
    store.trust(args.workspace_path, chosen)
    print(f"Trusted for {args.workspace_path}: {', '.join(spec.name for spec in chosen)}")
    return 0


def _show(specs: list[ServerSpec], store: TrustStore, workspace: Path, title: str) -> None:
    print(title)
    for spec in specs:
        print()
        lines = trust_details(spec)
        if store.trusted(workspace, spec):
            lines[0] += "  [already trusted]"
        print("\n".join(lines))
    print()


def _confirm(question: str) -> bool | None:
    """The user's yes or no on the terminal; None when stdin is no terminal to ask on."""
    if not sys.stdin.isatty():
        return None
    try:
        answer = input(question)
    except EOFError:
        return False
    return answer.strip().lower() in ("y", "yes")
