"""`codewhale exec` for scripts: the session and result records around `--json`, chaining
runs by session id, and `--approve ask` talking on the terminal only.

Runs are real subprocesses against the loopback LLM, as in test_exec.py; the terminal
question is also read by the real function with pipes standing in for the terminal.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from codewhale.headless import NEEDS_TERMINAL, ApprovalPolicy, Terminal
from codewhale.runtime import events
from tests.support.llm_server import Fault, Reply, ToolCallSpec
from tests.support.settings import TEST_KEY, app_environment
from tests.support.terminal import read_until, start_on_terminal

USAGE = {
    "prompt_tokens": 1000,
    "completion_tokens": 20,
    "prompt_cache_hit_tokens": 600,
    "prompt_cache_miss_tokens": 400,
}


@pytest.fixture
def workspace(tmp_path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    (root / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    return root


@pytest.fixture
def exec_env(llm, tmp_path) -> dict[str, str]:
    return app_environment(
        CODEWHALE_HOME=str(tmp_path / "home"),
        CODEWHALE_BASE_URL=llm.base_url,
        DEEPSEEK_API_KEY=TEST_KEY,
    )


@pytest.fixture
def exec_command(workspace) -> list[str]:
    return [sys.executable, "-m", "codewhale", "exec", "-C", str(workspace)]


@pytest.fixture
def run_exec(exec_command, exec_env):
    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*exec_command, *args],
            capture_output=True,
            text=True,
            env=exec_env,
            stdin=subprocess.DEVNULL,
            timeout=60,
        )

    return run


def records(stdout: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stdout.splitlines()]


def contents(request) -> list[Any]:
    return [m["content"] for m in request.json["messages"]]


# -- the records ------------------------------------------------------------------------------


def test_json_stream_opens_with_the_session_and_closes_with_the_result(llm, run_exec, workspace):
    llm.enqueue(Reply(text=["Hel", "lo"], usage=USAGE))
    result = run_exec("--json", "hi")
    assert result.returncode == 0, result.stderr
    lines = records(result.stdout)
    session, result_record = lines[0], lines[-1]
    # Like every event, both records say when they were written.
    for record in (session, result_record):
        assert isinstance(record.pop("ts"), float)
    assert session == {
        "type": "session",
        "schema_version": 1,
        "session_id": session["session_id"],
        "workspace": str(workspace.resolve()),
        "model": llm.requests[0].json["model"],
        "mode": "agent",
        "resumed": False,
    }
    assert session["session_id"].startswith("sess_")
    # The events in between are today's, unchanged.
    assert [e["type"] for e in lines[1:-1]] == [
        "turn_started",
        "assistant_delta",
        "assistant_delta",
        "usage",
        "assistant_message",
        "turn_complete",
    ]
    duration_ms = result_record.pop("duration_ms")
    cost_usd = result_record.pop("cost_usd")
    assert result_record == {
        "type": "result",
        "schema_version": 1,
        "status": "completed",
        "final_text": "Hello",
        "usage": {"input": 1000, "output": 20, "cache_hit": 600, "cache_miss": 400},
        "session_id": session["session_id"],
        "children": {
            "total": 0,
            "completed": 0,
            "failed": 0,
            "cancelled": 0,
            "interrupted": 0,
            "running": 0,
        },
    }
    assert isinstance(duration_ms, int) and 0 < duration_ms < 60_000
    assert isinstance(cost_usd, float) and cost_usd > 0


def test_resume_by_the_session_id_the_first_run_printed(llm, run_exec):
    llm.enqueue(Reply(text="noted: 42", usage=USAGE), Reply(text="it was 42", usage=USAGE))
    first = run_exec("--json", "remember 42")
    assert first.returncode == 0, first.stderr
    session_id = records(first.stdout)[0]["session_id"]

    second = run_exec("--resume", session_id, "--json", "next")
    assert second.returncode == 0, second.stderr
    session, *_, result = records(second.stdout)
    assert session["resumed"] is True and session["session_id"] == session_id
    assert result["session_id"] == session_id and result["final_text"] == "it was 42"
    assert contents(llm.requests[-1])[-3:] == ["remember 42", "noted: 42", "next"]
    # Each run's result counts that run only, though the session's totals carry on.
    assert result["usage"] == records(first.stdout)[-1]["usage"]
    assert result["usage"]["input"] == 1000


def test_continue_is_a_resume_too(llm, run_exec):
    llm.enqueue(Reply(text="one"), Reply(text="two"))
    first = records(run_exec("--json", "first").stdout)[0]
    second = records(run_exec("--continue", "--json", "second").stdout)[0]
    assert second["resumed"] is True and second["session_id"] == first["session_id"]


@pytest.mark.parametrize(
    ("replies", "flags", "status", "exit_code"),
    [
        ([Reply(fault=Fault.status(401))], [], "error", 1),
        (
            [Reply(tool_calls=[ToolCallSpec("read_file", {"path": "calc.py"})])],
            ["--max-steps", "1"],
            "max_steps",
            1,
        ),
    ],
    ids=["provider-error", "max-steps"],
)
def test_a_turn_that_did_not_complete_says_how(llm, run_exec, replies, flags, status, exit_code):
    llm.enqueue(*replies)
    result = run_exec("--json", *flags, "go")
    assert result.returncode == exit_code
    lines = records(result.stdout)
    assert lines[0]["type"] == "session"
    assert lines[-1]["type"] == "result" and lines[-1]["status"] == status
    assert lines[-2]["type"] == "turn_complete"
    assert any(e["type"] == "error" for e in lines)  # the words a person can act on


def test_interrupt_ends_with_an_interrupted_result(llm, exec_command, exec_env):
    llm.enqueue(Reply(text=[f"w{i} " for i in range(400)], chunk_delay=0.05))
    process = subprocess.Popen(
        [*exec_command, "--json", "talk"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=exec_env,
    )
    try:
        assert process.stdout is not None
        for line in process.stdout:
            if json.loads(line)["type"] == "assistant_delta":
                break
        process.send_signal(signal.SIGINT)
        rest, _ = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 130
    *_, turn_complete, result = records(rest)
    assert turn_complete["type"] == "turn_complete" and turn_complete["status"] == "interrupted"
    assert result["type"] == "result" and result["status"] == "interrupted"


def test_plain_output_is_the_answer_and_the_session_id_goes_to_stderr(llm, run_exec, exec_env):
    llm.enqueue(Reply(text="the answer"))
    result = run_exec("hi")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "the answer\n"
    (session_file,) = (Path(exec_env["CODEWHALE_HOME"]) / "data" / "sessions").glob("*.jsonl")
    assert result.stderr.splitlines()[-1] == f"session: {session_file.stem}"


# -- --approve ask ------------------------------------------------------------------------------


def test_approve_ask_without_a_terminal_fails_before_any_request(llm, exec_command, exec_env):
    llm.enqueue(Reply(text="never sent"))
    # A new session has no controlling terminal, wherever the tests themselves run.
    result = subprocess.run(
        [*exec_command, "--approve", "ask", "--json", "make a file"],
        capture_output=True,
        text=True,
        env=exec_env,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert NEEDS_TERMINAL in result.stderr
    assert result.stdout == ""
    assert llm.requests == []


@contextmanager
def asked_on_a_terminal(
    exec_command: list[str], env: dict[str, str], prompt: str
) -> Iterator[tuple[subprocess.Popen, int]]:
    """Run `codewhale exec --approve ask --json PROMPT` with a new pty as its controlling
    terminal (its /dev/tty), while stdin, stdout and stderr go elsewhere: a question can
    only come from /dev/tty.

    Yields the process and the pty's controller end; on leaving, a process still running
    is killed and the controller closed.
    """
    process, controller = start_on_terminal(
        [*exec_command, "--approve", "ask", "--json", prompt], env, controlling=True, piped=True
    )
    try:
        yield process, controller
    finally:
        if process.poll() is None:
            process.kill()
        os.close(controller)


def expect(fd: int, marker: bytes, within: float) -> bytes:
    """What `fd` shows up to `marker`, which must come within `within` seconds."""
    seen = read_until(fd, marker, within)
    assert marker in seen, f"no {marker!r} in {seen!r}"
    return seen


def test_approve_ask_talks_on_the_terminal_and_keeps_json_clean(llm, exec_command, exec_env):
    llm.enqueue(
        Reply(tool_calls=[ToolCallSpec("exec_shell", {"command": "touch asked.txt"})]),
        Reply(text="made it"),
    )
    with asked_on_a_terminal(exec_command, exec_env, "make a file") as (process, controller):
        seen = expect(controller, b"Allow?", within=120)
        assert b"exec_shell: touch asked.txt" in seen
        os.write(controller, b"y\n")
        out, err = process.communicate(timeout=120)
    assert process.returncode == 0, err
    assert "Allow?" not in out + err
    lines = records(out)
    assert lines[0]["type"] == "session"
    assert lines[-1]["type"] == "result" and lines[-1]["status"] == "completed"
    decisions = [e["decision"] for e in lines if e["type"] == "approval_resolved"]
    assert decisions == ["approve"]
    assert (Path(lines[0]["workspace"]) / "asked.txt").exists()


def test_the_question_shows_the_rule_always_would_store(llm, exec_command, exec_env):
    """The rule is on the terminal before the answer; a form that runs a program asks again."""
    find, find_exec = "find . -name x", "find . -name x -exec touch pwned ';'"
    llm.enqueue(
        Reply(tool_calls=[ToolCallSpec("exec_shell", {"command": find})]),
        Reply(tool_calls=[ToolCallSpec("exec_shell", {"command": "find . -type f"})]),
        Reply(tool_calls=[ToolCallSpec("exec_shell", {"command": find_exec})]),
        Reply(text="done"),
    )
    with asked_on_a_terminal(exec_command, exec_env, "look around") as (process, controller):
        first = expect(controller, b"Allow?", within=120).decode()
        os.write(controller, b"a\n")
        second = expect(controller, b"Allow?", within=120).decode()
        os.write(controller, b"n\n")
        out, err = process.communicate(timeout=120)
    assert process.returncode == 0, err
    rule = "[a]lways allows, for this session: exec_shell commands starting `find` (except"
    assert first.index(f"exec_shell: {find}") < first.index(rule) < first.index("Allow?")
    assert f"exec_shell: {find_exec}" in second
    assert f"exactly this exec_shell call: `{find_exec}`" in second
    lines = records(out)
    decisions = [e["decision"] for e in lines if e["type"] == "approval_resolved"]
    assert decisions == ["approve_always", "deny"]  # `find . -type f` rode on the rule
    assert not (Path(lines[0]["workspace"]) / "pwned").exists()


def test_accept_edits_at_the_terminal_lets_the_later_edits_run_unasked(
    llm, exec_command, exec_env, workspace
):
    """The edit answers the app's dialog offers are offered at the terminal too."""
    (workspace / "a.txt").write_text("alpha\n")
    (workspace / "b.txt").write_text("beta\n")
    llm.enqueue(
        Reply(tool_calls=[ToolCallSpec("edit_file", edit("a.txt", "alpha", "ALPHA"))]),
        Reply(tool_calls=[ToolCallSpec("edit_file", edit("b.txt", "beta", "BETA"))]),
        Reply(text="both edited"),
    )
    with asked_on_a_terminal(exec_command, exec_env, "edit both") as (process, controller):
        question = expect(controller, b"[N]o: ", within=120).decode()
        os.write(controller, b"e\n")
        out, err = process.communicate(timeout=120)
    assert process.returncode == 0, err
    assert "[y] approve once / [f] this file / [e] accept edits / [N]o" in question
    assert "[a]lways" not in question  # no lasting rule for a file change
    decisions = [e["decision"] for e in records(out) if e["type"] == "approval_resolved"]
    assert decisions == ["accept_edits"]  # the second edit was not asked about
    assert (workspace / "a.txt").read_text() == "ALPHA\n"
    assert (workspace / "b.txt").read_text() == "BETA\n"


def edit(path: str, old: str, new: str) -> dict[str, str]:
    return {"path": path, "old_string": old, "new_string": new}


def test_ctrl_c_while_the_question_waits_ends_the_run(llm, exec_command, exec_env):
    llm.enqueue(Reply(tool_calls=[ToolCallSpec("exec_shell", {"command": "touch asked.txt"})]))
    with asked_on_a_terminal(exec_command, exec_env, "make a file") as (process, controller):
        expect(controller, b"Allow?", within=120)
        os.write(controller, b"\x03")  # Ctrl-C, typed at the terminal that was asked
        # The unanswered question, still blocked on the terminal, does not hold up the
        # exit: held up, the run would never end (the ceiling is for that hang).
        out, err = process.communicate(timeout=120)
    assert process.returncode == 130, err
    assert records(out)[-1]["status"] == "interrupted"


@pytest.fixture
def pipe_terminal():
    """A Terminal on two real pipes, and the person's ends of them: the test answers into
    one and reads the questions from the other, as someone at /dev/tty would."""
    answers_read, answers_write = os.pipe()
    questions_read, questions_write = os.pipe()
    ends = [
        open(answers_read, encoding="utf-8"),  # noqa: SIM115
        open(questions_write, "w", encoding="utf-8"),  # noqa: SIM115
        open(answers_write, "wb", buffering=0),  # noqa: SIM115
        open(questions_read, "rb", buffering=0),  # noqa: SIM115
    ]
    yield Terminal(answers=ends[0], questions=ends[1]), ends[2], ends[3]
    for end in ends:
        end.close()


def approval_request() -> events.ApprovalRequested:
    return events.ApprovalRequested(
        request_id="r1",
        tool="exec_shell",
        summary="touch made.txt",
        arguments="{}",
        _future=asyncio.get_running_loop().create_future(),
    )


async def test_the_answer_is_read_while_the_event_loop_keeps_running(pipe_terminal):
    terminal, answers, questions = pipe_terminal
    request = approval_request()
    ticks = 0

    async def tick() -> None:
        """Answers once the loop has run 20 times while the question waits."""
        nonlocal ticks
        while True:
            ticks += 1
            if ticks == 20:
                answers.write(b"a\n")
            await asyncio.sleep(0.01)

    ticker = asyncio.create_task(tick())
    # A reader that blocked the loop would stop the ticks and so never be answered by
    # them: this thread answers it then, after a while, and the count of ticks catches it.
    backstop = threading.Timer(30, answers.write, [b"a\n"])
    backstop.start()
    ApprovalPolicy("ask", terminal)(request)
    assert request._future is not None
    assert await asyncio.wait_for(request._future, 60) == "approve_always"
    backstop.cancel()
    ticker.cancel()
    assert ticks >= 20
    assert b"exec_shell: touch made.txt" in expect(questions.fileno(), b"Allow?", within=5)


async def test_the_end_of_the_terminal_denies(pipe_terminal):
    terminal, answers, _ = pipe_terminal
    request = approval_request()
    ApprovalPolicy("ask", terminal)(request)
    answers.close()  # the person's end goes away without a word
    assert request._future is not None
    assert await asyncio.wait_for(request._future, 5) == "deny"
