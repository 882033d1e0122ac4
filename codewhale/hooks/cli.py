"""`codewhale hooks list | trust | untrust`: a workspace's hooks without the app."""

from __future__ import annotations

import argparse
import json
import os
import sys

from codewhale.config import load_for_command
from codewhale.hooks.listing import hook_lines
from codewhale.hooks.session import Hooks, open_hooks
from codewhale.paths import user_dirs
from codewhale.sanitize import clean_text

USAGE = """usage: codewhale hooks ACTION

  list [--json]    every hook by file: event, matcher, command, whether it runs
  trust [--all]    let this project's hooks run: shown, then asked (y/N), or at once with --all
  untrust          forget that trust
"""


def run_hooks_command(args: argparse.Namespace) -> int:
    action = getattr(args, "hooks_command", None)
    if action is None:
        print(USAGE, file=sys.stderr, end="")
        return 2
    if (loaded := load_for_command(args.workspace_path, args.overrides)) is None:
        return 2
    hooks = open_hooks(
        workspace=args.workspace_path,
        user_config=loaded.user_file,
        project_config=loaded.project_file,
        state_dir=user_dirs().state_dir,
        env=os.environ,
    )
    for problem in hooks.problems:
        print(f"warning: {problem}", file=sys.stderr)
    if action == "list":
        return _list(hooks, as_json=args.json)
    if action == "untrust":
        assert hooks.trust_store is not None
        hooks.trust_store.revoke(args.workspace_path)
        print(f"This project's hooks no longer run in {args.workspace_path}.")
        return 0
    return _trust(hooks, every=args.all)


def _list(hooks: Hooks, *, as_json: bool) -> int:
    if not as_json:
        print("\n".join(hook_lines(hooks.entries, hooks.is_trusted)))
        return 0
    document = {
        "hooks": [
            {
                "event": entry.event,
                "matcher": entry.matcher.text,
                "command": entry.command,
                "timeout": entry.timeout_secs,
                "source": str(entry.source),
                "key": entry.key,
                "project": entry.project,
                "trusted": hooks.is_trusted(entry),
                "emitted": entry.emitted,
            }
            for entry in hooks.entries
        ],
        "problems": hooks.problems,
    }
    print(json.dumps(document, indent=2, ensure_ascii=False))
    return 0


def _trust(hooks: Hooks, *, every: bool) -> int:
    waiting = hooks.untrusted()
    if not waiting:
        print("No hook of this project is waiting for trust.")
        return 0
    print("Trusting lets these commands run on your machine, outside the sandbox:")
    for entry in waiting:
        # Text from a cloned repository: cleaned before it reaches the terminal.
        print(
            f"  {clean_text(entry.event)} [{clean_text(entry.matcher.text) or '*'}] "
            f"{clean_text(entry.command)}  ({entry.source})"
        )
    if not every:
        if not sys.stdin.isatty():
            print(
                "codewhale: not asking without a terminal: pass --all to trust them",
                file=sys.stderr,
            )
            return 2
        if input("Trust them for this workspace? [y/N] ").strip().lower() not in ("y", "yes"):
            print("Nothing trusted.")
            return 1
    hooks.trust_all()
    print(f"Trusted {len(waiting)} hook(s) for {hooks.workspace}.")
    return 0
