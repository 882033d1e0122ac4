"""Command-line entry point.

Heavy modules (Textual, the config models, the engine) are imported only inside the
command that needs them, so `codewhale --version` and `codewhale config ...` start in tens of ms.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from codewhale import __version__
from codewhale.allocator import tune as tune_allocator
from codewhale.environ_guard import seal_environment
from codewhale.output_streams import tolerate_unencodable
from codewhale.process_tree import adopt_orphans


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
        "--effort",
        dest="reasoning_effort",
        choices=["minimal", "low", "medium", "high"],
        default=keep,
        help="how hard a reasoning model thinks, where the provider takes it",
    )
    parser.add_argument(
        "-C",
        "--workspace",
        default=keep,
        help="workspace directory (default: the current directory)",
    )


# Every subcommand; any other first word is a prompt for the app (checked in build_parser).
COMMANDS = ("config", "exec", "agents", "sessions", "mcp", "skills", "hooks", "completion")
SHELLS = ("bash", "zsh", "fish")
PROMPT_EPILOG = (
    'codewhale "fix the failing test" opens the app and sends the task as the first prompt. '
    "A prompt that is also a command name goes after --: codewhale -- exec."
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="codewhale",
        usage="%(prog)s [options] [PROMPT]\n       %(prog)s [options] COMMAND ...",
        description="A full-screen terminal coding agent with background sub-agents.",
        epilog=PROMPT_EPILOG,
    )
    parser.add_argument("--version", action="version", version=f"codewhale {__version__}")
    _add_override_flags(parser)
    _add_resume_flags(parser)
    _add_mode_flag(parser)
    # prog: the custom usage above would otherwise prefix every subcommand's usage.
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", prog="codewhale")

    config = commands.add_parser("config", help="show, locate or create the config file")
    config_commands = config.add_subparsers(dest="config_command", metavar="ACTION")
    show = config_commands.add_parser("show", help="print the effective config and its sources")
    show.add_argument("--json", action="store_true", help="machine-readable output")
    _add_override_flags(show)
    path = config_commands.add_parser("path", help="print where config files are read from")
    _add_override_flags(path)
    init = config_commands.add_parser(
        "init", help="write the annotated example as the user config file"
    )
    init.add_argument("--force", action="store_true", help="overwrite an existing file")
    config_commands.add_parser("example", help="print every key, commented, at its default")

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
        "--mode",
        choices=["plan", "agent", "yolo"],
        default=argparse.SUPPRESS,  # else it would undo a `--mode` given before `exec`
        help="plan (read-only), agent (default), yolo",
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
    agents_types.add_argument("name", nargs="?", help="only this type, or why it is missing")
    agents_types.add_argument("--json", action="store_true", help="machine-readable output")
    _add_override_flags(agents_types)
    agents_trust = agents_commands.add_parser(
        "trust",
        help="let this project's agent definitions that shadow a built-in or name a model "
        "take effect (lists them and asks when no NAME is given)",
    )
    agents_trust.add_argument("names", nargs="*", metavar="NAME", help="definitions to trust")
    agents_trust.add_argument(
        "--all", action="store_true", help="trust every one waiting, without asking"
    )
    _add_override_flags(agents_trust)
    agents_untrust = agents_commands.add_parser(
        "untrust", help="forget the trust given to this project's agent definitions"
    )
    agents_untrust.add_argument(
        "names", nargs="*", metavar="NAME", help="definitions (default: all)"
    )
    _add_override_flags(agents_untrust)

    sessions = commands.add_parser("sessions", help="list saved conversations")
    sessions_commands = sessions.add_subparsers(dest="sessions_command", metavar="ACTION")
    listing = sessions_commands.add_parser("list", help="sessions, newest first")
    listing.add_argument("--all", action="store_true", help="every workspace, not just this one")
    _add_override_flags(listing)
    mcp = commands.add_parser("mcp", help="list MCP servers and their tools; trust a project's")
    mcp_commands = mcp.add_subparsers(dest="mcp_command", metavar="ACTION")
    mcp_list = mcp_commands.add_parser("list", help="servers, their state and their tools")
    mcp_list.add_argument("--json", action="store_true", help="machine-readable output")
    _add_override_flags(mcp_list)
    for action, about in (
        ("trust", "let this project's .mcp.json servers start"),
        ("untrust", "forget the trust given to this project's servers"),
    ):
        trust = mcp_commands.add_parser(action, help=about)
        trust.add_argument("names", nargs="*", metavar="NAME", help="servers (default: all)")
        if action == "trust":
            trust.add_argument(
                "--all", action="store_true", help="trust every server listed without asking"
            )
        _add_override_flags(trust)
    skills = commands.add_parser("skills", help="the skills of this workspace and user")
    skills_commands = skills.add_subparsers(dest="skills_command", metavar="ACTION", required=True)
    skills_list = skills_commands.add_parser("list", help="each skill: who may run it, where")
    skills_list.add_argument("--json", action="store_true", help="machine-readable output")
    _add_override_flags(skills_list)
    hooks = commands.add_parser("hooks", help="lifecycle hooks: list them; trust a project's")
    hooks_commands = hooks.add_subparsers(dest="hooks_command", metavar="ACTION")
    hooks_list = hooks_commands.add_parser("list", help="every hook: event, matcher, command")
    hooks_list.add_argument("--json", action="store_true", help="machine-readable output")
    hooks_trust = hooks_commands.add_parser("trust", help="let this project's hooks run")
    hooks_trust.add_argument("--all", action="store_true", help="trust them without asking")
    hooks_untrust = hooks_commands.add_parser("untrust", help="forget that trust")
    for hooks_parser in (hooks_list, hooks_trust, hooks_untrust):
        _add_override_flags(hooks_parser)
    completion = commands.add_parser(
        "completion", help="print the shell completion script (eval it in your shell's rc file)"
    )
    completion.add_argument("shell", choices=SHELLS)
    # A subcommand missing from COMMANDS would be taken for a prompt and never run.
    assert set(commands.choices) == set(COMMANDS), "add the new subcommand to COMMANDS"
    return parser


def _add_mode_flag(parser: argparse.ArgumentParser) -> None:
    """The app's `--mode` (exec has its own, which does not ask)."""
    parser.add_argument(
        "--mode",
        choices=["plan", "agent", "yolo"],
        default=argparse.SUPPRESS,
        help="start in plan (read-only), agent (default) or yolo (the app asks to confirm)",
    )


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


def build_launch_parser() -> argparse.ArgumentParser:
    """`codewhale [options] PROMPT`: the app, with a first prompt (no subcommands here)."""
    parser = argparse.ArgumentParser(
        prog="codewhale",
        description="Open the full-screen app and send PROMPT as the first turn.",
        epilog=PROMPT_EPILOG,
    )
    _add_override_flags(parser)
    _add_resume_flags(parser)
    _add_mode_flag(parser)
    parser.add_argument("prompt", metavar="PROMPT", help="the first prompt, in quotes")
    parser.set_defaults(command=None)
    return parser


def _probe(argv: list[str]) -> argparse.Namespace | None:
    """The top-level options and the first positional argument (`word`) before any `--`;
    `extra` lists what the probe does not know (--help, --version, a subcommand's flags).
    None when an option is malformed: the full parser then reports it.

    argparse cannot tell a free-text prompt from a subcommand name on its own (an
    optional positional before the subparsers swallows `exec`), so this looks first.
    """
    head = argv[: argv.index("--")] if "--" in argv else argv
    probe = argparse.ArgumentParser(add_help=False, exit_on_error=False)
    _add_override_flags(probe)
    _add_resume_flags(probe)
    _add_mode_flag(probe)
    probe.add_argument("word", nargs="?")
    try:
        known, extra = probe.parse_known_args(head)
    except argparse.ArgumentError:
        return None
    known.extra = extra
    return known


def parse_arguments(argv: list[str]) -> argparse.Namespace:
    """Subcommands as usual; any other first word (or anything after `--`) is a prompt."""
    probe = _probe(argv)
    word = probe.word if probe is not None else None
    if probe is not None and word is None and not probe.extra and "--" not in argv:
        # Plain `codewhale [options]`: the probe read it all. Building the full parser, with
        # every subcommand's, would cost the app's start ~10 ms for the same answer.
        del probe.word, probe.extra
        probe.command = None
        return probe
    if word in COMMANDS or (word is None and "--" not in argv):
        return build_parser().parse_args(argv)
    parser = build_launch_parser()
    args, extra = parser.parse_known_args(argv)
    if extra and not any(item.startswith("-") for item in extra):
        words = " ".join([args.prompt, *extra])
        parser.error(f'the prompt is one argument; quote it: codewhale "{words}"')
    if extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    if "_ARGCOMPLETE" in os.environ:  # the shell asks for completions (`codewhale completion`)
        from argcomplete import autocomplete

        autocomplete(build_parser())  # prints them and exits
    args = parse_arguments(list(sys.argv[1:] if argv is None else argv))
    # Resolved once here so every command reads the same values the same way.
    args.workspace_path = Path(getattr(args, "workspace", None) or Path.cwd()).resolve()
    args.overrides = {
        key: value
        for key in ("provider", "model", "base_url", "reasoning_effort")
        if (value := getattr(args, key, None)) is not None
    }
    seal_environment()
    tolerate_unencodable()
    # What the app starts stays below it, where stopping finds it (process_tree); set here,
    # in the app's own process, not by library code a host process (a test) runs.
    adopt_orphans()
    tune_allocator()
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
    if args.command == "mcp":
        from codewhale.mcp.cli import run_mcp_command

        return run_mcp_command(args)
    if args.command == "skills":
        from codewhale.skills_cli import run_skills_command

        return run_skills_command(args)
    if args.command == "hooks":
        from codewhale.hooks.cli import run_hooks_command

        return run_hooks_command(args)
    if args.command == "completion":
        from argcomplete import shellcode

        print(shellcode(["codewhale"], shell=args.shell))
        return 0
    if os.environ.get("TERM") == "dumb":
        print(
            "codewhale: this terminal (TERM=dumb) cannot show the full-screen app; "
            'run one task with `codewhale exec "task"` instead.',
            file=sys.stderr,
        )
        return 2
    from codewhale.tui.launch import launch_tui

    return launch_tui(args)


if __name__ == "__main__":
    sys.exit(main())
