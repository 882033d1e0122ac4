"""Cold-start hygiene: cheap commands must not import the UI or network stacks, and the
app's first frame imports only Textual and the widgets on it."""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from codewhale import __version__
from codewhale.paths import user_dirs
from codewhale.permissions import Mode
from codewhale.tui.launch import check, launch_tui
from codewhale.tui.launch_receipt import (
    RECEIPT_FILE,
    Appearance,
    OpeningStatus,
    remember_opening_status,
)

PROBE = """
import sys
from codewhale.cli import main
try:
    main({argv!r})
except SystemExit:
    pass
heavy = sorted(m for m in ("textual", "httpx", "httpx_sse", "rich") if m in sys.modules)
print("HEAVY=" + ",".join(heavy))
"""


def _heavy_modules_after(argv: list[str]) -> str:
    result = subprocess.run(
        [sys.executable, "-c", PROBE.format(argv=argv)],
        capture_output=True,
        text=True,
        check=True,
    )
    return result.stdout.strip().splitlines()[-1]


@pytest.mark.parametrize("argv", [["--version"], ["config", "show"], ["config", "path"]])
def test_cheap_commands_do_not_import_textual_or_httpx(argv):
    heavy = _heavy_modules_after(argv)
    assert "textual" not in heavy and "httpx" not in heavy, heavy


def test_version_flag_prints_the_package_version():
    result = subprocess.run(
        [sys.executable, "-m", "codewhale", "--version"], capture_output=True, text=True
    )
    assert result.returncode == 0
    assert result.stdout.strip() == f"codewhale {__version__}"


# -- paint first: what the app's first frame may import ------------------------------------

FIRST_FRAME = """
import asyncio, json, sys, tempfile
from pathlib import Path
from codewhale.tui.app import CodeWhaleApp
from codewhale.tui.launch_receipt import Appearance


class Watched(CodeWhaleApp):
    CSS_PATH = str(Path(sys.modules[CodeWhaleApp.__module__].__file__).with_name("app.tcss"))
    first_frame = {}

    def on_mount(self):
        # Textual then runs the app's own on_mount (handlers run down the MRO), so this is
        # registered first: it runs after the first frame, before any session work.
        self.call_after_refresh(self.record_first_frame)

    def record_first_frame(self):
        self.first_frame = {
            "modules": sorted(sys.modules),
            "composer": self.composer.region.area,
            "status": str(self.query_one("#status").render()),
            "runtime": self.runtime is not None,
        }


async def opened(pilot):
    app = pilot.app
    after = {"modules": sorted(sys.modules), "runtime": app.runtime is not None}
    print(json.dumps({"first_frame": app.first_frame, "opened": after}), flush=True)
    app.exit()


# As launch_tui builds it when a receipt vouched for the config: no config read yet.
app = Watched(Appearance(theme="textual-dark", sidebar=True), Path(tempfile.mkdtemp()))
asyncio.run(app.run_async(headless=True, size=(120, 40), auto_pilot=opened))
"""

# Loaded only once the session opens, after the first frame, each for a reason: the
# config models (the config is read with the session), the provider client
# (its own HTTP, not httpx), agent definitions (YAML), the engine, the session's assembly and the
# sub-agent manager. The events a front end consumes (engine and sub-agent events, agent
# snapshots with their records) come with the session too: the widgets of the first
# frame name them for typing only, and the app reads them when the first event arrives.
AFTER_FIRST_FRAME = [
    "codewhale.config",
    "codewhale.config_models",
    "codewhale.providers.client",
    "yaml",
    "codewhale.subagents.definitions",
    "codewhale.engine",
    "codewhale.engine.loop",
    "codewhale.engine.events",
    "codewhale.engine.compaction",
    "codewhale.runtime.events",
    "codewhale.subagents.events",
    "codewhale.subagents.records",
    "codewhale.subagents.worktree",
    "codewhale.runtime.build",
    "codewhale.runtime.runtime",
    "codewhale.subagents.manager",
    "codewhale.tui.command_handlers",
    "mcp",  # the MCP SDK: loaded when a server starts, after the session opens (docs/MCP.md)
]
# Loaded with the first cell that shows them: an answer (Textual's Markdown widget and
# markdown-it, tui/answer.py), a diff opened or an approval's preview (rich.syntax and
# pygments), the history of a resumed session, the approval dialog, the first sub-agent
# row (its role's colour), fetch_url or an MCP server over HTTP (httpx), the MCP SDK's
# protocol models or a damaged sub-agent record's diagnosis (pydantic).
ON_FIRST_USE = [
    "httpx",
    "pydantic",
    "codewhale.tui.answer",
    "textual.widgets._markdown",
    "markdown_it",
    "rich.syntax",
    "pygments",
    "codewhale.tui.history",
    "codewhale.tui.approval",
    "codewhale.subagents.roles",
]
# Not needed at all: the launch receipt's digest is Python's own SHA-256, not hashlib's,
# which loads OpenSSL first (2 ms).
NEVER = ["hashlib"]


@pytest.fixture(scope="module")
def first_start(tmp_path_factory):
    home = tmp_path_factory.mktemp("home")
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("CODEWHALE_", "DEEPSEEK_"))},
        "CODEWHALE_HOME": str(home),
        "DEEPSEEK_API_KEY": "sk-startup-0000000000",
        "CODEWHALE_BASE_URL": "http://127.0.0.1:9/v1",
    }
    result = subprocess.run(
        [sys.executable, "-c", FIRST_FRAME], capture_output=True, text=True, env=env, timeout=60
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_the_first_frame_is_the_whole_layout_before_the_session(first_start):
    frame = first_start["first_frame"]
    assert frame["composer"] > 0
    assert "starting…" in frame["status"]
    assert not frame["runtime"]


@pytest.mark.parametrize("module", AFTER_FIRST_FRAME + ON_FIRST_USE + NEVER)
def test_the_first_frame_does_not_import(first_start, module):
    assert module not in first_start["first_frame"]["modules"]


def test_the_session_then_opens_and_loads_them(first_start):
    opened = first_start["opened"]
    assert opened["runtime"]
    assert {
        "codewhale.config_models",
        "codewhale.providers.client",
        "codewhale.engine.loop",
    } <= set(opened["modules"])
    # The config is checked by hand (config_tables.py): pydantic costs a session ~100 ms.
    assert "pydantic" not in opened["modules"]
    # The model client speaks HTTP itself: httpx is for fetch_url and MCP, when used.
    assert not {"httpx", "httpcore"} & set(opened["modules"])


HTTP_STACKS = """
import sys
import codewhale.providers.client
import codewhale.headless
from codewhale.runtime import Runtime, open_runtime
print(",".join(m for m in ("httpx", "httpcore") if m in sys.modules))
"""


def test_the_model_client_and_the_runtime_import_neither_httpx_nor_httpcore():
    """The client, the runtime (its names resolved, so its modules load) and exec's
    front end, in a fresh interpreter: httpcore only ever comes for a proxy."""
    result = subprocess.run(
        [sys.executable, "-c", HTTP_STACKS], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == ""


# -- the launch receipt: checks that passed for exactly this setup are not repeated ---------


def launch_args(workspace: Path, **values) -> argparse.Namespace:
    return argparse.Namespace(
        **{"workspace_path": workspace, "overrides": {}, "resume": None} | values
    )


@pytest.fixture
def keyed_setup(isolated_home, monkeypatch, tmp_path):
    """A workspace, a key in the env and a user config (no offline model standing in)."""
    monkeypatch.setenv("DEEPSEEK_API_KEY", "sk-receipt-0000000000")
    config = isolated_home / "config" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text('offline_fallback = false\n[tui]\ntheme = "nord"\n')
    workspace = tmp_path / "repo"
    workspace.mkdir()
    return workspace, config


def test_a_passed_check_is_remembered_with_what_the_first_frame_needs(keyed_setup):
    workspace, _ = keyed_setup
    first = check(launch_args(workspace))
    assert first.config.tui.theme == "nord"  # read and validated: a LoadedConfig
    assert check(launch_args(workspace)) == Appearance(theme="nord", sidebar=True)


OPENED = OpeningStatus(Mode.AGENT, "deepseek-v4-pro", None, True, (4_959, 128_000))


def test_a_new_sessions_status_line_is_kept_with_the_receipt(keyed_setup):
    workspace, _ = keyed_setup
    remember_opening_status(workspace, {}, OPENED)  # no checks passed yet: nothing kept
    assert not (user_dirs().state_dir / RECEIPT_FILE).exists()
    check(launch_args(workspace))
    remember_opening_status(workspace, {}, OPENED)
    assert check(launch_args(workspace)) == Appearance("nord", True, OPENED)
    # Kept per setup: other flags have their own receipt, with no status yet.
    other = launch_args(workspace, overrides={"model": "deepseek-v4-flash"})
    check(other)
    assert check(other) == Appearance("nord", True, None)


def test_a_resumed_sessions_status_line_is_kept_beside_a_new_ones(keyed_setup):
    workspace, _ = keyed_setup
    check(launch_args(workspace))
    remember_opening_status(workspace, {}, OPENED)  # as a receipt from before `tools` was
    assert check(launch_args(workspace)).for_resume() is None  # no guess without it
    resumed = replace(OPENED, context=(90_000, 128_000), tools=3_000)
    remember_opening_status(workspace, {}, resumed, resumed=True)
    kept = check(launch_args(workspace))
    assert kept == Appearance("nord", True, OPENED, resumed)
    assert kept.for_resume() == resumed
    # Without a resumed session's, a new one's says as much (the window, the tools' share).
    opened = replace(OPENED, tools=3_000)
    remember_opening_status(workspace, {}, opened)
    receipts = user_dirs().state_dir / RECEIPT_FILE
    entries = json.loads(receipts.read_text())
    for entry in entries.values():
        del entry["resumed"]
    receipts.write_text(json.dumps(entries))
    assert check(launch_args(workspace)).for_resume() == opened
    # A share that does not read back is not guessed from; the rest of the line still is.
    for entry in entries.values():
        entry["status"]["tools"] = "many"
    receipts.write_text(json.dumps(entries))
    kept = check(launch_args(workspace))
    assert kept.status == OPENED and kept.for_resume() is None


@pytest.mark.parametrize(
    "status",
    [
        {"mode": "turbo", "model": "m", "limits": None, "sandboxed": True, "context": [1, 2]},
        {"mode": "agent", "model": "m", "limits": None, "sandboxed": "yes", "context": [1, 2]},
        {"mode": "agent", "model": "m", "limits": None, "sandboxed": True, "context": [1]},
        {"mode": "agent", "model": 3, "limits": None, "sandboxed": True, "context": [1, 2]},
        "agent deepseek",
    ],
)
def test_a_remembered_status_line_that_does_not_parse_is_left_out(keyed_setup, status):
    workspace, _ = keyed_setup
    check(launch_args(workspace))
    receipts = user_dirs().state_dir / RECEIPT_FILE
    entries = json.loads(receipts.read_text())
    for entry in entries.values():
        entry["status"] = status
    receipts.write_text(json.dumps(entries))
    assert check(launch_args(workspace)) == Appearance("nord", True, None)


def test_a_config_broken_after_a_passed_check_is_refused(keyed_setup):
    workspace, config = keyed_setup
    check(launch_args(workspace))
    config.write_text("[network]\nmax_retries = 'many'\n")
    assert check(launch_args(workspace)).startswith("config error:")


def test_a_key_unset_after_a_passed_check_is_refused(keyed_setup, monkeypatch):
    workspace, _ = keyed_setup
    check(launch_args(workspace))
    monkeypatch.delenv("DEEPSEEK_API_KEY")
    assert "needs an API key" in check(launch_args(workspace))


def test_other_flags_and_workspaces_are_checked_afresh(keyed_setup, tmp_path):
    workspace, _ = keyed_setup
    check(launch_args(workspace))
    assert "unknown provider" in check(launch_args(workspace, overrides={"provider": "nope"}))
    other = tmp_path / "other"
    (other / ".codewhale").mkdir(parents=True)
    (other / ".codewhale" / "config.toml").write_text("[tui]\nsidebar = 3\n")
    assert check(launch_args(other)).startswith("config error:")


def test_an_unknown_session_is_refused_on_a_receipt_too(keyed_setup):
    workspace, _ = keyed_setup
    check(launch_args(workspace))
    assert "no session 'sess_nope'" in check(launch_args(workspace, resume="sess_nope"))


def test_the_launch_pauses_the_collector_until_the_first_frame(keyed_setup, monkeypatch):
    workspace, config = keyed_setup
    from codewhale.tui.app import CodeWhaleApp

    collecting: list[bool] = []

    def run(app: CodeWhaleApp) -> None:
        collecting.append(gc.isenabled())  # starting: still paused
        app._first_frame_drawn(asyncio.Event())  # as on_mount's after-refresh calls it
        collecting.append(gc.isenabled())

    monkeypatch.setattr(CodeWhaleApp, "run", run)
    monkeypatch.setattr("codewhale.tui.launch.attached_to_terminal", lambda: True)
    try:
        assert launch_tui(launch_args(workspace)) == 0
        assert collecting == [False, True]  # on again once the first frame is drawn
        config.write_text("[network]\nmax_retries = 'many'\n")
        assert launch_tui(launch_args(workspace)) == 2  # refused: on again
        assert gc.isenabled()
    finally:
        gc.enable()
        gc.unfreeze()  # what launch_tui froze goes back into this test process's collection


SECOND_START = """
import argparse, sys
from pathlib import Path
from codewhale.tui.launch import check

checked = check(argparse.Namespace(workspace_path=Path(sys.argv[1]), overrides={}, resume=None))
print(type(checked).__name__, "codewhale.config_models" in sys.modules)
"""


def test_a_second_start_checks_without_loading_the_config_models(keyed_setup):
    workspace, _ = keyed_setup

    def start() -> str:
        command = [sys.executable, "-c", SECOND_START, str(workspace)]
        return subprocess.run(command, capture_output=True, text=True, check=True).stdout

    assert start().split() == ["LoadedConfig", "True"]
    assert start().split() == ["Appearance", "False"]


def test_a_whole_exec_run_imports_neither_textual_nor_httpx(llm, tmp_path):
    """`codewhale exec` is the headless path: a run with a tool call and an answer imports
    no module of the UI stack, nor httpx or httpcore (the model client speaks HTTP itself;
    issue 31's import hygiene), seen by `-X importtime`."""
    from tests.support.llm_server import Reply, ToolCallSpec
    from tests.support.settings import TEST_KEY, app_environment

    (tmp_path / "notes.txt").write_text("hello\n")
    llm.enqueue(
        Reply(tool_calls=[ToolCallSpec("read_file", {"path": "notes.txt"})]), Reply(text="ok")
    )
    env = app_environment(
        CODEWHALE_HOME=str(tmp_path / "home"),
        CODEWHALE_BASE_URL=llm.base_url,
        DEEPSEEK_API_KEY=TEST_KEY,
    )
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "codewhale", "exec", "-C", str(tmp_path), "go"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    imported = {line.rsplit("|", 1)[-1].strip() for line in result.stderr.splitlines()}
    assert "codewhale.headless" in imported  # the probe sees the run's own modules
    ui = {n for n in imported if n == "textual" or n.startswith(("textual.", "codewhale.tui"))}
    assert not ui, sorted(ui)
    assert not {"httpx", "httpcore"} & imported
