"""`--continue` draws the conversation's last turns from its file before the session
opens, and keeps those cells once it has (or draws again what changed meanwhile).

The session is held shut (test_paint_first.HeldShut) until the test lets it open.
"""

from __future__ import annotations

import asyncio

from codewhale.config import load_config
from codewhale.paths import user_dirs
from codewhale.sessions.store import SessionStore
from codewhale.tui.transcript import AssistantMessage, UserMessage
from tests.tui.test_long_sessions import LAST_ANSWER, last_answer_shown, write_session
from tests.tui.test_paint_first import HeldShut, painted, until

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
