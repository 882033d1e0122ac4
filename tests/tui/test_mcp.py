"""MCP servers in the real app: started after the session opens, `/mcp`, an MCP tool's
approval, and a project's .mcp.json asked about before anything of it starts."""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

import pytest

from codewhale.config import load_config
from codewhale.mcp.server import ServerState
from codewhale.tui.app import CodeWhaleApp
from codewhale.tui.approval import ApprovalScreen
from codewhale.tui.mcp_view import McpTrustScreen
from codewhale.tui.transcript import Notice
from tests.support.llm_server import Reply, ToolCallSpec
from tests.support.mcp import (
    DEMO_ARGS,
    DEMO_COMMAND,
    DEMO_ENV,
    demo_server,
    project_file,
    tool_results,
)
from tests.support.settings import TEST_KEY
from tests.tui.conftest import type_and_send, wait_for

FIXED = Path(tempfile.gettempdir()) / "codewhale-snapshot-mcp"


def user_config(home: Path, text: str) -> None:
    path = home / "config" / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def notices(app) -> str:
    return "\n".join(str(notice.render()) for notice in app.query(Notice))


def state_of(app, name: str) -> ServerState | None:
    if app.runtime is None:
        return None
    return next((s.state for s in app.runtime.mcp.statuses() if s.name == name), None)


async def test_slash_mcp_lists_servers_states_and_tools(make_app, workspace, isolated_home):
    user_config(isolated_home, demo_server("demo", trust="read_only"))
    app = make_app(workspace)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: state_of(app, "demo") is ServerState.READY, timeout=30)
        await type_and_send(pilot, "/mcp")
        await wait_for(pilot, lambda: "mcp__demo__echo" in notices(app))
        listing = notices(app)
        assert "demo  ready  (stdio, config, read-only, no approval)" in listing
        assert "  - mcp__demo__add: Add two integers; the result is structured." in listing
        assert "log: " in listing and "demo.log" in listing
        # The server's stderr never reached the screen.
        assert "demo server" not in listing
        await app.action_quit()


async def test_an_mcp_tool_asks_first_and_its_result_reaches_the_model(
    llm, make_app, workspace, isolated_home
):
    user_config(isolated_home, demo_server("demo"))
    llm.enqueue(Reply(tool_calls=[ToolCallSpec("mcp__demo__echo", {"text": "hi"}, id="e")]))
    llm.respond = lambda body: Reply(text="echoed")
    app = make_app(workspace)
    async with app.run_test(size=(120, 40)) as pilot:
        await type_and_send(pilot, "echo hi")
        await wait_for(pilot, lambda: isinstance(app.screen, ApprovalScreen), timeout=30)
        assert "MCP server demo: echo" in str(app.screen.request.summary)
        await pilot.press("y")
        await wait_for(pilot, lambda: not app.turn_running, timeout=20)
        assert tool_results(llm)["e"] == "hi"
        await app.action_quit()


async def test_a_project_mcp_json_starts_only_once_trusted(make_app, workspace, isolated_home):
    project_file(workspace, "fromrepo")
    app = make_app(workspace)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, McpTrustScreen), timeout=20)
        await pilot.press("n")
        await wait_for(pilot, lambda: not isinstance(app.screen, McpTrustScreen))
        assert state_of(app, "fromrepo") is ServerState.UNTRUSTED
        assert not (isolated_home / "state" / "mcp" / "fromrepo.log").exists()

        await type_and_send(pilot, "/mcp trust")
        await wait_for(pilot, lambda: isinstance(app.screen, McpTrustScreen))
        await pilot.press("t")
        await wait_for(pilot, lambda: state_of(app, "fromrepo") is ServerState.READY, timeout=30)
        assert "Trusted for this workspace: fromrepo" in notices(app)
        trust = json.loads((isolated_home / "state" / "mcp-trust.json").read_text())
        assert set(trust["workspaces"][str(workspace.resolve())]) == {"fromrepo"}
        await app.action_quit()

    # Remembered: the next session starts it without asking.
    second = make_app(workspace)
    async with second.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: state_of(second, "fromrepo") is ServerState.READY, timeout=30)
        assert not isinstance(second.screen, McpTrustScreen)
        await second.action_quit()


async def test_a_t_typed_as_the_trust_dialog_opens_does_not_trust(
    make_app, workspace, isolated_home
):
    project_file(workspace, "fromrepo")
    app = make_app(workspace)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, McpTrustScreen), timeout=20)
        dialog = app.screen
        # As if it had just opened under a sentence being typed ("the t…", "no…").
        dialog.armed_at = time.monotonic() + 60
        await pilot.press("t", "n")
        await pilot.pause(0.05)
        assert app.screen is dialog
        assert state_of(app, "fromrepo") is ServerState.UNTRUSTED
        assert not (isolated_home / "state" / "mcp-trust.json").exists()
        dialog.armed_at = time.monotonic()
        await pilot.press("n")
        await wait_for(pilot, lambda: not isinstance(app.screen, McpTrustScreen))
        await app.action_quit()


async def test_the_trust_dialog_shows_what_each_server_gets_and_keys_stay_out(
    make_app, workspace, isolated_home, tmp_path, monkeypatch
):
    record = tmp_path / "plain.jsonl"
    monkeypatch.setenv("PROJECT_LABEL", "label-31337")
    monkeypatch.setenv("GITHUB_TOKEN", "ghp-github-token-4444444444")
    user_config(isolated_home, '[mcp]\nproject_env = ["PROJECT_LABEL"]\n')
    servers = {
        "plain": {
            "command": DEMO_COMMAND,
            "args": [*DEMO_ARGS, "--record", str(record), "--label=${PROJECT_LABEL}"],
            "env": {**DEMO_ENV, "GH": "${GITHUB_TOKEN}"},
        },
        "web": {
            "url": "http://127.0.0.1:9/mcp?key=${DEEPSEEK_API_KEY}&v=1",
            "headers": {
                "Authorization": "Bearer ${DEEPSEEK_API_KEY}",
                "X-Label": "${PROJECT_LABEL}",
            },
        },
    }
    (workspace / ".mcp.json").write_text(json.dumps({"mcpServers": servers}))
    app = make_app(workspace)
    async with app.run_test(size=(120, 50)) as pilot:
        await wait_for(
            pilot,
            lambda: isinstance(app.screen, McpTrustScreen) and bool(app.screen.query(".item")),
            timeout=20,
        )
        shown = "\n".join(str(s.render()) for s in app.screen.query(".item"))
        assert f"--record {record} --label=${{PROJECT_LABEL}}" in shown
        assert "  env:     PYTHONPATH, GH" in shown
        assert "    ${GITHUB_TOKEN} in env GH: refused: a secret-looking name" in shown
        assert "    ${PROJECT_LABEL} in args: allowed by mcp.project_env" in shown
        assert "  url:     http://127.0.0.1:9/mcp?key=${DEEPSEEK_API_KEY}&v=1" in shown
        assert "  headers: Authorization, X-Label" in shown
        assert "    ${DEEPSEEK_API_KEY} in header Authorization: refused: the app's own" in shown
        assert "    ${PROJECT_LABEL} in header X-Label: allowed by mcp.project_env" in shown
        assert "label-31337" not in shown and "ghp-" not in shown and TEST_KEY not in shown

        app.screen.armed_at = time.monotonic()
        await pilot.press("t")
        await wait_for(pilot, lambda: state_of(app, "web") is ServerState.FAILED, timeout=30)
        await wait_for(pilot, lambda: state_of(app, "plain") is ServerState.FAILED, timeout=30)
        await wait_for(pilot, lambda: "'web' cannot start" in notices(app))
        assert "${DEEPSEEK_API_KEY} in url (the app's own API key" in notices(app)
        assert "${GITHUB_TOKEN} in env GH" in notices(app)
        assert not record.exists()  # refused before anything ran
        await app.action_quit()


@pytest.fixture
def fixed_mcp_app(llm, monkeypatch):
    FIXED.mkdir(exist_ok=True)
    # A command that is never run (the snapshot is taken before any answer): what the
    # dialog shows is the same on every machine.
    servers = {
        "docs": {
            "command": "npx",
            "args": ["-y", "@example/docs-mcp"],
            "env": {"DOCS_TOKEN": "${DOCS_TOKEN}"},
        }
    }
    (FIXED / ".mcp.json").write_text(json.dumps({"mcpServers": servers}))
    monkeypatch.setenv("CODEWHALE_BASE_URL", llm.base_url)
    monkeypatch.setenv("DEEPSEEK_API_KEY", TEST_KEY)
    return lambda: CodeWhaleApp(load_config(workspace=FIXED), FIXED)


def test_snapshot_mcp_trust_dialog(snap_compare, fixed_mcp_app):
    app = fixed_mcp_app()

    async def run_before(pilot):
        await wait_for(pilot, lambda: isinstance(app.screen, McpTrustScreen))
        await pilot.pause(0.2)

    assert snap_compare(app, terminal_size=(110, 28), run_before=run_before)
