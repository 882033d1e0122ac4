"""agent_wait's pieces that need no model: arguments, the inbox signal, withdrawing news."""

from __future__ import annotations

import asyncio

import pytest

from codewhale.engine.conversation import Inbox
from codewhale.subagents.delivery import completion_event
from codewhale.subagents.records import WorkerRecord
from codewhale.subagents.spawn import SpawnError
from codewhale.subagents.wait import WaitMode, parse_wait, withdraw_completions


def finished(agent_id: str) -> WorkerRecord:
    return WorkerRecord(
        run_id="run_1",
        agent_id=agent_id,
        name=agent_id,
        nickname="Moby",
        objective="o",
        description="d",
        type="explore",
        role="explore",
        model="m",
        workspace="/w",
        git_branch=None,
        session_boot_id="boot_x",
        status="completed",
        worker_status="completed",
        result="all done",
    )


@pytest.mark.parametrize(
    ("arguments", "ids", "mode", "secs"),
    [
        ({}, None, WaitMode.ALL, 600.0),
        ({"agent_ids": [], "mode": "ANY "}, None, WaitMode.ANY, 600.0),
        ({"agent_ids": "a", "timeout_ms": 5}, ("a",), WaitMode.ALL, 1.0),
        ({"agent_ids": ["a", " b", "a"], "timeout_ms": 10**9}, ("a", "b"), WaitMode.ALL, 3600.0),
        ({"timeout_ms": "soon"}, None, WaitMode.ALL, 600.0),
    ],
)
def test_arguments_default_clamp_and_deduplicate(arguments, ids, mode, secs):
    request = parse_wait(arguments)
    assert (request.references, request.mode, request.timeout_secs) == (ids, mode, secs)


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"agent_ids": [1]}, "agent_ids must be a list of agent ids or names"),
        ({"agent_ids": [" "]}, "agent_ids must be a list of agent ids or names"),
        ({"mode": "first"}, 'mode must be "any" or "all", not \'first\''),
    ],
)
def test_bad_arguments_are_explained(arguments, message):
    with pytest.raises(SpawnError) as caught:
        parse_wait(arguments)
    assert str(caught.value) == message


def test_only_the_returned_childrens_completions_are_withdrawn():
    inbox = Inbox()
    inbox.runtime_event(completion_event(finished("agent_aaaaaaaa")))
    inbox.steer("keep going")
    inbox.runtime_event(completion_event(finished("agent_bbbbbbbb")))
    inbox.runtime_event('<codewhale:runtime_event kind="subagents_interrupted">x')
    withdraw_completions(inbox, ["agent_aaaaaaaa"])
    left = inbox.drain()
    assert [item.steer for item in left] == [True, False, False]
    assert "agent_bbbbbbbb" in left[1].text and "subagents_interrupted" in left[2].text


def test_withdrawing_the_last_item_empties_the_inbox():
    inbox = Inbox()
    inbox.runtime_event(completion_event(finished("agent_aaaaaaaa")))
    withdraw_completions(inbox, ["agent_aaaaaaaa"])
    assert not inbox and inbox.drain() == []
    assert inbox.withdraw("anything") is False


async def test_steered_waits_through_runtime_events_for_a_steer():
    inbox = Inbox()
    waiter = asyncio.ensure_future(inbox.steered())
    inbox.runtime_event("a completion")
    await asyncio.sleep(0)
    assert not waiter.done()
    inbox.steer("stop")
    await asyncio.wait_for(waiter, 1)
    # One already waiting ends the wait at once.
    await asyncio.wait_for(inbox.steered(), 1)
