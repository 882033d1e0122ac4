"""The engine: steering, cancel, truncation, step limits, big outputs, approvals, and the
session file at step boundaries (in-process, and a real process killed mid-turn)."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys

import pytest

from codewhale.engine import events
from codewhale.permissions import Mode
from codewhale.runtime import open_runtime
from tests.support.llm_server import Fault, Reply, ToolCallSpec
from tests.support.processes import daemon_marker, running
from tests.support.settings import TEST_KEY, app_environment


@pytest.fixture
async def make_session(llm, tmp_path, monkeypatch):
    monkeypatch.setenv("CODEWHALE_BASE_URL", llm.base_url)
    monkeypatch.setenv("DEEPSEEK_API_KEY", TEST_KEY)
    workspace = tmp_path / "repo"
    workspace.mkdir()
    opened = []

    def make(mode: Mode = Mode.YOLO, **kwargs):
        seen: list[events.Event] = []
        session = open_runtime(
            workspace=workspace, mode=mode, emit=seen.append, retry_base_delay_secs=0.01, **kwargs
        )
        session.seen = seen
        opened.append(session)
        return session

    yield make
    for session in opened:
        await session.manager.flush()  # a coalesced write may still be waiting
        session.writer.close()


def of_type(seen, kind):
    return [event for event in seen if isinstance(event, kind)]


async def test_a_steer_lands_after_the_running_tool_and_before_the_next_request(llm, make_session):
    session = make_session()
    llm.enqueue(
        Reply(tool_calls=[ToolCallSpec("exec_shell", {"command": "sleep 0.4; echo slept"})]),
        Reply(text="done"),
    )

    async def steer_while_tool_runs():
        while not of_type(session.seen, events.ToolCallStarted):
            await asyncio.sleep(0.01)
        session.engine.steer("also update the README")

    result, _ = await asyncio.gather(
        session.engine.run_turn("do the thing"), steer_while_tool_runs()
    )
    await session.close()
    assert result.status == "completed"
    messages = llm.requests[1].json["messages"]
    assert messages[-2]["role"] == "tool" and "slept" in messages[-2]["content"]
    assert messages[-1] == {"role": "user", "content": "also update the README"}
    assert [e.text for e in of_type(session.seen, events.SteerAccepted)] == [
        "also update the README"
    ]


async def test_cancel_mid_stream_keeps_partial_output_marked_interrupted(llm, make_session):
    session = make_session()
    llm.enqueue(Reply(text=[f"word{i} " for i in range(100)], chunk_delay=0.03))

    async def cancel_after_first_delta():
        while not of_type(session.seen, events.AssistantDelta):
            await asyncio.sleep(0.01)
        session.engine.cancel()

    result, _ = await asyncio.gather(session.engine.run_turn("talk"), cancel_after_first_delta())
    assert result.status == "interrupted"
    last = session.engine.messages[-1]
    assert last["role"] == "assistant" and last["content"].startswith("word0 ")
    assert last["content"].endswith("[interrupted by the user]")
    assert of_type(session.seen, events.TurnComplete)[-1].status == "interrupted"
    llm.enqueue(Reply(text="still works"))
    assert (await session.engine.run_turn("again")).final_text == "still works"
    await session.close()


async def test_cancel_during_a_tool_answers_the_open_call(llm, make_session):
    session = make_session()
    marker = daemon_marker()
    command = {"command": f"sleep {marker}"}
    llm.enqueue(Reply(tool_calls=[ToolCallSpec("exec_shell", command, id="s")]))

    async def cancel_when_tool_starts():
        # The tool is under way once its command runs.
        while not (of_type(session.seen, events.ToolCallStarted) and running(marker)):
            await asyncio.sleep(0.01)
        session.engine.cancel()

    result, _ = await asyncio.wait_for(
        asyncio.gather(session.engine.run_turn("wait"), cancel_when_tool_starts()), 120
    )
    await session.close()
    assert result.status == "interrupted"
    assert session.engine.messages[-1]["tool_call_id"] == "s"


async def test_length_truncation_continues_then_gives_up(llm, make_session):
    session = make_session()
    llm.enqueue(Reply(text="part one", finish_reason="length"), Reply(text=" part two"))
    result = await session.engine.run_turn("write a lot")
    assert result.status == "completed"
    assert "cut off by the output length limit" in llm.requests[1].json["messages"][-1]["content"]
    llm.respond = lambda body: Reply(text="again", finish_reason="length")
    result = await session.engine.run_turn("more")
    await session.close()
    assert result.status == "failed"
    assert "cut off by the output limit 3 times" in result.error


async def test_max_steps_stops_a_runaway_turn(llm, make_session):
    session = make_session(max_steps=2)
    llm.respond = lambda body: Reply(tool_calls=[ToolCallSpec("list_dir", {})])
    result = await session.engine.run_turn("loop forever")
    await session.close()
    assert result.status == "max_steps"
    assert len(llm.requests) == 2
    assert "max_steps" in of_type(session.seen, events.ErrorEvent)[0].message


async def test_large_tool_output_becomes_a_handle_the_model_can_read(llm, make_session):
    session = make_session()
    (session.workspace / "big.txt").write_text("".join(f"line {i}\n" for i in range(6000)))
    llm.enqueue(Reply(tool_calls=[ToolCallSpec("read_file", {"path": "big.txt"})]))
    llm.enqueue(Reply(text="ok"))
    await session.engine.run_turn("read big")
    tool_text = next(m for m in llm.requests[1].json["messages"] if m["role"] == "tool")["content"]
    assert "stored as a handle" in tool_text
    handle = json.loads(tool_text.rsplit("\n", 1)[-1])
    assert handle["kind"] == "var_handle" and handle["length"] > 20_000
    reply = session.engine.context.handles.read({"handle": handle, "range": {"start": 3, "end": 3}})
    await session.close()
    assert reply["content"].strip().endswith("line 2")


async def test_approve_always_skips_later_prompts(llm, make_session):
    session = make_session(mode=Mode.AGENT)
    asked = []

    def approve_always(event):
        if isinstance(event, events.ApprovalRequested):
            asked.append(event)
            event.resolve("approve_always")

    session.engine.emit = lambda event: (session.seen.append(event), approve_always(event))
    llm.enqueue(
        Reply(tool_calls=[ToolCallSpec("exec_shell", {"command": "echo one"})]),
        Reply(tool_calls=[ToolCallSpec("exec_shell", {"command": "echo two"})]),
        Reply(text="done"),
    )
    await session.engine.run_turn("echo twice")
    await session.close()
    assert len(asked) == 1 and asked[0].requester == "parent"
    assert of_type(session.seen, events.ApprovalResolved)[0].decision == "approve_always"


async def test_queued_prompts_run_after_the_turn(llm, make_session):
    session = make_session()
    llm.enqueue(Reply(text="first"), Reply(text="second"))
    session.engine.queue("then this")
    result = await session.engine.run_turn("do this")
    await session.close()
    assert result.final_text == "second"
    prompts = [e.prompt for e in of_type(session.seen, events.TurnStarted)]
    assert prompts == ["do this", "then this"]
    assert llm.requests[1].json["messages"][-1] == {"role": "user", "content": "then this"}


async def test_plan_artifacts_and_handle_reads_work_in_plan_mode(llm, make_session):
    session = make_session(mode=Mode.PLAN)
    plan = [{"text": "read code", "status": "completed"}, {"text": "fix", "status": "pending"}]
    session.engine.context.handles.put(session.info.id, "notes", "alpha\nbeta\n")
    llm.enqueue(
        Reply(
            tool_calls=[
                ToolCallSpec("update_plan", {"plan": plan, "explanation": "two steps"}),
                ToolCallSpec(
                    "handle_read",
                    {"handle": f"{session.info.id}/notes", "range": {"start": 2, "end": 2}},
                ),
            ]
        ),
        Reply(text="planned"),
    )
    await session.engine.run_turn("plan it")
    await session.close()
    plan_result, handle_result = [
        m["content"] for m in llm.requests[1].json["messages"] if m["role"] == "tool"
    ]
    assert plan_result.splitlines()[1:] == ["two steps", "[x] read code", "[ ] fix"]
    assert json.loads(handle_result)["content"] == "beta\n"
    assert session.engine.context.work.snapshot()["plan"][1]["text"] == "fix"


# -- the session file at step boundaries ----------------------------------------------------


def session_records(path):
    """(messages, recorded event types) in a session file as another process reads it."""
    messages, kinds = [], []
    for line in path.read_text().splitlines()[1:]:
        record = json.loads(line)
        if record["kind"] == "message":
            messages.append(record["message"])
        elif record["kind"] == "event":
            kinds.append(record["event"]["type"])
    return messages, kinds


async def test_each_request_goes_out_with_every_earlier_record_already_in_the_file(
    llm, make_session
):
    """Records are written at step boundaries, not per record: when a step's request
    reaches the server, the file (read by another reader) already holds all it carries."""
    session = make_session()
    (session.workspace / "notes.txt").write_text("alpha\n")
    on_disk = []

    def respond(body):
        on_disk.append((body["messages"], *session_records(session.writer.path)))
        if len(on_disk) <= 3:
            return Reply(tool_calls=[ToolCallSpec("read_file", {"path": "notes.txt"})])
        return Reply(text="done")

    llm.respond = respond
    await session.engine.run_turn("read it three times")
    await session.close()
    assert len(on_disk) == 4
    for step, (sent, messages, kinds) in enumerate(on_disk):
        assert messages == sent
        assert kinds.count("tool_call_finished") == step


def test_a_killed_process_loses_at_most_the_step_it_was_in(llm, tmp_path):
    """SIGKILL while the model works on step 3: steps 1 and 2 (calls, results) are on
    disk, and a resumed session carries exactly what that last request carried."""
    workspace, home = tmp_path / "repo", tmp_path / "home"
    workspace.mkdir()
    (workspace / "notes.txt").write_text("alpha\n")
    process: subprocess.Popen[bytes] | None = None
    requests, killed_in = [], []

    def respond(body):
        requests.append(body)
        if len(requests) < 3:
            return Reply(tool_calls=[ToolCallSpec("read_file", {"path": "notes.txt"})])
        killed_in.append(body["messages"])
        assert process is not None
        process.send_signal(signal.SIGKILL)
        return Reply(fault=Fault.stall(seconds=5))

    llm.respond = respond
    env = app_environment(
        CODEWHALE_HOME=str(home), CODEWHALE_BASE_URL=llm.base_url, DEEPSEEK_API_KEY=TEST_KEY
    )
    command = [sys.executable, "-m", "codewhale", "exec", "-C", str(workspace), "read it"]
    process = subprocess.Popen(command, stderr=subprocess.DEVNULL, env=env)
    try:
        assert process.wait(timeout=30) == -signal.SIGKILL
    finally:
        if process.poll() is None:
            process.kill()
    [path] = (home / "data" / "sessions").glob("sess_*.jsonl")
    messages, _ = session_records(path)
    [sent] = killed_in
    assert messages == sent
    assert sum(1 for message in messages if message["role"] == "tool") == 2
