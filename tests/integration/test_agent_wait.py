"""agent_wait against the loopback LLM: a real engine calls it, real children end at
different times, and `codewhale exec` runs it end to end."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys

import pytest

from codewhale.runtime import events
from codewhale.subagents.spawn import SpawnError
from tests.support.llm_server import Reply, ToolCallSpec
from tests.support.settings import TEST_KEY, app_environment
from tests.support.subagents import REPORT, for_task, last_tool_results, wait_done

# Three children of clearly different lengths (the slack absorbs a busy machine).
LENGTHS = {"short job": 0.1, "medium job": 1.0, "long job": 1.6}
OPENS = [ToolCallSpec("agent_open", {"prompt": job}) for job in LENGTHS]


def is_child(body) -> bool:
    return any(for_task(job)(body) for job in (*LENGTHS, "slow job", "leaf job"))


def route_children(llm) -> None:
    for job, delay in LENGTHS.items():
        llm.route(for_task(job), Reply(text=REPORT, request_delay=delay))


def parent_requests(llm) -> list[list[dict]]:
    return [r.json["messages"] for r in llm.requests if not is_child(r.json)]


def tool_result(messages: list[dict], call_id: str) -> str:
    return next(m["content"] for m in messages if m.get("tool_call_id") == call_id)


def opened_ids(messages: list[dict]) -> list[str]:
    """The ids of OPENS's children, from the agent_open results the parent read."""
    return [json.loads(tool_result(messages, f"call_{i}"))["agent_id"] for i in range(len(OPENS))]


def completions_in(messages: list[dict]) -> list[str]:
    return [str(m["content"]) for m in messages if "subagent_completion" in str(m["content"])]


async def steer_while_in(session, tool: str, text: str):
    """Submit "delegate", steer with `text` once the parent has called `tool`, and return
    the turn's result."""
    turn = asyncio.create_task(session.submit("delegate"))
    while not any(isinstance(e, events.ToolCallStarted) and e.name == tool for e in session.seen):
        await asyncio.sleep(0.01)
    session.steer(text)
    return await turn


async def test_mode_any_returns_the_shortest_and_the_others_report_as_usual(llm, make_session):
    session = make_session()
    route_children(llm)
    llm.route(
        lambda body: not is_child(body),
        Reply(tool_calls=[*OPENS, ToolCallSpec("agent_wait", {"mode": "any"}, id="wait")]),
        Reply(text="one is back; waiting for the rest"),
        Reply(text="the medium one is back"),
        Reply(text="all reported"),
    )
    result = await session.submit("fan out")
    records = {r["objective"]: r["agent_id"] for r in session.manager.records()}
    await session.close()
    assert result.final_text == "all reported"
    requests = parent_requests(llm)
    waited = json.loads(tool_result(requests[1], "wait"))
    assert waited["mode"] == "any"
    assert waited["finished"] == [records["short job"]]
    assert waited["still_running"] == [records["medium job"], records["long job"]]
    agents = {a["agent_id"]: a for a in waited["agents"]}
    assert agents[records["short job"]]["status"] == "completed"
    assert agents[records["short job"]]["report"]["summary"] == "did the task"
    assert agents[records["long job"]]["status"] == "running"
    assert agents[records["long job"]]["result"] is None
    assert "timed_out" not in waited and "interrupted_by_user" not in waited
    # The short child's result came with the wait: its completion is not repeated;
    # the two that were still running announce themselves as usual.
    later = [text for messages in requests[1:] for text in completions_in(messages)]
    assert not any(records["short job"] in text for text in later)
    assert any(records["medium job"] in text for text in later)
    assert any(records["long job"] in text for text in later)


async def test_mode_all_is_the_default_and_returns_all_three_in_the_order_they_ended(
    llm, make_session
):
    session = make_session()
    route_children(llm)
    llm.route(
        lambda body: not is_child(body),
        Reply(tool_calls=[*OPENS, ToolCallSpec("agent_wait", {}, id="wait")]),
        Reply(text="read all three"),
    )
    result = await session.submit("fan out")
    records = {r["objective"]: r["agent_id"] for r in session.manager.records()}
    await session.close()
    assert result.final_text == "read all three"
    requests = parent_requests(llm)
    # One model call after the wait: no completion event opened another one.
    assert len(requests) == 2
    waited = json.loads(tool_result(requests[1], "wait"))
    assert waited["mode"] == "all"
    assert waited["finished"] == [records[job] for job in LENGTHS]
    assert waited["still_running"] == []
    assert [a["status"] for a in waited["agents"]] == ["completed"] * 3
    assert completions_in(requests[1]) == []


async def test_a_wait_that_runs_out_says_timed_out_and_names_work_by_name(llm, make_session):
    session = make_session()
    llm.route(for_task("slow job"), Reply(text=REPORT, request_delay=3.0))
    llm.route(
        lambda body: not is_child(body),
        Reply(
            tool_calls=[
                ToolCallSpec("agent_open", {"prompt": "slow job", "name": "slowpoke"}),
                # 10 ms is clamped to the 1 s minimum.
                ToolCallSpec(
                    "agent_wait", {"agent_ids": ["slowpoke"], "timeout_ms": 10}, id="wait"
                ),
            ]
        ),
        Reply(tool_calls=[ToolCallSpec("agent_close", {"name": "slowpoke"})]),
        Reply(text="gave up on it"),
    )
    result = await session.submit("try")
    (record,) = session.manager.records()
    await session.close()
    assert result.final_text == "gave up on it"
    waited = json.loads(tool_result(parent_requests(llm)[1], "wait"))
    assert waited["timed_out"] is True
    assert waited["finished"] == [] and waited["still_running"] == [record["agent_id"]]
    assert waited["agents"][0]["name"] == "slowpoke"
    assert record["status"] == "cancelled"


async def test_a_steer_ends_the_wait_early_and_is_read_right_after(llm, make_session):
    session = make_session()
    llm.route(for_task("slow job"), Reply(text=REPORT, request_delay=1.5))
    llm.route(
        lambda body: not is_child(body),
        Reply(
            tool_calls=[
                ToolCallSpec("agent_open", {"prompt": "slow job"}),
                ToolCallSpec("agent_wait", {"timeout_ms": 60_000}, id="wait"),
            ]
        ),
        Reply(text="answered the user"),
        Reply(text="and read the child"),
    )
    result = await steer_while_in(session, "agent_wait", "what is taking so long?")
    (record,) = session.manager.records()
    await session.close()
    assert result.final_text == "and read the child"
    requests = parent_requests(llm)
    waited = json.loads(tool_result(requests[1], "wait"))
    assert waited["interrupted_by_user"] is True
    assert waited["finished"] == [] and waited["still_running"] == [record["agent_id"]]
    # The steer comes right after the wait's result; the child, still running then,
    # reports later as usual.
    assert requests[1][-2]["tool_call_id"] == "wait"
    assert requests[1][-1] == {"role": "user", "content": "what is taking so long?"}
    assert record["agent_id"] in completions_in(requests[2])[0]


async def test_a_message_to_a_waiting_child_ends_its_wait(llm, make_session):
    session = make_session()
    llm.route(for_task("leaf job"), Reply(text=REPORT, request_delay=1.5))
    llm.route(
        for_task("boss job"),
        Reply(
            tool_calls=[
                ToolCallSpec("agent_open", {"prompt": "leaf job"}),
                ToolCallSpec("agent_wait", {}, id="wait"),
            ]
        ),
        Reply(text="told my opener; still waiting for the leaf"),
        Reply(text=REPORT),
    )
    boss = session.manager.open({"prompt": "boss job", "max_depth": 1})
    while session.manager.snapshot_of(boss["agent_id"]).worker_status != "waiting_for_children":
        await asyncio.sleep(0.01)
    delivery = await session.manager.evaluate(
        {"agent_id": boss["agent_id"], "message": "report now"}
    )
    assert delivery["message_delivery"]["delivered"] is True
    done = await wait_done(session, boss["agent_id"])
    await session.close()
    assert done["status"] == "completed"
    (waited,) = last_tool_results(llm, "boss job")[1:]
    assert json.loads(waited)["interrupted_by_user"] is True
    boss_requests = [r.json["messages"] for r in llm.requests if for_task("boss job")(r.json)]
    assert boss_requests[1][-1] == {"role": "user", "content": "report now"}


async def test_a_child_waiting_longer_than_the_heartbeat_is_not_cancelled(llm, make_session):
    session = make_session()
    session.manager.liveness.timeout = 0.5
    # The leaf streams steadily for 1.5 s (never idle for long), its opener waits on it.
    llm.route(for_task("leaf job"), Reply(text=["word "] * 29 + [REPORT], chunk_delay=0.05))
    llm.route(
        for_task("boss job"),
        Reply(
            tool_calls=[
                ToolCallSpec("agent_open", {"prompt": "leaf job"}),
                ToolCallSpec("agent_wait", {"mode": "all"}),
            ]
        ),
        Reply(text=REPORT),
    )
    boss = session.manager.open({"prompt": "boss job", "max_depth": 1})
    done = await wait_done(session, boss["agent_id"])
    records = session.manager.records()
    await session.close()
    assert done["status"] == "completed", done.get("result")
    assert all(r["status"] == "completed" for r in records)
    leaf = next(r for r in records if r["objective"] == "leaf job")
    assert leaf["finished_at_ms"] - leaf["started_at_ms"] > 3 * 500  # three heartbeats
    boss_events = next(r for r in records if r["agent_id"] == boss["agent_id"])["events"]
    assert any(e["message"] == "waiting in agent_wait" for e in boss_events)
    (waited,) = last_tool_results(llm, "boss job")[1:]
    assert json.loads(waited)["finished"] == [leaf["agent_id"]]


async def test_unknown_foreign_and_empty_sets(llm, make_session):
    session = make_session()
    nothing = await session.manager.wait({})
    assert nothing["agents"] == [] and nothing["finished"] == []
    assert nothing["message"].startswith("Nothing to wait for")
    with pytest.raises(SpawnError, match="Agent session nobody not found"):
        await session.manager.wait({"agent_ids": ["nobody"]})
    with pytest.raises(SpawnError, match='mode must be "any" or "all"'):
        await session.manager.wait({"mode": "some"})
    # A child may wait only on its own children, not on a sibling.
    llm.route(for_task("sibling job"), Reply(text=REPORT, request_delay=0.5))
    llm.route(
        for_task("boss job"),
        Reply(tool_calls=[ToolCallSpec("agent_wait", {"agent_ids": ["sibling"]})]),
        Reply(text=REPORT),
    )
    sibling = session.manager.open({"prompt": "sibling job", "name": "sibling"})
    boss = session.manager.open({"prompt": "boss job", "max_depth": 1})
    await wait_done(session, boss["agent_id"])
    finished = await session.manager.wait({"agent_ids": ["sibling", sibling["agent_id"]]})
    await session.close()
    (refused,) = last_tool_results(llm, "boss job")
    assert f"Agent session sibling ({sibling['agent_id']}) was not opened by you" in refused
    # The session's own conversation opened it; a name and its id are one child.
    assert finished["finished"] == [sibling["agent_id"]] and len(finished["agents"]) == 1


def test_exec_opens_three_children_and_waits_for_all(llm, tmp_path):
    workspace, home = tmp_path / "repo", tmp_path / "home"
    workspace.mkdir()
    home.mkdir()
    route_children(llm)
    llm.route(
        lambda body: not is_child(body),
        Reply(tool_calls=[*OPENS, ToolCallSpec("agent_wait", {"mode": "all"}, id="wait")]),
        Reply(text="all three children reported"),
    )
    env = app_environment(
        CODEWHALE_HOME=str(home), CODEWHALE_BASE_URL=llm.base_url, DEEPSEEK_API_KEY=TEST_KEY
    )
    result = subprocess.run(
        [sys.executable, "-m", "codewhale", "exec", "-C", str(workspace), "fan out and wait"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert "all three children reported" in result.stdout
    requests = parent_requests(llm)
    assert len(requests) == 2
    waited = json.loads(tool_result(requests[1], "wait"))
    assert waited["finished"] == opened_ids(requests[1]) and waited["still_running"] == []
    assert [a["status"] for a in waited["agents"]] == ["completed"] * 3
    assert completions_in(requests[1]) == []


async def test_a_steer_ends_a_blocking_agent_eval_too(llm, make_session):
    session = make_session()
    llm.route(for_task("slow job"), Reply(text=REPORT, request_delay=1.5))
    block = {"name": "slow", "block": True, "timeout_ms": 60_000}
    llm.route(
        lambda body: not is_child(body),
        Reply(tool_calls=[ToolCallSpec("agent_open", {"prompt": "slow job", "name": "slow"})]),
        Reply(tool_calls=[ToolCallSpec("agent_eval", block, id="block")]),
        Reply(text="answered the user"),
        Reply(text="and read the child"),
    )
    result = await steer_while_in(session, "agent_eval", "stop waiting")
    await session.close()
    assert result.final_text == "and read the child"
    blocked = json.loads(tool_result(parent_requests(llm)[2], "block"))
    assert blocked["interrupted_by_user"] is True
    assert blocked["terminal"] is False and "timed_out" not in blocked
