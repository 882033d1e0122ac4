"""Start the full-screen app, after every check that can fail has printed plainly.

Order: workspace, config, `--resume` id, API key, then the terminal. Each problem
before the terminal check would stop the app in any terminal and names its own fix,
so a script that runs `codewhale --resume nope < /dev/null` learns the real problem.

The config and key checks are skipped when a receipt says they passed for exactly this
setup (tui/launch_receipt.py): the config models then load after the first frame. When
they must run and a terminal is attached, a forked child runs them while this process
loads Textual (tui/forked_checks.py); the app starts only once the child says they
passed, and a problem it found is printed as if checked here.

When the app ends, the session it had open is named with its spend and `--resume` line.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import shlex
import sys
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from codewhale.paths import user_dirs
from codewhale.permissions import Mode
from codewhale.tui import launch_receipt
from codewhale.tui.forked_checks import ForkedChecks
from codewhale.tui.launch_receipt import Appearance

if TYPE_CHECKING:
    from codewhale.config import LoadedConfig
    from codewhale.runtime import Runtime
    from codewhale.tui.app import CodeWhaleApp

NO_TERMINAL = (
    "the full-screen app needs a terminal (stdin, stdout and stderr); "
    'for scripts and pipes use `codewhale exec "task"`'
)


def launch_tui(args: argparse.Namespace) -> int:
    # What loads before the first frame (modules, classes, the config) lives as long as the
    # app: the collector, scanning it while it loads and while the first frame is built,
    # finds nothing to free. Measured, its passes cost the first frame 8-10 ms of CPU.
    # Paused until then (the app calls `collect_again` once it has drawn it).
    gc.disable()
    try:
        app = prepare(args)
    except BaseException:
        gc.enable()
        raise
    if isinstance(app, int):  # refused, and said why
        gc.enable()
        return app
    app.run()
    gc.enable()  # for an app that ended before its first frame
    if app.closed_session is not None:
        # After a hangup the terminal is gone: the summary then has nowhere to go.
        with contextlib.suppress(OSError):
            print(exit_summary(app.closed_session), flush=True)
    # 129 or 143 when SIGHUP or SIGTERM ended it (tui/hangup.py), as a shell would say.
    return app.return_code or 0


def prepare(args: argparse.Namespace) -> CodeWhaleApp | int:
    """The app, ready to run, or the exit code of a refusal (printed to stderr)."""
    if problem := workspace_problem(args):
        return _refuse(problem)
    key = launch_receipt.digest(args.workspace_path, args.overrides)
    checked: LoadedConfig | Appearance | str | None = recalled(args, key)
    forked = None
    if checked is None and attached_to_terminal():
        # A receipt miss: the checks run in a child while this process loads the app.
        forked = ForkedChecks.start(partial(problem_found, args, key))
    if checked is None and forked is None:
        checked = full_check(args, key)
    if isinstance(checked, str):
        return _refuse(checked)
    if not attached_to_terminal():
        return _refuse(NO_TERMINAL)
    from codewhale.tui.app import CodeWhaleApp

    if forked is not None:
        if problem := forked.problem():
            return _refuse(problem)
        # The first frame's settings, from the receipt the child kept (the `--resume` id
        # checked too); where it could not write one, checked here.
        checked = launch_receipt.recall(key, user_dirs().state_dir) or full_check(args, key)
        if isinstance(checked, str):
            return _refuse(checked)
    assert checked is not None
    return CodeWhaleApp(
        checked,
        args.workspace_path,
        resume=getattr(args, "resume", None),
        continue_latest=getattr(args, "continue_latest", False),
        overrides=args.overrides,
        initial_prompt=getattr(args, "prompt", None),
        mode=start_mode(args),
        on_first_frame=collect_again,
    )


def collect_again() -> None:
    """Once the first frame is drawn: what the start built (modules, classes, config) lives
    as long as the app, so it is frozen out of the collector's reach; then it runs again."""
    gc.freeze()
    gc.enable()


def start_mode(args: argparse.Namespace) -> Mode | None:
    """`--mode`, if given; the app asks before it enters YOLO."""
    mode = getattr(args, "mode", None)
    return Mode(mode) if mode else None


def check(args: argparse.Namespace) -> LoadedConfig | Appearance | str:
    """What the app starts with (the config read, or a receipt's first-frame settings),
    or the first problem found: workspace, config, `--resume` id, API key."""
    if problem := workspace_problem(args):
        return problem
    key = launch_receipt.digest(args.workspace_path, args.overrides)
    return recalled(args, key) or full_check(args, key)


def workspace_problem(args: argparse.Namespace) -> str | None:
    workspace = args.workspace_path
    return None if workspace.is_dir() else f"workspace {workspace} is not a directory"


def recalled(args: argparse.Namespace, key: str) -> Appearance | str | None:
    """The first frame's settings when the receipt `key` says the config and key checks
    passed for exactly this setup (the `--resume` id is still checked); None when they
    must run."""
    appearance = launch_receipt.recall(key, user_dirs().state_dir)
    if appearance is None:
        return None
    resume = getattr(args, "resume", None)
    return (resume and unknown_session(resume)) or appearance


def full_check(args: argparse.Namespace, key: str) -> LoadedConfig | str:
    """The config read and validated, the `--resume` id and the key checked; once they pass,
    the receipt `key` is kept so the next start with this setup can skip them."""
    from codewhale.config import ConfigError, load_config

    workspace = args.workspace_path
    try:
        loaded = load_config(workspace=workspace, overrides=args.overrides)
    except ConfigError as error:
        return f"config error: {error}"
    resume = getattr(args, "resume", None)
    problem = (resume and unknown_session(resume)) or missing_key(loaded)
    if problem:
        return problem
    # With the status line a session here last opened with: this start paints it too.
    launch_receipt.remember(key, user_dirs().state_dir, Appearance.guessed(loaded), workspace)
    return loaded


def problem_found(args: argparse.Namespace, key: str) -> str | None:
    """`full_check`'s verdict alone, as a forked child reports it."""
    checked = full_check(args, key)
    return checked if isinstance(checked, str) else None


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
