"""The delegation tree, end to end against the loopback LLM: authority carried down,
waits that are not stalls, steering while held open, usage rolled up."""

from __future__ import annotations

import asyncio
import json

import pytest

from codewhale.permissions import Mode
from codewhale.runtime import events
from tests.support.llm_server import Reply, ToolCallSpec
from tests.support.subagents import REPORT, for_task, last_tool_results, wait_done

GRANDCHILD_ARGS = {
    "implementer": {"type": "implementer"},
    "general": {"type": "general"},
    "custom": {"type": "custom", "allowed_tools": ["write_file", "exec_shell", "read_file"]},
}


@pytest.mark.parametrize("mode", [Mode.PLAN, Mode.AGENT, Mode.YOLO])
@pytest.mark.parametrize("grandchild", sorted(GRANDCHILD_ARGS))
async def test_a_read_only_child_cannot_write_through_any_grandchild(
    llm, make_session, mode, grandchild
):
    session = make_session(mode=mode, approve=True)
    llm.route(
        for_task("map it"),
        Reply(
            tool_calls=[
                ToolCallSpec("agent_open", {"prompt": "grand job", **GRANDCHILD_ARGS[grandchild]})
            ]
        ),
        Reply(text="waiting for the grandchild"),
        Reply(text=REPORT),
    )
    llm.route(
        for_task("grand job"),
        Reply(
            tool_calls=[
                ToolCallSpec("write_file", {"path": "pwned.txt", "content": "x"}),
                ToolCallSpec("exec_shell", {"command": "touch pwned-by-shell"}),
                ToolCallSpec("edit_file", {"path": "a.py", "old_string": "a", "new_string": "b"}),
            ]
        ),
        Reply(text=REPORT),
    )
    opened = session.manager.open({"prompt": "map it", "type": "explore", "max_depth": 1})
    done = await wait_done(session, opened["agent_id"])
    await session.close()
    assert done["status"] == "completed"
    workspace = session.workspace
    assert not (workspace / "pwned.txt").exists()
    assert not (workspace / "pwned-by-shell").exists()
    assert (workspace / "a.py").read_text() == "print('a')\n"
    results = last_tool_results(llm, "grand job")
    assert len(results) == 3 and all("not available" in r or "proven" in r for r in results)
    assert "opened by the explore role (read-only)" in results[0]
    # Refused by the authority, so nobody was asked.
    assert not [e for e in session.seen if isinstance(e, events.ApprovalRequested)]
    grand = next(r for r in session.manager.records() if r["objective"] == "grand job")
    assert grand["authority"]["writes"] is False and grand["authority"]["shell"] == "read_only"


async def test_mode_plan_mid_run_stops_a_running_general_childs_next_write(llm, make_session):
    session = make_session(mode=Mode.YOLO)
    llm.route(
        for_task("write twice"),
        Reply(tool_calls=[ToolCallSpec("write_file", {"path": "one.txt", "content": "1"})]),
        Reply(
            tool_calls=[ToolCallSpec("write_file", {"path": "two.txt", "content": "2"})],
            request_delay=0.3,
        ),
        Reply(text=REPORT),
    )
    opened = session.manager.open({"prompt": "write twice"})
    workspace = session.workspace
    while not (workspace / "one.txt").exists():
        await asyncio.sleep(0.01)
    session.set_mode(Mode.PLAN)  # while the child waits for its second response
    done = await wait_done(session, opened["agent_id"])
    await session.close()
    assert done["status"] == "completed"
    assert not (workspace / "two.txt").exists()
    assert "Plan mode is read-only" in last_tool_results(llm, "write twice")[-1]


async def test_a_child_waiting_on_an_approval_is_not_cancelled_by_the_heartbeat(llm, make_session):
    session = make_session(mode=Mode.AGENT)
    session.manager.liveness.timeout = 0.2
    llm.route(
        for_task("needs a shell"),
        Reply(tool_calls=[ToolCallSpec("exec_shell", {"command": "echo asked"})]),
        Reply(text=REPORT),
    )
    opened = session.manager.open({"prompt": "needs a shell"})
    while not (asked := [e for e in session.seen if isinstance(e, events.ApprovalRequested)]):
        await asyncio.sleep(0.01)
    await asyncio.sleep(1.0)  # five heartbeats with the dialog open
    assert session.manager.snapshot_of(opened["agent_id"]).worker_status == "waiting_for_user"
    asked[0].resolve("approve")
    done = await wait_done(session, opened["agent_id"])
    await session.close()
    assert done["status"] == "completed"
    assert "asked" in last_tool_results(llm, "needs a shell")[0]


@pytest.mark.slow
async def test_a_child_waiting_40s_on_a_steady_grandchild_outlives_a_32s_heartbeat(
    llm, make_session
):
    session = make_session(
        config="[subagents]\napi_timeout_secs = 2\nheartbeat_timeout_secs = 32\n"
    )
    assert session.manager.heartbeat_timeout == 32 and session.manager.builder.api_timeout == 2
    llm.route(
        for_task("oversee"),
        Reply(tool_calls=[ToolCallSpec("agent_open", {"prompt": "long answer"})]),
        Reply(text="waiting for the long answer"),
        Reply(text=REPORT),
    )
    # 80 pieces half a second apart: 40 s of steady streaming, never 2 s idle.
    pieces = ["word "] * 79 + [REPORT]
    llm.route(for_task("long answer"), Reply(text=pieces, chunk_delay=0.5))
    opened = session.manager.open({"prompt": "oversee", "max_depth": 1})
    done = await wait_done(session, opened["agent_id"], timeout_ms=90_000)
    records = session.manager.records()
    await session.close()
    assert done["status"] == "completed", done.get("error")
    assert all(r["status"] == "completed" for r in records)
    grand = next(r for r in records if r["objective"] == "long answer")
    assert grand["finished_at_ms"] - grand["started_at_ms"] >= 39_000
    waits = [e for e in done_events(session, opened["agent_id"]) if "waiting" in e]
    assert waits, "the child was never recorded as waiting on its grandchild"


def done_events(session, agent_id):
    record = next(r for r in session.manager.records() if r["agent_id"] == agent_id)
    return [event["status"] for event in record["events"]]


async def test_a_steer_while_held_open_wakes_the_turn_and_keeps_its_order(llm, make_session):
    session = make_session()
    parent = lambda body: not for_task("slow child")(body)  # noqa: E731
    llm.route(for_task("slow child"), Reply(text=REPORT, request_delay=1.0))
    llm.route(
        parent,
        Reply(tool_calls=[ToolCallSpec("agent_open", {"prompt": "slow child"})]),
        Reply(text="waiting"),
        Reply(text="read the steers"),
        Reply(text="read the completion"),
    )
    turn = asyncio.create_task(session.submit("delegate"))
    while not any(isinstance(e, events.WaitStarted) for e in session.seen):
        await asyncio.sleep(0.01)
    session.steer("first")
    session.steer("second")
    # One pass of the loop later the held turn has taken both, in order.
    for _ in range(3):
        await asyncio.sleep(0)
    contents = [m["content"] for m in session.messages]
    assert contents[-2:] == ["first", "second"]
    result = await turn
    await session.close()
    assert result.status == "completed" and result.final_text == "read the completion"
    parent_requests = [r.json["messages"] for r in llm.requests if parent(r.json)]
    assert [m["content"] for m in parent_requests[2][-2:]] == ["first", "second"]
    assert "subagent_completion" in parent_requests[3][-1]["content"]


async def test_children_ending_together_wake_the_parent_once(llm, make_session):
    session = make_session()
    jobs = ("job alpha", "job beta", "job gamma")
    is_child = lambda body: any(for_task(job)(body) for job in jobs)  # noqa: E731
    for index, job in enumerate(jobs):
        # Completions 40 ms apart: well inside the settle window, far from simultaneous.
        llm.route(for_task(job), Reply(text=REPORT, request_delay=0.3 + 0.04 * index))
    llm.route(
        lambda body: not is_child(body),
        Reply(tool_calls=[ToolCallSpec("agent_open", {"prompt": job}) for job in jobs]),
        Reply(text="waiting"),
        Reply(text="read all three"),
    )
    result = await session.submit("fan out")
    await session.close()
    assert result.final_text == "read all three"
    parent_requests = [r.json["messages"] for r in llm.requests if not is_child(r.json)]
    assert len(parent_requests) == 3
    completions = [m for m in parent_requests[2] if "subagent_completion" in str(m["content"])]
    assert len(completions) == 3


async def test_a_steer_ends_the_wait_for_sibling_completions_at_once(llm, make_session):
    session = make_session()
    parent = lambda body: not (for_task("quick")(body) or for_task("slow")(body))  # noqa: E731
    llm.route(for_task("quick"), Reply(text=REPORT, request_delay=0.3))
    llm.route(for_task("slow"), Reply(text=REPORT, request_delay=1.5))
    llm.route(
        parent,
        Reply(
            tool_calls=[
                ToolCallSpec("agent_open", {"prompt": "quick"}),
                ToolCallSpec("agent_open", {"prompt": "slow"}),
            ]
        ),
        Reply(text="waiting"),
        Reply(text="saw the steer"),
        Reply(text="saw the slow one"),
    )
    turn = asyncio.create_task(session.submit("delegate"))
    quick_done = lambda: any(  # noqa: E731
        isinstance(e, events.AgentFinished) for e in session.seen
    )
    while not quick_done():
        await asyncio.sleep(0.01)
    # The quick child's completion is held while "slow" runs; a steer ends the hold.
    session.steer("go on")
    for _ in range(3):
        await asyncio.sleep(0)
    contents = [str(m["content"]) for m in session.messages]
    assert "subagent_completion" in contents[-2] and contents[-1] == "go on"
    result = await turn
    await session.close()
    assert result.final_text == "saw the slow one"


async def test_a_completion_after_esc_opens_the_next_turn(llm, make_session):
    session = make_session()
    parent = lambda body: not for_task("later")(body)  # noqa: E731
    llm.route(for_task("later"), Reply(text=REPORT, request_delay=0.5))
    llm.route(
        parent,
        Reply(tool_calls=[ToolCallSpec("agent_open", {"prompt": "later"})]),
        Reply(text="waiting"),
        Reply(text="next turn answered"),
    )
    turn = asyncio.create_task(session.submit("delegate"))
    while not any(isinstance(e, events.WaitStarted) for e in session.seen):
        await asyncio.sleep(0.01)
    session.cancel_turn()
    assert (await turn).status == "interrupted"
    child = session.agents()[0]
    await wait_done(session, child.agent_id)
    result = await session.submit("and now?")
    await session.close()
    assert result.final_text == "next turn answered"
    last = [m["content"] for m in llm.requests[-1].json["messages"]]
    assert "subagent_completion" in last[-2] and last[-1] == "and now?"


async def test_usage_of_a_grandchild_reaches_the_top_level_totals(llm, make_session):
    session = make_session()
    usage = {"prompt_tokens": 100, "completion_tokens": 10}
    llm.route(
        for_task("middle"),
        Reply(tool_calls=[ToolCallSpec("agent_open", {"prompt": "bottom"})], usage=usage),
        Reply(text="waiting", usage=usage),
        Reply(text=REPORT, usage=usage),
    )
    llm.route(for_task("bottom"), Reply(text=REPORT, usage={**usage, "prompt_tokens": 1000}))
    opened = session.manager.open({"prompt": "middle", "max_depth": 1})
    done = await wait_done(session, opened["agent_id"])
    await session.close()
    assert done["usage"]["input"] == 300
    assert done["descendant_usage"]["input"] == 1000
    assert session.usage.input_tokens == 1300 and session.usage.output_tokens == 40


async def test_a_child_ending_stops_its_own_running_children(llm, make_session):
    session = make_session()
    llm.route(
        for_task("boss"),
        Reply(tool_calls=[ToolCallSpec("agent_open", {"prompt": "worker bee"})]),
        Reply(text="waiting"),
    )
    llm.route(for_task("worker bee"), Reply(text=REPORT, request_delay=30))
    opened = session.manager.open({"prompt": "boss", "max_depth": 1})
    while len(session.agents()) < 2:
        await asyncio.sleep(0.01)
    closed = await session.cancel_agent(opened["agent_id"])
    grand = next(s for s in session.agents() if s.agent_id != opened["agent_id"])
    await wait_done(session, grand.agent_id)
    await session.close()
    assert closed["status"] == "cancelled"
    record = next(r for r in session.manager.records() if r["agent_id"] == grand.agent_id)
    assert record["status"] == "cancelled"
    assert record["result"] == f"cancelled: its opener {opened['agent_id']} ended"


async def test_agents_resolve_by_nickname(llm, make_session):
    session = make_session()
    llm.route(for_task("nick"), Reply(text=REPORT))
    opened = session.manager.open({"prompt": "nick"})
    await wait_done(session, opened["agent_id"])
    by_nickname = await session.agent(opened["nickname"].lower())
    await session.close()
    assert by_nickname["agent_id"] == opened["agent_id"]
    assert json.dumps(by_nickname)  # a plain projection


async def test_a_child_can_remember_when_memory_is_on(llm, make_session, isolated_home):
    session = make_session(config="[memory]\nenabled = true\n")
    llm.route(
        for_task("note it"),
        Reply(tool_calls=[ToolCallSpec("remember", {"note": "the user likes tabs"})]),
        Reply(text=REPORT),
    )
    opened = session.manager.open({"prompt": "note it"})
    await wait_done(session, opened["agent_id"])
    await session.close()
    assert "Remembered: the user likes tabs" in last_tool_results(llm, "note it")[0]
    enabled, memory = session.memory()
    assert enabled and memory is not None and "the user likes tabs" in memory.read_text()
