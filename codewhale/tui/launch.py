"""Start the full-screen app: load config first so errors print plainly, then import Textual."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from codewhale.config import ConfigError, load_config


def _overrides(args: argparse.Namespace) -> dict[str, str]:
    """CLI flags that were actually given, keyed by config key."""
    return {
        key: value
        for key in ("provider", "model", "base_url")
        if (value := getattr(args, key, None)) is not None
    }


def launch_tui(args: argparse.Namespace) -> int:
    workspace = Path(getattr(args, "workspace", None) or Path.cwd()).resolve()
    if not workspace.is_dir():
        print(f"codewhale: workspace {workspace} is not a directory", file=sys.stderr)
        return 2
    try:
        loaded = load_config(workspace=workspace, overrides=_overrides(args))
    except ConfigError as error:
        print(f"codewhale: config error: {error}", file=sys.stderr)
        return 2
    from codewhale.tui.app import CodeWhaleApp

    CodeWhaleApp(loaded).run()
    return 0
