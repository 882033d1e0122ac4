"""Quitting while a turn still streams: the app always ends, and the session is saved."""

from __future__ import annotations

import asyncio
import time

from textual import events

from codewhale.paths import user_dirs
from codewhale.sessions.store import SessionStore
from codewhale.tui.transcript import AssistantMessage
from tests.support.llm_server import Reply
from tests.tui.conftest import type_and_send, wait_for

DEADLINE_SECS = 60.0  # a deadline for a hang, not a measure: it closes in well under 1 s


async def closed_within(app, seconds: float) -> bool:
    """Whether the session closed before the deadline (not through Pilot, whose own
    waits need the app's loop, which a hung quit holds)."""
    deadline = time.monotonic() + seconds
    while app.closed_session is None:
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.02)
    return True


async def test_ctrl_q_while_an_answer_streams_quits_and_saves_the_session(llm, make_app, workspace):
    # Long enough that the answer is still streaming, with deltas waiting to be drawn,
    # when Ctrl+Q arrives.
    llm.enqueue(Reply(text=[f"word{i} " for i in range(5000)], chunk_delay=0.002))
    app = make_app(workspace)
    async with app.run_test(size=(120, 30)) as pilot:
        await type_and_send(pilot, "write a long answer")
        await wait_for(pilot, lambda: bool(app.query(AssistantMessage)))
        assert app.turn_running
        # Through the key binding, so the quit runs in the app's message loop, where the
        # frames that draw the turn's last events also run.
        key = events.Key("ctrl+q", None)
        key.set_sender(app)
        app._driver.send_message(key)
        if not await closed_within(app, DEADLINE_SECS):
            # Free the app (the turn's wait for the screen) so the test fails, not hangs.
            app.workers.cancel_group(app, "turn")
            raise AssertionError("quitting hung: the turn waited for a screen no longer drawn")
    session = app.closed_session
    assert session is not None
    saved = SessionStore(user_dirs().data_dir).load(session.info.id)
    users = [m["content"] for m in saved.messages if m["role"] == "user"]
    assert users == ["write a long answer"]
    # The answer streamed so far is kept, as an interrupted turn's is.
    answer = next(m for m in saved.messages if m["role"] == "assistant")
    assert answer["content"].startswith("word0 word1 ")
