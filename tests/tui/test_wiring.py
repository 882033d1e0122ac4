"""What the command line and the slash commands hand the app reaches the session it opens.

Regressions: the app reopened its session from config alone (dropping --model, --provider
and --base-url); /clear was not written to the session file, so --continue brought the
cleared conversation back; and slash commands crashed the app when no session was open.
"""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from codewhale import cli
from codewhale.config import load_config
from codewhale.permissions import Mode
from codewhale.runtime import open_runtime
from codewhale.tui.app import NO_SESSION, CodeWhaleApp
from codewhale.tui.status import StatusLine
from codewhale.tui.transcript import AssistantMessage, Notice, UserMessage
from codewhale.tui.yolo_confirm import YoloConfirmScreen
from tests.support.llm_server import Reply
from tests.support.settings import TEST_KEY
from tests.tui.conftest import type_and_send, wait_for


def write_user_config(home: Path, text: str) -> None:
    path = home / "config" / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def dead_url() -> str:
    """A loopback URL nothing listens on: connecting is refused at once."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def launched(workspace: Path, overrides: dict[str, str], **kwargs) -> CodeWhaleApp:
    """The app as launch_tui builds it: config loaded with the flags, and the flags passed on."""
    loaded = load_config(workspace=workspace, overrides=overrides)
    return CodeWhaleApp(loaded, workspace, overrides=overrides, **kwargs)


def notices(app: CodeWhaleApp) -> list[str]:
    return [str(n.render()) for n in app.query(Notice)]


def status(app: CodeWhaleApp) -> str:
    return str(app.query_one(StatusLine).render())


async def send(pilot, app: CodeWhaleApp, text: str) -> None:
    """Put `text` in the composer and press Enter: typing's submit path, without 80 ms a key."""
    await pilot.click("#composer")
    app.composer.text = text
    app.composer.move_cursor(app.composer.document.end)
    await pilot.press("enter")


async def answered(pilot, app: CodeWhaleApp, prompt: str, count: int) -> None:
    """Send `prompt` and wait until `count` answers are on screen and the turn is over."""
    await send(pilot, app, prompt)
    await wait_for(
        pilot, lambda: not app.turn_running and len(app.query(AssistantMessage)) >= count
    )


# -- --model / --provider / --base-url ----------------------------------------------------


async def test_model_flag_reaches_the_requests_the_app_sends(
    llm, monkeypatch, workspace, isolated_home
):
    write_user_config(isolated_home, 'model = "deepseek-v4-pro"\n')
    monkeypatch.setenv("CODEWHALE_BASE_URL", llm.base_url)
    monkeypatch.setenv("DEEPSEEK_API_KEY", TEST_KEY)
    llm.enqueue(Reply(text="flash answer"))
    app = launched(workspace, {"model": "deepseek-v4-flash"})
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_for(pilot, lambda: app.runtime is not None)
        assert app.runtime.model == "deepseek-v4-flash"
        assert "deepseek-v4-flash" in status(app)
        await answered(pilot, app, "which model?", 1)
        assert [r.json["model"] for r in llm.requests] == ["deepseek-v4-flash"]
        await app.action_quit()


async def test_base_url_flag_beats_a_dead_configured_endpoint(
    llm, monkeypatch, workspace, isolated_home
):
    # No retries: on the old behaviour the turn fails at once instead of after backoff.
    write_user_config(isolated_home, f'base_url = "{dead_url()}"\n[network]\nmax_retries = 0\n')
    monkeypatch.setenv("DEEPSEEK_API_KEY", TEST_KEY)
    llm.enqueue(Reply(text="reached the loopback"))
    app = launched(workspace, {"base_url": llm.base_url})
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_for(pilot, lambda: app.runtime is not None)
        assert app.runtime.settings.base_url == llm.base_url
        await answered(pilot, app, "hello", 1)
        assert len(llm.requests) == 1
        assert app.query_one(AssistantMessage).answer == "reached the loopback"
        await app.action_quit()


async def test_provider_flag_beats_the_configured_provider(
    llm, monkeypatch, workspace, isolated_home
):
    """Config says openai (no key for it: onboarding would open); the flag says deepseek."""
    write_user_config(isolated_home, 'provider = "openai"\n')
    monkeypatch.setenv("CODEWHALE_BASE_URL", llm.base_url)
    monkeypatch.setenv("DEEPSEEK_API_KEY", TEST_KEY)
    llm.enqueue(Reply(text="deepseek here"))
    app = launched(workspace, {"provider": "deepseek"})
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_for(pilot, lambda: app.runtime is not None)
        assert app.runtime.settings.provider == "deepseek"
        assert app.screen.__class__.__name__ != "OnboardingScreen"
        await answered(pilot, app, "who are you?", 1)
        request = llm.requests[0]
        assert request.json["model"] == "deepseek-v4-pro"
        assert request.headers["authorization"] == f"Bearer {TEST_KEY}"
        await app.action_quit()


async def test_flags_survive_resuming_a_session_from_the_picker(
    llm, monkeypatch, workspace, isolated_home
):
    """Every runtime the app opens gets the flags, not only the first."""
    write_user_config(isolated_home, 'model = "deepseek-v4-pro"\n')
    monkeypatch.setenv("CODEWHALE_BASE_URL", llm.base_url)
    monkeypatch.setenv("DEEPSEEK_API_KEY", TEST_KEY)
    overrides = {"model": "deepseek-v4-flash"}
    llm.enqueue(Reply(text="one"))
    app = launched(workspace, overrides)
    async with app.run_test(size=(120, 30)) as pilot:
        await answered(pilot, app, "first session", 1)
        await app.action_quit()
    llm.enqueue(Reply(text="two"))
    app = launched(workspace, overrides)
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_for(pilot, lambda: app.runtime is not None)
        first_runtime = app.runtime
        await send(pilot, app, "/sessions")
        await wait_for(pilot, lambda: app.screen.__class__.__name__ == "SessionPicker")
        await pilot.press("enter")
        await wait_for(pilot, lambda: any("Resumed" in n for n in notices(app)))
        assert app.runtime is not first_runtime
        assert app.runtime.model == "deepseek-v4-flash"
        await answered(pilot, app, "second session", 1)
        assert [r.json["model"] for r in llm.requests] == ["deepseek-v4-flash"] * 2
        await app.action_quit()


def test_the_command_line_hands_its_flags_to_the_app(monkeypatch, workspace):
    """cli.main → launch_tui → CodeWhaleApp: flags and --continue arrive unchanged."""
    monkeypatch.setenv("DEEPSEEK_API_KEY", TEST_KEY)
    built: list[CodeWhaleApp] = []
    monkeypatch.setattr(CodeWhaleApp, "run", lambda self, *a, **k: built.append(self))
    # pytest has no terminal; the app itself is not run here.
    monkeypatch.setattr("codewhale.tui.launch.attached_to_terminal", lambda: True)
    argv = ["-C", str(workspace), "--model", "deepseek-v4-flash"]
    argv += ["--provider", "deepseek", "--base-url", "http://127.0.0.1:1/v1", "--continue"]
    assert cli.main(argv) == 0
    (app,) = built
    assert app.overrides == {
        "provider": "deepseek",
        "model": "deepseek-v4-flash",
        "base_url": "http://127.0.0.1:1/v1",
    }
    assert app.continue_latest is True and app.resume is None
    # The config was checked with the flags (in place, or by a forked child when this
    # process runs one thread) and is read with them again when the session opens.


# -- /clear then --continue ------------------------------------------------------------------


async def test_clear_then_continue_loads_only_the_conversation_after_the_clear(
    llm, make_app, workspace
):
    llm.enqueue(Reply(text="first answer"), Reply(text="second answer"))
    app = make_app(workspace)
    async with app.run_test(size=(120, 30)) as pilot:
        await answered(pilot, app, "first prompt", 1)
        await type_and_send(pilot, "/clear")
        await wait_for(pilot, lambda: not app.query(AssistantMessage))
        assert len(app.runtime.messages) == 1
        await answered(pilot, app, "second prompt", 1)
        # The request after /clear already carries only the new conversation.
        sent = [(m["role"], m["content"]) for m in llm.requests[1].json["messages"][1:]]
        assert sent == [("user", "second prompt")]
        await app.action_quit()

    runtime = open_runtime(workspace=workspace, continue_latest=True)
    try:
        messages = [(m["role"], m.get("content")) for m in runtime.messages]
    finally:
        await runtime.close()
    assert messages[0][0] == "system"
    assert messages[1:] == [("user", "second prompt"), ("assistant", "second answer")]


async def test_continue_after_clear_shows_only_the_later_conversation(llm, make_app, workspace):
    llm.enqueue(Reply(text="first answer"), Reply(text="second answer"))
    app = make_app(workspace)
    async with app.run_test(size=(120, 30)) as pilot:
        await answered(pilot, app, "first prompt", 1)
        await send(pilot, app, "/clear")
        await wait_for(pilot, lambda: not app.query(AssistantMessage))
        await answered(pilot, app, "second prompt", 1)
        await app.action_quit()
    app = CodeWhaleApp(load_config(workspace=workspace), workspace, continue_latest=True)
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_for(pilot, lambda: app.runtime is not None)
        shown = [str(m.render()) for m in app.query(UserMessage)]
        assert shown == ["› second prompt"]
        assert [m.source for m in app.query(AssistantMessage)] == ["second answer"]
        assert not any("first" in n for n in notices(app))
        await app.action_quit()


# -- no session open -------------------------------------------------------------------------


async def test_slash_commands_without_a_session_explain_instead_of_crashing(
    llm, monkeypatch, workspace
):
    monkeypatch.setenv("CODEWHALE_BASE_URL", llm.base_url)
    monkeypatch.setenv("DEEPSEEK_API_KEY", TEST_KEY)
    app = CodeWhaleApp(load_config(workspace=workspace), workspace, resume="sess_nope")
    needing = ["/agents", "/mode plan", "/model x", "/clear", "/agent list", "/relay"]
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: any("sess_nope" in n for n in notices(app)))
        assert app.runtime is None
        await type_and_send(pilot, needing[0])  # typed key by key; the rest only Enter
        for command in needing[1:]:
            await send(pilot, app, command)
            await pilot.pause()
            assert app.is_running, f"{command} stopped the app"
        await send(pilot, app, "a plain prompt")
        await pilot.press("tab")  # empty composer: would switch the (missing) runtime's mode
        await send(pilot, app, "/help")
        await pilot.pause()
        assert app.is_running
        shown = notices(app)
        assert shown.count(NO_SESSION) == len(needing) + 1
        assert "no session is open" in NO_SESSION.lower()
        help_text = next(n for n in shown if n.startswith("Commands:"))
        for name in ("/help", "/agent", "/mode", "/model", "/clear", "/sessions", "/quit"):
            assert name in help_text
        assert llm.requests == []
        await app.action_quit()


async def test_after_a_failed_resume_the_sessions_picker_recovers(llm, monkeypatch, workspace):
    monkeypatch.setenv("CODEWHALE_BASE_URL", llm.base_url)
    monkeypatch.setenv("DEEPSEEK_API_KEY", TEST_KEY)
    llm.enqueue(Reply(text="stored answer"), Reply(text="back again"))
    earlier = open_runtime(workspace=workspace)
    await earlier.submit("stored prompt")
    await earlier.close()
    app = CodeWhaleApp(load_config(workspace=workspace), workspace, resume="sess_nope")
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_for(pilot, lambda: any("sess_nope" in n for n in notices(app)))
        await send(pilot, app, "/sessions")
        await wait_for(pilot, lambda: app.screen.__class__.__name__ == "SessionPicker")
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.runtime is not None)
        assert app.runtime.info.id == earlier.info.id
        await answered(pilot, app, "still there?", 1)
        contents = [m["content"] for m in llm.requests[-1].json["messages"]]
        assert contents[-3:] == ["stored prompt", "stored answer", "still there?"]
        await app.action_quit()


# -- Tab on an empty composer ----------------------------------------------------------------


async def test_tab_switches_the_runtime_mode_and_the_status_line_shows_it(make_app, workspace):
    app = make_app(workspace)
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_for(pilot, lambda: app.runtime is not None)
        assert " AGENT " in status(app)
        for expected in (Mode.PLAN, Mode.AGENT):
            await pilot.press("tab")
            await pilot.pause()
            assert app.runtime.mode is expected
            assert app.runtime.engine.context.modes.current is expected
            assert f" {expected.value.upper()} " in status(app)
        await app.action_quit()


@pytest.mark.parametrize("mode", ["plan", "yolo"])
async def test_mode_command_updates_the_status_line(make_app, workspace, mode):
    app = make_app(workspace)
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_for(pilot, lambda: app.runtime is not None)
        await send(pilot, app, f"/mode {mode}")
        if mode == "yolo":
            await wait_for(pilot, lambda: isinstance(app.screen, YoloConfirmScreen))
            await pilot.press("y")
        await wait_for(pilot, lambda: app.runtime.mode is Mode(mode))
        await pilot.pause()
        assert app.runtime.mode is Mode(mode)
        assert f" {mode.upper()} " in status(app)
        await app.action_quit()
