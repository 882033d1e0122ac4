"""`--continue` draws the conversation's last turns from its file before the session
opens, and keeps those cells once it has (or draws again what changed meanwhile).

The session is held shut (test_paint_first.HeldShut) until the test lets it open.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from codewhale.config import load_config
from codewhale.paths import user_dirs
from codewhale.sessions.store import SessionStore
from codewhale.tui.launch_receipt import RECEIPT_FILE
from codewhale.tui.status import context_text
from codewhale.tui.transcript import AssistantMessage, UserMessage
from tests.support.settings import TEST_KEY
from tests.tui.test_long_sessions import LAST_ANSWER, last_answer_shown, write_session
from tests.tui.test_paint_first import (
    HeldShut,
    checked,
    painted,
    remembered_status,
    status,
    until,
)

SIZE = (120, 40)


def answers(app: HeldShut) -> list[str]:
    return [cell.answer for cell in app.transcript.query(AssistantMessage)]


def prompts(app: HeldShut) -> list[str]:
    return [cell.render().plain for cell in app.transcript.query(UserMessage)]


async def run_held(app: HeldShut) -> asyncio.Task[None]:
    """The app running with its session held shut, once it shows the last answer."""
    running = asyncio.create_task(app.run_async(headless=True, size=SIZE))
    await until(lambda: painted(app) and last_answer_shown(app))
    return running


async def let_open_and_quit(app: HeldShut, running: asyncio.Task[None]) -> None:
    app.opening.set()
    await until(lambda: app.session_ready.is_set())
    await app.action_quit()
    await running


async def test_continue_shows_the_last_turn_before_the_session_opens_and_keeps_its_cells(
    make_app, workspace
):
    write_session(workspace, 600)
    app = HeldShut(
        load_config(workspace=workspace), workspace, continue_latest=True, opening=asyncio.Event()
    )
    running = await run_held(app)
    try:
        assert app.runtime is None  # drawn from the file alone
        drawn = list(app.transcript.children)
        app.opening.set()
        await until(lambda: app.session_ready.is_set())
        assert app.runtime is not None and app.runtime.resumed
        # The same cells, none drawn again or twice.
        assert list(app.transcript.children)[-len(drawn) :] == drawn
        assert answers(app).count(LAST_ANSWER) == 1
        assert len(prompts(app)) == len(set(prompts(app)))
    finally:
        await let_open_and_quit(app, running)


async def test_a_conversation_that_changed_before_the_session_opened_is_drawn_again(
    make_app, workspace
):
    write_session(workspace, 60)
    app = HeldShut(
        load_config(workspace=workspace), workspace, continue_latest=True, opening=asyncio.Event()
    )
    running = await run_held(app)
    try:
        # Another turn reaches the file between the early drawing and the opening.
        store = SessionStore(user_dirs().data_dir)
        latest = store.latest(workspace.resolve())
        assert latest is not None
        resumed = store.resume(latest.id, workspace.resolve(), "m")
        more = [{"role": "user", "content": "one more"}, {"role": "assistant", "content": "Done."}]
        resumed.writer.record_messages([*resumed.loaded.messages, *more])
        resumed.writer.close()
        app.opening.set()
        await until(lambda: app.session_ready.is_set() and "Done." in answers(app))
        assert answers(app).count(LAST_ANSWER) == 1 and answers(app).count("Done.") == 1
        assert prompts(app)[-1] == "› one more"
        assert len(prompts(app)) == len(set(prompts(app)))
    finally:
        await let_open_and_quit(app, running)


async def test_messages_a_rewind_dropped_are_not_drawn_before_the_session_opens(
    make_app, workspace
):
    write_session(workspace, 60)
    store = SessionStore(user_dirs().data_dir)
    latest = store.latest(workspace.resolve())
    assert latest is not None
    resumed = store.resume(latest.id, workspace.resolve(), "m")
    kept = resumed.loaded.messages
    dropped = [
        {"role": "user", "content": "a prompt taken back"},
        {"role": "assistant", "content": "Gone."},
    ]
    resumed.writer.record_rewind([*kept, *dropped], len(kept), "step 0")
    resumed.writer.close()
    app = HeldShut(
        load_config(workspace=workspace), workspace, continue_latest=True, opening=asyncio.Event()
    )
    running = await run_held(app)
    try:
        assert app.runtime is None
        assert "Gone." not in answers(app) and "› a prompt taken back" not in prompts(app)
    finally:
        await let_open_and_quit(app, running)


# -- the status line it opens with ------------------------------------------------------------


def edit_receipts(change: Callable[[dict], None]) -> None:
    """Apply `change` to every setup's entry in the launch receipt file."""
    receipts = user_dirs().state_dir / RECEIPT_FILE
    entries = json.loads(receipts.read_text())
    for entry in entries.values():
        change(entry)
    receipts.write_text(json.dumps(entries))


async def continued(workspace: Path) -> tuple[str, str]:
    """`--continue` with the receipt's setup: the status line while the session is held
    shut (its last turn drawn from the file), and once it has opened."""
    app = HeldShut(checked(workspace), workspace, continue_latest=True, opening=asyncio.Event())
    running = await run_held(app)
    try:
        assert app.runtime is None
        early = status(app)
        app.opening.set()
        await until(lambda: app.session_ready.is_set())
        assert app.runtime is not None
        opened = status(app)
        assert context_text(*app.runtime.context_use()) in opened  # the session's own
        return early, opened
    finally:
        await let_open_and_quit(app, running)


async def test_continue_draws_the_status_line_it_opens_with_before_it_opens(
    llm, monkeypatch, workspace
):
    monkeypatch.setenv("CODEWHALE_BASE_URL", llm.base_url)
    monkeypatch.setenv("DEEPSEEK_API_KEY", TEST_KEY)
    await remembered_status(workspace)  # a new session opened once with this setup
    write_session(workspace, 600)
    early, opened = await continued(workspace)
    # The file's usage totals and the context use, drawn before the session opened and
    # left as they were by its opening.
    assert "↑5000.0k ↓70.0k" in early and "ctx " in early and "$1.50" in early
    assert early == opened


async def test_a_receipt_without_the_tools_share_learns_it_from_the_first_resume(
    llm, monkeypatch, workspace
):
    monkeypatch.setenv("CODEWHALE_BASE_URL", llm.base_url)
    monkeypatch.setenv("DEEPSEEK_API_KEY", TEST_KEY)
    await remembered_status(workspace)
    edit_receipts(lambda entry: entry["status"].pop("tools"))  # as an older version wrote it
    write_session(workspace, 60)
    early, opened = await continued(workspace)
    assert "starting…" in early and "deepseek" in opened  # no guess: nothing to count it by
    await until(lambda: getattr(checked(workspace), "resumed", None) is not None)
    early, opened = await continued(workspace)
    assert early == opened


async def test_a_wrong_guess_is_drawn_over_by_the_sessions_own_figures(llm, monkeypatch, workspace):
    monkeypatch.setenv("CODEWHALE_BASE_URL", llm.base_url)
    monkeypatch.setenv("DEEPSEEK_API_KEY", TEST_KEY)
    await remembered_status(workspace)
    write_session(workspace, 60)

    def far_off(entry: dict) -> None:
        entry["status"]["tools"] = 1_000_000  # the tools changed since it was kept

    edit_receipts(far_off)
    early, opened = await continued(workspace)
    assert "ctx " in early and early != opened  # `continued` checks the opened one's figures


EARLY_READ = """
import sys
from pathlib import Path
from codewhale.tui.early_history import read_resumed

early = read_resumed(Path(sys.argv[1]), None)
print(len(early.messages), *sorted(set(sys.argv[2:]) & set(sys.modules)))
"""
# Git and the sandbox (through sub-agent worktrees) come with the session: read before it,
# they only kept the history off the screen longer.
WITH_THE_SESSION = ["codewhale.subagents.worktree", "codewhale.gitrun", "codewhale.sandbox"]


def test_reading_the_history_before_the_session_loads_neither_git_nor_the_sandbox(workspace):
    write_session(workspace, 60)
    result = subprocess.run(
        [sys.executable, "-c", EARLY_READ, str(workspace), *WITH_THE_SESSION],
        capture_output=True,
        text=True,
        env=os.environ,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split() == ["61"]  # the system prompt and 60 messages, nothing else
