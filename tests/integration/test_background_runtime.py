"""The Runtime's door to background tasks (what the TUI uses): a typed event when a task
starts and when it ends, snapshots, output read on from an offset, and kill."""

from __future__ import annotations

import asyncio

import pytest

from codewhale.permissions import Mode
from codewhale.runtime import RuntimeRequestError, events, open_runtime
from tests.support.llm_server import Reply, ToolCallSpec
from tests.support.processes import daemon_marker, gone, kill_marked, running
from tests.support.settings import TEST_KEY


@pytest.fixture
def session(llm, tmp_path, monkeypatch):
    monkeypatch.setenv("CODEWHALE_BASE_URL", llm.base_url)
    monkeypatch.setenv("DEEPSEEK_API_KEY", TEST_KEY)
    workspace = tmp_path / "repo"
    workspace.mkdir()
    seen: list[events.Event] = []
    runtime = open_runtime(workspace=workspace, mode=Mode.YOLO, emit=seen.append)
    runtime.seen = seen  # type: ignore[attr-defined]
    return runtime


def changes(runtime) -> list[tuple[str, str]]:
    return [
        (event.task_id, event.status)
        for event in runtime.seen
        if isinstance(event, events.BackgroundTaskChanged)
    ]


async def until(condition) -> None:
    async with asyncio.timeout(20):
        while not condition():
            await asyncio.sleep(0.02)


def starting(command: str) -> Reply:
    return Reply(tool_calls=[ToolCallSpec("exec_shell", {"command": command, "background": True})])


async def test_a_task_that_ends_by_itself_is_an_event_and_its_output_reads_on(llm, session):
    workspace = session.workspace
    command = "echo one; while [ ! -e go ]; do sleep 0.05; done; echo two; exit 4"
    llm.enqueue(starting(command), Reply(text="started"))
    llm.respond = lambda body: Reply(text="noted")
    await session.submit("start it")
    assert changes(session) == [("bg_1", "running")]
    await until(lambda: session.background_output("bg_1").text == "one\n")
    first = session.background_output("bg_1")
    (workspace / "go").touch()
    await until(lambda: ("bg_1", "exit 4") in changes(session))
    rest = session.background_output("bg_1", first.offset)
    assert rest.text == "two\n" and rest.snapshot.status == "exit 4"
    [task] = session.background_tasks()
    assert (task.task_id, task.command, task.last_line) == ("bg_1", command, "two")
    assert not task.running and not task.killed
    await session.close()


async def test_kill_background_stops_the_process_and_says_killed(llm, session):
    marker = daemon_marker()
    try:
        llm.enqueue(starting(f"sleep {marker}"), Reply(text="started"))
        await session.submit("start it")
        # Stopped once it runs, as a user stops a task they see: a sandbox killed in its
        # first milliseconds can orphan its command, which only a subreaper (the app,
        # not this test's process) finds again (docs/SECURITY.md, known limits).
        await until(lambda: running(marker))
        stopped = await session.kill_background("bg_1")
        assert stopped.status == "killed" and not stopped.running
        assert await gone(marker)
        await until(lambda: ("bg_1", "killed") in changes(session))
        with pytest.raises(RuntimeRequestError, match="no background task 'bg_9'"):
            session.background_output("bg_9")
    finally:
        kill_marked(marker)
        await session.close()
