"""Start the full-screen app: load config first so errors print plainly, then import Textual."""

from __future__ import annotations

import argparse
import sys

from codewhale.config import ConfigError, load_config


def launch_tui(args: argparse.Namespace) -> int:
    workspace = args.workspace_path
    if not workspace.is_dir():
        print(f"codewhale: workspace {workspace} is not a directory", file=sys.stderr)
        return 2
    try:
        loaded = load_config(workspace=workspace, overrides=args.overrides)
    except ConfigError as error:
        print(f"codewhale: config error: {error}", file=sys.stderr)
        return 2
    from codewhale.tui.app import CodeWhaleApp

    CodeWhaleApp(
        loaded,
        workspace,
        resume=getattr(args, "resume", None),
        continue_latest=getattr(args, "continue_latest", False),
        overrides=args.overrides,
    ).run()
    return 0
