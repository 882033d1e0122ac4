"""`codewhale sessions list`."""

from __future__ import annotations

import argparse
import time

from codewhale.paths import user_dirs
from codewhale.sanitize import clean_text
from codewhale.sessions.store import SessionInfo, SessionStore


def run_sessions_command(args: argparse.Namespace) -> int:
    if getattr(args, "sessions_command", None) != "list":
        print("usage: codewhale sessions list [--all]")
        return 2
    workspace = args.workspace_path
    sessions = SessionStore(user_dirs().data_dir).list(None if args.all else workspace)
    if not sessions:
        print("No saved sessions" + ("." if args.all else f" for {workspace}."))
        return 0
    for info in sessions:
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(info.created_at))
        title = clean_text(info.title).replace("\n", " ")[:60]
        where = f"  {info.workspace}" if args.all else ""
        print(f"{info.id}  {when}  {info.model:<20} {title}{where}{_damage_note(info)}")
    return 0


def _damage_note(info: SessionInfo) -> str:
    """How to repair a session whose header line is damaged (resuming rewrites it)."""
    if not info.recovered:
        return ""
    if info.workspace:
        return f"  [header damaged: `codewhale --resume {info.id}` repairs it]"
    return (
        f"  [header damaged, workspace unknown: `codewhale -C <its workspace> --resume "
        f"{info.id}` repairs it]"
    )
