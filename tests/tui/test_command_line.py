"""Keys and launch behaviour users bring from other terminal agents.

Ctrl+C interrupts a turn and, pressed twice, quits; quitting with sub-agents still
running asks first; `codewhale "task"` sends the task once the session is open; the
offline model's dialog is shown on the first launch on a machine only.
"""

from __future__ import annotations

import json

from textual.widgets._toast import Toast

from codewhale.config import load_config
from codewhale.tui.app import CodeWhaleApp
from codewhale.tui.onboarding import STATE_FILE, OnboardingScreen
from codewhale.tui.quit_confirm import QuitScreen
from codewhale.tui.status import StatusLine
from codewhale.tui.transcript import AssistantMessage, Notice, UserMessage
from tests.support.llm_server import Fault, Reply, ToolCallSpec
from tests.support.settings import TEST_KEY
from tests.tui.conftest import is_child, type_and_send, wait_for

STALL = Reply(fault=Fault.stall(seconds=30))


def notices(app: CodeWhaleApp) -> list[str]:
    return [str(notice.render()) for notice in app.query(Notice)]


def toasts(app: CodeWhaleApp) -> list[str]:
    return [str(toast.render()) for toast in app.screen.query(Toast)]


def parent_requests(llm) -> list:
    return [request for request in llm.requests if not is_child(request.json)]


async def open_a_stalled_child(pilot, llm, app: CodeWhaleApp, *, parent_after: Reply) -> None:
    """The parent opens one sub-agent whose model never answers, then gets `parent_after`."""
    llm.route(is_child, STALL)
    llm.enqueue(
        Reply(tool_calls=[ToolCallSpec("agent_open", {"prompt": "long survey"})]), parent_after
    )
    await type_and_send(pilot, "go")
    await wait_for(pilot, lambda: any(is_child(r.json) for r in llm.requests))
    await wait_for(pilot, lambda: len(parent_requests(llm)) == 2)


async def test_ctrl_c_interrupts_the_running_turn_and_children_keep_running(
    llm, make_app, workspace
):
    app = make_app(workspace)
    async with app.run_test(size=(140, 36), notifications=True) as pilot:
        # The parent's second reply stalls, so the turn is still running when Ctrl+C comes.
        await open_a_stalled_child(pilot, llm, app, parent_after=STALL)
        assert app.turn_running
        await pilot.press("ctrl+c")
        await wait_for(pilot, lambda: not app.turn_running)
        assert any("turn cancelled" in text for text in notices(app))
        assert any("Ctrl+C again to quit" in text for text in toasts(app))
        assert app.runtime is not None and app.runtime.manager.live_count() == 1
        assert app.is_running and app.screen is app.screen_stack[0]


async def test_ctrl_c_twice_quits_at_once_with_no_children(make_app, workspace):
    app = make_app(workspace)
    async with app.run_test(size=(120, 30), notifications=True) as pilot:
        await wait_for(pilot, lambda: app.runtime is not None)
        await pilot.press("ctrl+c")
        # One press, with no turn running, only says how to quit.
        await wait_for(pilot, lambda: any("Ctrl+C again to quit" in text for text in toasts(app)))
        assert app.is_running and app.runtime is not None
        await pilot.press("ctrl+c")
        await wait_for(pilot, lambda: not app.is_running)
    assert app.runtime is None  # the session was closed on the way out


async def test_quitting_with_a_running_child_asks_and_stay_keeps_the_app(llm, make_app, workspace):
    app = make_app(workspace)
    async with app.run_test(size=(140, 36)) as pilot:
        # The turn stays open waiting for the child; Ctrl+Q asks all the same.
        await open_a_stalled_child(pilot, llm, app, parent_after=Reply(text="waiting"))
        await pilot.press("ctrl+q")
        await wait_for(pilot, lambda: isinstance(app.screen, QuitScreen))
        question = " ".join(str(s.render()) for s in app.screen.query("Static"))
        assert "1 sub-agent is still running" in question
        assert "codewhale --continue" in question
        await pilot.click("#stay")
        await wait_for(pilot, lambda: not isinstance(app.screen, QuitScreen))
        assert app.is_running and app.runtime.manager.live_count() == 1
        # Ctrl+C twice asks the same question; answering quit ends the app.
        await pilot.press("ctrl+c", "ctrl+c")
        await wait_for(pilot, lambda: isinstance(app.screen, QuitScreen))
        await pilot.click("#quit")
        await wait_for(pilot, lambda: not app.is_running)
    assert app.runtime is None


async def test_the_initial_prompt_is_sent_once_the_session_opens(llm, monkeypatch, workspace):
    monkeypatch.setenv("CODEWHALE_BASE_URL", llm.base_url)
    monkeypatch.setenv("DEEPSEEK_API_KEY", TEST_KEY)
    llm.enqueue(Reply(text="on it"))
    app = CodeWhaleApp(
        load_config(workspace=workspace), workspace, initial_prompt="summarise notes.txt"
    )
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_for(pilot, lambda: not app.turn_running and bool(app.query(AssistantMessage)))
        assert len(llm.requests) == 1
        assert llm.requests[0].json["messages"][-1] == {
            "role": "user",
            "content": "summarise notes.txt",
        }
        assert app.query_one(UserMessage).render().plain == "› summarise notes.txt"
        await app.action_quit()


async def test_the_initial_prompt_waits_for_a_key_pasted_at_start(llm, monkeypatch, workspace):
    """No key yet: the prompt goes out on the session the saved key reopens, not before."""
    monkeypatch.setenv("CODEWHALE_BASE_URL", llm.base_url)
    llm.enqueue(Reply(text="on it"))
    app = CodeWhaleApp(load_config(workspace=workspace), workspace, initial_prompt="hello")
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, OnboardingScreen))
        assert app.initial_prompt == "hello" and not llm.requests
        app.screen.query_one("#key").value = "sk-typed-key-123456"
        await pilot.click("#save")
        await wait_for(pilot, lambda: not app.turn_running and bool(app.query(AssistantMessage)))
        (request,) = llm.requests
        assert request.json["messages"][-1] == {"role": "user", "content": "hello"}
        assert request.headers["authorization"] == "Bearer sk-typed-key-123456"
        await app.action_quit()


async def test_the_offline_dialog_shows_on_the_first_launch_only(workspace, isolated_home):
    """Nothing configured: the offline model stands in; its dialog is shown once per machine."""
    first = CodeWhaleApp(load_config(workspace=workspace), workspace)
    assert first.loaded.offline_fallback, "needs the local extra (`make local`)"
    async with first.run_test(size=(120, 30)) as pilot:
        await wait_for(pilot, lambda: isinstance(first.screen, OnboardingScreen))
        await pilot.press("escape")
        await first.action_quit()
    state = isolated_home / "state" / STATE_FILE
    assert json.loads(state.read_text()) == {"offline_notice_shown": True}

    again = CodeWhaleApp(load_config(workspace=workspace), workspace)
    async with again.run_test(size=(120, 30)) as pilot:
        await wait_for(pilot, lambda: again.runtime is not None)
        await pilot.pause(0.2)
        assert not isinstance(again.screen, OnboardingScreen)
        assert again.focused is again.composer
        assert "offline 135M model" in str(again.query_one(StatusLine).render())
        await again.action_quit()
