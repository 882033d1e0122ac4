"""Background shell tasks through a real `codewhale exec` (issue 30, item 3): the call
answers before the command ends, shell_output waits for it, shell_kill stops it, and
nothing outlives the session."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Iterator

import pytest

from codewhale.tools.background import MAX_RUNNING
from tests.support.llm_server import Reply, ToolCallSpec
from tests.support.processes import count_running, daemon_marker, kill_marked
from tests.support.settings import TEST_KEY, app_environment


@pytest.fixture
def marker() -> Iterator[Callable[[], str]]:
    made: list[str] = []

    def make() -> str:
        made.append(daemon_marker())
        return made[-1]

    yield make
    for each in made:
        kill_marked(each)


def run_exec(llm, tmp_path) -> subprocess.CompletedProcess[str]:
    workspace = tmp_path / "repo"
    workspace.mkdir(exist_ok=True)
    env = app_environment(
        CODEWHALE_HOME=str(tmp_path / "home"),
        CODEWHALE_BASE_URL=llm.base_url,
        DEEPSEEK_API_KEY=TEST_KEY,
    )
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "codewhale",
            "exec",
            "-C",
            str(workspace),
            "--approve",
            "auto",
            "serve",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


def results(llm) -> list[str]:
    return [m["content"] for m in llm.requests[-1].json["messages"] if m["role"] == "tool"]


def test_a_background_command_answers_at_once_and_its_output_waits_for_its_end(llm, tmp_path):
    llm.enqueue(
        Reply(
            tool_calls=[
                ToolCallSpec("exec_shell", {"command": "sleep 3; echo X", "background": True})
            ]
        ),
        Reply(tool_calls=[ToolCallSpec("shell_output", {"task_id": "bg_1", "block": True})]),
        Reply(text="served"),
    )
    result = run_exec(llm, tmp_path)
    assert result.returncode == 0, result.stderr
    started, output = results(llm)
    # The first answer came while the command still ran: it says started, not its exit.
    assert started.startswith("[started in the background as bg_1]")
    assert output.startswith("[bg_1 exited with code 0; next since=2]") and output.endswith("X")


def test_shell_kill_stops_a_task_and_the_session_end_stops_the_rest(llm, tmp_path, marker):
    killed, left = marker(), marker()
    llm.enqueue(
        Reply(
            tool_calls=[
                ToolCallSpec("exec_shell", {"command": f"sleep {killed}", "background": True}),
                ToolCallSpec("exec_shell", {"command": f"sleep {left}", "background": True}),
            ]
        ),
        Reply(tool_calls=[ToolCallSpec("shell_kill", {"task_id": "bg_1"})]),
        Reply(text="left one running"),
    )
    result = run_exec(llm, tmp_path)
    assert result.returncode == 0, result.stderr
    assert results(llm)[-1].startswith("[bg_1 killed with code")
    assert count_running(killed) == 0 and count_running(left) == 0


def test_at_most_max_running_tasks_and_the_session_end_stops_them(llm, tmp_path, marker):
    sleeper = marker()
    starts = [
        ToolCallSpec("exec_shell", {"command": f"sleep {sleeper}", "background": True})
        for _ in range(MAX_RUNNING + 1)
    ]
    llm.enqueue(Reply(tool_calls=starts), Reply(text="enough"))
    result = run_exec(llm, tmp_path)
    assert result.returncode == 0, result.stderr
    answers = results(llm)
    assert sum(a.startswith("[started in the background as bg_") for a in answers) == MAX_RUNNING
    assert f"{MAX_RUNNING} background tasks are already running" in answers[-1]
    assert count_running(sleeper) == 0
