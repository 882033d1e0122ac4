"""`codewhale agents list|show|types`: records from the state file, types from the
definition files, without a running app."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from codewhale.sanitize import clean_text
from codewhale.subagents.lifecycle import reconcile_dead_owners
from codewhale.subagents.records import WorkerRecord
from codewhale.subagents.store import StateFileError, SubagentStore


def visible_records(records: list[WorkerRecord], include_archived: bool) -> list[dict[str, Any]]:
    """The latest boot's records plus anything unfinished; older ones only when asked."""
    latest = max(records, key=lambda r: r.created_at_ms).session_boot_id if records else ""
    shown = []
    for record in records:
        prior = not record.session_boot_id or record.session_boot_id != latest
        if prior and record.terminal and not include_archived:
            continue
        data = record.to_json()
        if prior:
            data["from_prior_session"] = True
        shown.append(data)
    return shown


def run_agents_command(args: argparse.Namespace) -> int:
    if args.agents_command == "types":
        return _types(args)
    store = SubagentStore(args.workspace_path)
    try:
        records = reconcile_dead_owners(store.load())
    except StateFileError as error:
        print(f"codewhale: {error}", file=sys.stderr)
        return 2
    if args.agents_command == "show":
        wanted = args.agent_id.strip()
        match = [
            r
            for r in records
            if wanted in (r.agent_id, r.name) or r.nickname.lower() == wanted.lower()
        ]
        if not match:
            print(
                f"codewhale: no sub-agent '{args.agent_id}' in {store.state_file}", file=sys.stderr
            )
            return 1
        data = match[-1].to_json()
        path = store.transcript_path(match[-1].agent_id)
        data["transcript_lines"] = sum(1 for _ in path.open()) if path.exists() else 0
        print(json.dumps(data, indent=2, ensure_ascii=False) if args.json else _describe(data))
        return 0
    if args.agents_command != "list":
        print(
            "usage: codewhale agents list [--all] [--json] | show ID [--json] | types [--json]",
            file=sys.stderr,
        )
        return 2
    shown = visible_records(records, args.all)
    if args.json:
        print(json.dumps({"agents": shown}, indent=2, ensure_ascii=False))
        return 0
    if not shown:
        print(f"No sub-agents recorded in {args.workspace_path}.")
        return 0
    for data in shown:
        objective = clean_text(data["description"] or data["objective"]).replace("\n", " ")[:50]
        flag = "  (prior session)" if data.get("from_prior_session") else ""
        print(
            f"{data['agent_id']}  {data['nickname']:<10} {data['type']:<12} "
            f"{data['status']:<11} {data['steps_taken']:>3} steps  {objective}{flag}"
        )
    return 0


def _describe(data: dict[str, Any]) -> str:
    lines = [f"{data['agent_id']} ({data['nickname']}, {data['type']}) — {data['status']}"]
    for key in ("objective", "model", "workspace", "worker_status", "steps_taken", "error"):
        if data.get(key) not in (None, ""):
            lines.append(f"  {key}: {clean_text(str(data[key]))}")
    lines.append(
        f"  transcript: {data['artifacts'].get('transcript')} ({data['transcript_lines']} lines)"
    )
    if data.get("result"):
        lines.append("\n" + clean_text(data["result"]))
    return "\n".join(lines)


def _types(args: argparse.Namespace) -> int:
    """Every agent type this workspace offers, as a session opened here would see them."""
    from codewhale.config import load_for_command
    from codewhale.mcp.specs import load_specs
    from codewhale.paths import agent_definition_dirs
    from codewhale.subagents.catalog import AgentCatalog, format_entries
    from codewhale.subagents.definitions import load_definitions
    from codewhale.subagents.roles import served_tools
    from codewhale.tools.registry import default_tools

    if (loaded := load_for_command(args.workspace_path, args.overrides)) is None:
        return 2
    tools = default_tools(loaded.config.sandbox)
    # A definition may name MCP tools; the servers' names are enough to check them.
    servers = [spec.name for spec in load_specs(loaded.config.mcp, args.workspace_path)[0]]
    definitions = load_definitions(
        agent_definition_dirs(args.workspace_path),
        served_tools((tool.name for tool in tools), servers),
    )
    catalog = AgentCatalog(
        definitions, tools, loaded.config.subagents, loaded.provider_settings().base_url
    )
    entries = catalog.entries()
    if args.json:
        print(json.dumps({"types": [e.to_json() for e in entries]}, indent=2, ensure_ascii=False))
    else:
        print(clean_text(format_entries(entries)))
    return 0
