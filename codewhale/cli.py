"""Command-line entry point.

Heavy modules (Textual, httpx) are imported only inside the command that needs
them, so `codewhale --version` and `codewhale config ...` start in tens of ms.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from codewhale import __version__


def _add_override_flags(parser: argparse.ArgumentParser) -> None:
    """Flags that override config values for one run (highest precedence).

    They are accepted before or after the subcommand; SUPPRESS keeps a subparser
    from resetting a value the top-level parser already read.
    """
    keep = argparse.SUPPRESS
    parser.add_argument("--provider", default=keep, help="provider preset (deepseek, openai, ...)")
    parser.add_argument("--model", default=keep, help="model id for the parent agent")
    parser.add_argument(
        "--base-url", dest="base_url", default=keep, help="OpenAI-compatible endpoint URL"
    )
    parser.add_argument(
        "-C",
        "--workspace",
        default=keep,
        help="workspace directory (default: the current directory)",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="codewhale",
        description="A full-screen terminal coding agent with background sub-agents.",
    )
    parser.add_argument("--version", action="version", version=f"codewhale {__version__}")
    _add_override_flags(parser)
    _add_resume_flags(parser)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    config = commands.add_parser("config", help="show, locate or create the config file")
    config_commands = config.add_subparsers(dest="config_command", metavar="ACTION")
    show = config_commands.add_parser("show", help="print the effective config and its sources")
    show.add_argument("--json", action="store_true", help="machine-readable output")
    _add_override_flags(show)
    path = config_commands.add_parser("path", help="print where config files are read from")
    _add_override_flags(path)
    init = config_commands.add_parser("init", help="write a starter user config file")
    init.add_argument("--force", action="store_true", help="overwrite an existing file")

    exec_parser = commands.add_parser("exec", help="run one prompt headless and print the answer")
    _add_override_flags(exec_parser)
    _add_resume_flags(exec_parser)
    exec_parser.add_argument("prompt", help="the task; '-' reads it from stdin")
    exec_parser.add_argument(
        "--json",
        action="store_true",
        help="JSON Lines: a session record, one event per line, a result record",
    )
    exec_parser.add_argument(
        "--mode", choices=["plan", "agent", "yolo"], help="plan (read-only), agent (default), yolo"
    )
    exec_parser.add_argument(
        "--approve",
        choices=["ask", "auto", "deny"],
        default="deny",
        help="how to answer approval requests; ask needs a terminal (default: deny)",
    )
    exec_parser.add_argument("--max-steps", type=int, help="model requests allowed per turn")

    agents = commands.add_parser(
        "agents", help="inspect sub-agent records and agent types of a workspace"
    )
    agents_commands = agents.add_subparsers(dest="agents_command", metavar="ACTION")
    agents_list = agents_commands.add_parser("list", help="sub-agents of the latest session")
    agents_list.add_argument("--all", action="store_true", help="include earlier sessions")
    agents_list.add_argument("--json", action="store_true", help="machine-readable output")
    _add_override_flags(agents_list)
    agents_show = agents_commands.add_parser("show", help="one sub-agent's record")
    agents_show.add_argument("agent_id", help="agent id or name")
    agents_show.add_argument("--json", action="store_true", help="machine-readable output")
    _add_override_flags(agents_show)
    agents_types = agents_commands.add_parser(
        "types", help="roles and agent definitions, with their source, model, tools and problems"
    )
    agents_types.add_argument("--json", action="store_true", help="machine-readable output")
    _add_override_flags(agents_types)

    sessions = commands.add_parser("sessions", help="list saved conversations")
    sessions_commands = sessions.add_subparsers(dest="sessions_command", metavar="ACTION")
    listing = sessions_commands.add_parser("list", help="sessions, newest first")
    listing.add_argument("--all", action="store_true", help="every workspace, not just this one")
    _add_override_flags(listing)
    return parser


def _add_resume_flags(parser: argparse.ArgumentParser) -> None:
    keep = argparse.SUPPRESS
    parser.add_argument(
        "--continue",
        dest="continue_latest",
        action="store_true",
        default=keep,
        help="resume the latest session of this workspace",
    )
    parser.add_argument("--resume", metavar="ID", default=keep, help="resume session ID")


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    # Resolved once here so every command reads the same values the same way.
    args.workspace_path = Path(getattr(args, "workspace", None) or Path.cwd()).resolve()
    args.overrides = {
        key: value
        for key in ("provider", "model", "base_url")
        if (value := getattr(args, key, None)) is not None
    }
    if args.command == "config":
        from codewhale.config_cli import run_config_command

        return run_config_command(args)
    if args.command == "exec":
        from codewhale.headless import run_exec

        return run_exec(args)
    if args.command == "agents":
        from codewhale.subagents.cli import run_agents_command

        return run_agents_command(args)
    if args.command == "sessions":
        from codewhale.sessions.listing import run_sessions_command

        return run_sessions_command(args)
    from codewhale.tui.launch import launch_tui

    return launch_tui(args)


if __name__ == "__main__":
    sys.exit(main())
