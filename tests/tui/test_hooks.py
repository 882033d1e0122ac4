"""/hooks lists the session's hooks, /hooks trust lets a project's run, and each run is
one line in the transcript; a project's untrusted hooks are asked about as the session
opens, each command listed."""

from __future__ import annotations

import json
import os
import shlex
import tempfile
from pathlib import Path

import pytest

from codewhale.config import load_config
from codewhale.tui.app import CodeWhaleApp
from codewhale.tui.hooks_trust import HooksTrustScreen
from codewhale.tui.mcp_view import McpTrustScreen
from codewhale.tui.transcript import Notice
from tests.support.llm_server import Reply, ToolCallSpec
from tests.support.mcp import project_file
from tests.support.settings import TEST_KEY
from tests.tui.conftest import type_and_send, wait_for
from tests.tui.test_usage_commands import command, notices


def settings(command_text: str, matcher: str) -> str:
    group = {"matcher": matcher, "hooks": [{"type": "command", "command": command_text}]}
    return json.dumps({"hooks": {"PreToolUse": [group], "FutureEvent": [group]}})


async def test_hooks_are_listed_trusted_and_each_run_is_a_transcript_line(llm, make_app, workspace):
    user = Path(os.environ["CLAUDE_CONFIG_DIR"])
    user.mkdir(parents=True, exist_ok=True)
    (user / "settings.json").write_text(settings("true", "Read"))
    (workspace / ".claude").mkdir()
    (workspace / ".claude" / "settings.json").write_text(settings("exit 0", "Bash"))
    llm.enqueue(
        Reply(tool_calls=[ToolCallSpec("read_file", {"path": "."})]),
        Reply(text="read"),
    )
    app = make_app(workspace)
    async with app.run_test(size=(140, 40)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, HooksTrustScreen), timeout=20)
        await pilot.press("n")
        await wait_for(pilot, lambda: not isinstance(app.screen, HooksTrustScreen))
        listed = await command(pilot, app, "/hooks")
        assert "PreToolUse [Read] true (timeout 60 s)" in listed
        assert "PreToolUse [Bash] exit 0 (timeout 60 s)  [not trusted: does not run]" in listed
        assert "Unused events: FutureEvent" in listed
        trusted = await command(pilot, app, "/hooks trust")
        assert trusted == "Trusted 2 hook(s) of this project; they run from now on."
        assert "not trusted" not in await command(pilot, app, "/hooks")
        before = len(app.query(Notice))
        await type_and_send(pilot, "look")
        await wait_for(pilot, lambda: bool(llm.requests) and not app.turn_running, timeout=20)
        lines = [text for text in notices(app)[before:] if "hook" in text]
        assert len(lines) == 1 and lines[0].startswith("PreToolUse hook ok: true (")
        await app.action_quit()


FIXED = Path(tempfile.gettempdir()) / "codewhale-snapshot-hooks"


def project_hooks(workspace: Path, command_text: str, matcher: str = "Read") -> None:
    (workspace / ".claude").mkdir(exist_ok=True)
    (workspace / ".claude" / "settings.json").write_text(settings(command_text, matcher))


def shown_items(app) -> str:
    return "\n".join(str(item.render()) for item in app.screen.query(".item"))


async def hooks_dialog(pilot, app) -> str:
    """Wait for the hooks dialog to be on screen with its items; return what they say."""
    await wait_for(
        pilot,
        lambda: isinstance(app.screen, HooksTrustScreen) and bool(shown_items(app)),
        timeout=20,
    )
    return shown_items(app)


async def read_once(pilot, app, llm) -> None:
    """One turn whose model calls read_file: a PreToolUse hook on Read fires if it runs."""
    llm.enqueue(Reply(tool_calls=[ToolCallSpec("read_file", {"path": "."})]), Reply(text="read"))
    asked = len(llm.requests)
    await type_and_send(pilot, "look")
    await wait_for(pilot, lambda: len(llm.requests) >= asked + 2 and not app.turn_running, 20)


async def test_trusting_the_listed_hooks_lets_them_run_in_this_session(
    llm, make_app, workspace, tmp_path, isolated_home
):
    marker = tmp_path / "hook-ran"
    hook = f"touch {shlex.quote(str(marker))}"
    project_hooks(workspace, hook)
    app = make_app(workspace)
    async with app.run_test(size=(140, 40)) as pilot:
        shown = await hooks_dialog(pilot, app)
        assert "PreToolUse [Read]  from .claude/settings.json" in shown
        assert f"  runs: {hook}" in shown
        assert "FutureEvent [Read]" in shown  # every waiting hook is listed, used or not
        # The dialog replaces the warning line that pointed to /hooks trust.
        assert not [text for text in notices(app) if "until you trust them" in text]
        await pilot.press("t")
        await wait_for(pilot, lambda: not isinstance(app.screen, HooksTrustScreen))
        await wait_for(pilot, lambda: "Trusted 2 hook(s)" in "\n".join(notices(app)))
        await read_once(pilot, app, llm)
        assert marker.exists()
        trust = json.loads((isolated_home / "state" / "hooks-trust.json").read_text())
        assert hook in trust["workspaces"][str(workspace)].values()
        await app.action_quit()


async def test_not_now_leaves_the_hooks_off_and_the_next_launch_asks_again(
    llm, make_app, workspace, tmp_path, isolated_home
):
    marker = tmp_path / "hook-ran"
    project_hooks(workspace, f"touch {shlex.quote(str(marker))}")
    app = make_app(workspace)
    async with app.run_test(size=(140, 40)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, HooksTrustScreen), timeout=20)
        await pilot.press("n")
        await wait_for(pilot, lambda: not isinstance(app.screen, HooksTrustScreen))
        assert "This project's hooks stay off for this session." in notices(app)
        await read_once(pilot, app, llm)
        assert not marker.exists()
        assert not (isolated_home / "state" / "hooks-trust.json").exists()
        await app.action_quit()

    second = make_app(workspace)
    async with second.run_test(size=(140, 40)) as pilot:
        await wait_for(pilot, lambda: isinstance(second.screen, HooksTrustScreen), timeout=20)
        await second.action_quit()


async def test_the_dialog_shows_a_commands_escape_sequences_cleaned(make_app, workspace):
    project_hooks(workspace, "echo \x1b]0;owned\x07ok\x1b[2J;\nrm -rf ~\u202e")
    app = make_app(workspace)
    async with app.run_test(size=(140, 40)) as pilot:
        shown = await hooks_dialog(pilot, app)
        assert "  runs: echo ]0;ownedok[2J;\\nrm -rf ~" in shown
        assert not any(c in shown for c in "\x1b\x07\u202e")
        await app.action_quit()


async def test_untrusted_servers_and_hooks_are_asked_about_one_after_the_other(make_app, workspace):
    project_file(workspace, "fromrepo")
    project_hooks(workspace, "true")
    app = make_app(workspace)
    async with app.run_test(size=(140, 40)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, McpTrustScreen), timeout=20)
        assert not any(isinstance(s, HooksTrustScreen) for s in app.screen_stack)
        await pilot.press("n")
        await wait_for(pilot, lambda: isinstance(app.screen, HooksTrustScreen))
        assert not any(isinstance(s, McpTrustScreen) for s in app.screen_stack)
        await pilot.press("n")
        await wait_for(pilot, lambda: not isinstance(app.screen, HooksTrustScreen))
        await app.action_quit()


@pytest.fixture
def fixed_hooks_app(llm, monkeypatch):
    FIXED.mkdir(exist_ok=True)
    # Commands that are never run (the snapshot is taken before any answer).
    hooks = {
        "PreToolUse": [
            {"matcher": "Bash", "hooks": [{"type": "command", "command": "./scripts/guard.sh"}]}
        ],
        "PostToolUse": [
            {
                "matcher": "Edit|Write",
                "hooks": [{"type": "command", "command": 'npx prettier --write "$FILE"'}],
            }
        ],
    }
    (FIXED / ".claude").mkdir(exist_ok=True)
    (FIXED / ".claude" / "settings.json").write_text(json.dumps({"hooks": hooks}))
    monkeypatch.setenv("CODEWHALE_BASE_URL", llm.base_url)
    monkeypatch.setenv("DEEPSEEK_API_KEY", TEST_KEY)
    return lambda: CodeWhaleApp(load_config(workspace=FIXED), FIXED)


def test_snapshot_hooks_trust_dialog(snap_compare, fixed_hooks_app):
    app = fixed_hooks_app()

    async def run_before(pilot):
        await wait_for(pilot, lambda: isinstance(app.screen, HooksTrustScreen))
        await pilot.pause(0.2)

    assert snap_compare(app, terminal_size=(110, 28), run_before=run_before)
