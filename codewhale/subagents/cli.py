"""`codewhale agents list|show|types|trust|untrust`: records from the state file, types
from the definition files, trust in the project's definitions, without a running app."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from codewhale.sanitize import clean_text
from codewhale.subagents.card import agent_card, transcript_lines
from codewhale.subagents.lifecycle import reconcile_dead_owners
from codewhale.subagents.records import WorkerRecord
from codewhale.subagents.store import StateFileError, SubagentStore

if TYPE_CHECKING:
    from codewhale.subagents.catalog import AgentCatalog
    from codewhale.subagents.definitions import HeldDefinition
    from codewhale.tools.base import Tool

USAGE = (
    "usage: codewhale agents list [--all] [--json] | show ID [--json] | types [NAME] [--json]"
    " | trust [NAME ...] [--all] | untrust [NAME ...]"
)


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
    if args.agents_command == "trust":
        return _trust(args)
    if args.agents_command == "untrust":
        return _untrust(args)
    store = SubagentStore(args.workspace_path)
    try:
        records = reconcile_dead_owners(store.load())
    except StateFileError as error:
        print(f"codewhale: {error}", file=sys.stderr)
        return 2
    for warning in store.warnings:  # damage skipped and set aside; the listing goes on
        print(f"warning: {warning}", file=sys.stderr)
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
        data["transcript_lines"] = transcript_lines(path)
        print(json.dumps(data, indent=2, ensure_ascii=False) if args.json else agent_card(data))
        return 0
    if args.agents_command != "list":
        print(USAGE, file=sys.stderr)
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
        if data.get("runs", 1) > 1:
            flag = f"  (run {data['runs']}){flag}"
        print(
            f"{data['agent_id']}  {data['nickname']:<10} {data['type']:<12} "
            f"{data['status']:<11} {data['steps_taken']:>3} steps  {objective}{flag}"
        )
    return 0


def _types(args: argparse.Namespace) -> int:
    """Every agent type this workspace offers (or the one named), as a session here sees them."""
    from codewhale.subagents.catalog import format_entries
    from codewhale.subagents.definition_problems import unknown_type_error

    if (catalog := _catalog(args)) is None:
        return 2
    entries = catalog.entries()
    if args.name:
        entries = [entry for entry in entries if entry.name == args.name.strip().lower()]
        if not entries:
            print(
                f"codewhale: {unknown_type_error(args.name, catalog.definitions)}", file=sys.stderr
            )
            return 1
    if args.json:
        print(json.dumps({"types": [e.to_json() for e in entries]}, indent=2, ensure_ascii=False))
    else:
        print(clean_text(format_entries(entries)))
    return 0


def _catalog(args: argparse.Namespace) -> AgentCatalog | None:
    """The types a session opened in this workspace would offer; None after a config error."""
    from codewhale.config import load_for_command
    from codewhale.mcp.specs import load_specs
    from codewhale.subagents.catalog import AgentCatalog
    from codewhale.subagents.definition_trust import load_workspace_definitions
    from codewhale.subagents.roles import served_tools
    from codewhale.tools.registry import default_tools

    if (loaded := load_for_command(args.workspace_path, args.overrides)) is None:
        return None
    tools: list[Tool] = list(default_tools(loaded.config.sandbox))
    # A definition may name MCP tools; the servers' names are enough to check them.
    servers = [spec.name for spec in load_specs(loaded.config.mcp, args.workspace_path)[0]]
    definitions = load_workspace_definitions(
        args.workspace_path, served_tools((tool.name for tool in tools), servers)
    )
    return AgentCatalog(
        definitions, tools, loaded.config.subagents, loaded.provider_settings().base_url
    )


def _trust(args: argparse.Namespace) -> int:
    """Trust the named held definitions; without names, list them all and ask (or --all)."""
    from codewhale.subagents.definition_trust import pick_held, trust_held

    if args.names and args.all:
        print("codewhale: name the definitions to trust or pass --all, not both", file=sys.stderr)
        return 2
    if (catalog := _catalog(args)) is None:
        return 2
    definitions = catalog.definitions
    try:
        waiting = [hold.definition.name for hold in definitions.held]
        chosen = pick_held(definitions, args.names or waiting)
    except LookupError as error:
        print(f"codewhale: {error}", file=sys.stderr)
        return 2
    if not chosen:
        print(
            f"No agent definition in {args.workspace_path} waits for trust: none shadows a "
            "built-in or names a model."
        )
        return 0
    if not args.names:
        print(clean_text("\n".join(_describe_held(hold) for hold in chosen)))
        if not args.all and not _confirmed(f"Trust these in {args.workspace_path}? [y/N] "):
            return 2
    trust_held(definitions, args.workspace_path, chosen)
    for hold in chosen:
        print(clean_text(f"Trusted {hold.definition.name} ({hold.definition.source})"))
    return 0


def _untrust(args: argparse.Namespace) -> int:
    """Forget the trust given here to these definitions (all of them by default)."""
    from codewhale.subagents.definition_trust import trust_store

    store = trust_store()
    remembered = store.remembered(args.workspace_path)
    names = [name.strip().lower() for name in args.names] or sorted(remembered)
    if unknown := [name for name in names if name not in remembered]:
        print(f"codewhale: not trusted here: {', '.join(unknown)}", file=sys.stderr)
        return 2
    if not names:
        print(f"No agent definition is trusted in {args.workspace_path}.")
        return 0
    store.revoke(args.workspace_path, names)
    print(f"No longer trusted here: {', '.join(names)}")
    return 0


def _describe_held(hold: HeldDefinition) -> str:
    """What trusting it would change, from the file itself."""
    definition = hold.definition
    role = definition.base_role.value
    if definition.tools is None:
        tools = f"the {role} role's"
    else:
        tools = ", ".join(definition.tools) or "none"
    return (
        f"{definition.name}  ({definition.source})\n"
        f"  {'; '.join(hold.reasons)}\n"
        f"  once trusted: base role {role} · model: {definition.model or 'inherited'}"
        f" · tools: {tools}"
    )


def _confirmed(question: str) -> bool:
    """A yes at the terminal; without one (no terminal, EOF, anything else) no."""
    if not sys.stdin.isatty():
        print(
            "codewhale: not a terminal: name the definitions to trust, or pass --all to "
            "trust every one listed",
            file=sys.stderr,
        )
        return False
    try:
        answer = input(question)
    except EOFError:
        answer = ""
    if answer.strip().lower() in ("y", "yes"):
        return True
    print("Nothing trusted.", file=sys.stderr)
    return False
