"""A follow-up sent the moment a child's completion arrives revives it: its last run's task
may still be unwinding then, and must not cancel the new run (found by bench/revive.py)."""

from __future__ import annotations

from tests.support.llm_server import Reply
from tests.support.subagents import for_task, wait_done

FIRST = "SUMMARY: first\nCHANGES: None.\nEVIDENCE:\n- a.py:1\nRISKS: none\nBLOCKERS: None."
SECOND = "SUMMARY: second\nCHANGES: None.\nEVIDENCE:\n- a.py:1\nRISKS: none\nBLOCKERS: None."


async def completion_in_inbox(session, agent_id: str) -> None:
    """Until `agent_id`'s completion event is in the parent's inbox (taken out of it)."""
    inbox = session.manager.root.inbox
    while True:
        for text in inbox.runtime_events():
            if agent_id in text and "subagent_completion" in text:
                inbox.withdraw(text)
                return
        await inbox.next_arrival()


async def test_a_follow_up_sent_as_the_completion_arrives_starts_a_new_run(llm, make_session):
    session = make_session()
    llm.route(for_task("survey"), Reply(text=FIRST), Reply(text=SECOND))
    agent_id = session.manager.open({"prompt": "survey", "type": "explore"})["agent_id"]
    await completion_in_inbox(session, agent_id)
    reply = await session.manager.evaluate({"agent_id": agent_id, "message": "and the tests?"})
    assert reply["message_delivery"] == {"delivered": True, "revived": True}
    await completion_in_inbox(session, agent_id)
    done = await wait_done(session, agent_id)
    await session.close()
    assert done["status"] == "completed" and done["runs"] == 2
    assert done["report"]["summary"] == "second"
