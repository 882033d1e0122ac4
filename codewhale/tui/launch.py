"""Start the full-screen app, after every check that can fail has printed plainly.

Order: workspace, config, `--resume` id, API key, then the terminal. Each problem
before the terminal check would stop the app in any terminal and names its own fix,
so a script that runs `codewhale --resume nope < /dev/null` learns the real problem.
Textual is imported only once all of them pass.

The config and key checks are skipped when a receipt says they passed for exactly this
setup (tui/launch_receipt.py): the config models then load after the first frame.

When the app ends, the session it had open is named with its spend and `--resume` line.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from codewhale.paths import user_dirs
from codewhale.permissions import Mode
from codewhale.tui import launch_receipt
from codewhale.tui.launch_receipt import Appearance

if TYPE_CHECKING:
    from codewhale.config import LoadedConfig
    from codewhale.runtime import Runtime

NO_TERMINAL = (
    "the full-screen app needs a terminal (stdin, stdout and stderr); "
    'for scripts and pipes use `codewhale exec "task"`'
)


def launch_tui(args: argparse.Namespace) -> int:
    # What loads before the first frame (modules, classes, the config) lives as long as the
    # app: the collector, scanning it while it loads, finds nothing to free. Measured, a full
    # collection alone cost 12 ms of the first frame. Paused meanwhile, then frozen out of
    # its reach (as runtime/build.py does once the session is open).
    gc.disable()
    try:
        checked = check(args)
        if isinstance(checked, str):
            return _refuse(checked)
        if not attached_to_terminal():
            return _refuse(NO_TERMINAL)
        from codewhale.tui.app import CodeWhaleApp
    finally:
        gc.freeze()
        gc.enable()
    app = CodeWhaleApp(
        checked,
        args.workspace_path,
        resume=getattr(args, "resume", None),
        continue_latest=getattr(args, "continue_latest", False),
        overrides=args.overrides,
        initial_prompt=getattr(args, "prompt", None),
        mode=start_mode(args),
    )
    app.run()
    if app.closed_session is not None:
        # After a hangup the terminal is gone: the summary then has nowhere to go.
        with contextlib.suppress(OSError):
            print(exit_summary(app.closed_session), flush=True)
    # 129 or 143 when SIGHUP or SIGTERM ended it (tui/hangup.py), as a shell would say.
    return app.return_code or 0


def start_mode(args: argparse.Namespace) -> Mode | None:
    """`--mode`, if given; the app asks before it enters YOLO."""
    mode = getattr(args, "mode", None)
    return Mode(mode) if mode else None


def check(args: argparse.Namespace) -> LoadedConfig | Appearance | str:
    """What the app starts with (the config read, or a receipt's first-frame settings),
    or the first problem found: workspace, config, `--resume` id, API key."""
    workspace = args.workspace_path
    if not workspace.is_dir():
        return f"workspace {workspace} is not a directory"
    state_dir = user_dirs().state_dir
    receipt = launch_receipt.digest(workspace, args.overrides)
    appearance = launch_receipt.recall(receipt, state_dir)
    resume = getattr(args, "resume", None)
    if appearance is not None:  # config and key passed for exactly this setup before
        return (resume and unknown_session(resume)) or appearance
    from codewhale.config import ConfigError, load_config  # pydantic: about 75 ms

    try:
        loaded = load_config(workspace=workspace, overrides=args.overrides)
    except ConfigError as error:
        return f"config error: {error}"
    problem = (resume and unknown_session(resume)) or missing_key(loaded)
    if problem:
        return problem
    # With the status line a session here last opened with: this start paints it too.
    launch_receipt.remember(receipt, state_dir, Appearance.guessed(loaded), workspace)
    return loaded


def exit_summary(runtime: Runtime) -> str:
    """What the terminal keeps once the app is gone: the session, its spend, how to return."""
    from codewhale.providers.pricing import format_cost

    usage = runtime.usage
    spend = f"{usage.input_tokens:,} tokens in, {usage.output_tokens:,} out"
    if cost := format_cost(runtime.cost_usd):
        spend += f", {cost}"
    # A session resumes into the workspace it is resumed from: name it if not this one.
    here = runtime.workspace == Path.cwd().resolve()
    where = "" if here else f"-C {shlex.quote(str(runtime.workspace))} "
    return (
        f"session {runtime.info.id}: {spend}\n"
        f"resume it with: codewhale {where}--resume {runtime.info.id}"
    )


def _refuse(problem: str) -> int:
    print(f"codewhale: {problem}", file=sys.stderr)
    return 2


def attached_to_terminal() -> bool:
    """Keys come from stdin; Textual draws on stderr; stdout redirected means a script."""
    return all(stream.isatty() for stream in (sys.stdin, sys.stdout, sys.stderr))


def unknown_session(session_id: str) -> str | None:
    from codewhale.sessions.store import SessionError, SessionStore  # only for --resume

    try:
        # Its header only: the app parses the messages once, when the session opens.
        SessionStore(user_dirs().data_dir).info(session_id)
    except SessionError as error:
        return str(error)  # names the id and `codewhale sessions list`
    return None


def missing_key(loaded: LoadedConfig) -> str | None:
    """What to do when the provider needs a key, none is set and no offline model stands in."""
    from codewhale.providers.key_help import lacks_key, missing_key_help  # a checked config

    settings = loaded.provider_settings()
    return missing_key_help(settings, loaded.user_file) if lacks_key(settings) else None
