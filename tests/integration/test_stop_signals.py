"""SIGTERM and SIGHUP end `codewhale exec` and the app as Ctrl+C does: the turn and the
children are recorded interrupted, the result is written, and nothing we started lives on.

Real processes, really signalled: the loopback model keeps three children stalled, a shell
command sleeps, and a stdio MCP server (configured by the user) runs on after its input
ends, as a hung one would; each is found afterwards by a marker in its command line.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.llm_server import Fault, Reply, ToolCallSpec
from tests.support.mcp import DEMO_ARGS, DEMO_COMMAND, DEMO_ENV, setup_home, toml_table
from tests.support.processes import count_running, daemon_marker, kill_marked, running
from tests.support.terminal import read_until, start_on_terminal

CHILDREN = 3
EXEC = [sys.executable, "-m", "codewhale", "exec"]


@pytest.fixture
def marker() -> Iterator[Callable[[], str]]:
    """Makes markers for processes to look for; after the test (its checks done), what
    still carries one is killed, so a failure leaves nothing running."""
    made: list[str] = []

    def make() -> str:
        made.append(daemon_marker())
        return made[-1]

    yield make
    for each in made:
        kill_marked(each)


def is_child(body: dict[str, Any]) -> bool:
    return any("Task:\n" in str(m.get("content")) for m in body["messages"])


def fan_out(llm, sleeper: str) -> None:
    """Three children that stall at the model, beside a shell command that sleeps."""
    llm.route(is_child, respond=lambda body: Reply(fault=Fault.stall(seconds=60)))
    llm.enqueue(
        Reply(
            tool_calls=[
                *(ToolCallSpec("agent_open", {"prompt": f"child {i}"}) for i in range(CHILDREN)),
                ToolCallSpec("exec_shell", {"command": f"sleep {sleeper}", "timeout_secs": 600}),
            ]
        ),
        Reply(text="waiting for children"),
    )


def hanging_server(marker: str, hang: str, startup_timeout: int = 30) -> str:
    """The user's config: the demo MCP server hanging as `--hang` says, marked `marker`."""
    arguments = [*DEMO_ARGS, "--hang", hang, f"--mark={marker}"]
    return f"[mcp]\nstartup_timeout_secs = {startup_timeout}\n" + toml_table(
        "hanging", command=DEMO_COMMAND, args=arguments, env=DEMO_ENV
    )


def recorded_children(workspace: Path, env: dict[str, str]) -> list[dict[str, Any]]:
    """The workspace's sub-agent records as `codewhale agents list` reads them from disk."""
    listing = subprocess.run(
        [sys.executable, "-m", "codewhale", "agents", "list", "--json", "-C", str(workspace)],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert listing.returncode == 0, listing.stderr
    agents: list[dict[str, Any]] = json.loads(listing.stdout)["agents"]
    return agents


def start_exec(workspace: Path, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*EXEC, "-C", str(workspace), "--json", "--approve", "auto", "delegate"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def records(stdout: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stdout.splitlines()]


def wait_until(condition, what: str, within: float = 60.0) -> None:
    deadline = time.monotonic() + within
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"{what} never happened")
        time.sleep(0.05)


# -- codewhale exec ----------------------------------------------------------------------------


@pytest.mark.parametrize(("signum", "status"), [(signal.SIGTERM, 143), (signal.SIGHUP, 129)])
def test_a_stop_signal_during_a_fan_out_records_everything_and_leaves_no_process(
    llm, tmp_path, marker, signum, status
):
    server, sleeper = marker(), marker()
    workspace, _, env = setup_home(tmp_path, hanging_server(server, "exit"), llm)
    fan_out(llm, sleeper)
    process = start_exec(workspace, env)
    try:
        wait_until(
            lambda: (
                sum(is_child(r.json) for r in llm.requests) >= CHILDREN
                and running(sleeper)
                and running(server)
            ),
            "three stalled children, the shell command and the MCP server",
        )
        process.send_signal(signum)
        stdout, stderr = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()

    assert process.returncode == status, stderr
    assert "Traceback" not in stderr
    *events, result = records(stdout)
    assert [e["status"] for e in events if e["type"] == "turn_complete"] == ["interrupted"]
    assert result["type"] == "result" and result["status"] == "interrupted"
    assert result["children"]["total"] == CHILDREN
    assert [a["status"] for a in recorded_children(workspace, env)] == ["interrupted"] * CHILDREN
    assert count_running(server) == 0 and count_running(sleeper) == 0


def test_a_second_signal_while_closing_exits_at_once_and_still_leaves_no_process(
    llm, tmp_path, marker
):
    server, sleeper = marker(), marker()
    # Closing waits for this server: 2 s for it to end once its input closes, 2 s after
    # SIGTERM (which it ignores), then SIGKILL; the second signal comes well before.
    workspace, _, env = setup_home(tmp_path, hanging_server(server, "exit"), llm)
    fan_out(llm, sleeper)
    process = start_exec(workspace, env)
    try:
        wait_until(
            lambda: sum(is_child(r.json) for r in llm.requests) >= CHILDREN and running(server),
            "three stalled children and the MCP server",
        )
        process.send_signal(signal.SIGTERM)
        assert process.stdout is not None
        for line in process.stdout:
            if json.loads(line)["type"] == "turn_complete":
                break  # the turn has ended: closing has begun
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()

    assert process.returncode == 143
    assert "SIGTERM again while stopping; exiting at once" in stderr
    assert "Traceback" not in stderr
    assert count_running(server) == 0 and count_running(sleeper) == 0


def test_a_stop_signal_while_an_mcp_server_hangs_in_its_handshake(llm, tmp_path, marker):
    server = marker()
    config = hanging_server(server, "handshake", startup_timeout=300)
    workspace, _, env = setup_home(tmp_path, config, llm)
    process = start_exec(workspace, env)
    try:
        wait_until(lambda: running(server), "the MCP server starting")
        process.send_signal(signal.SIGTERM)
        stdout, stderr = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()

    assert process.returncode == 143, stderr
    assert "Traceback" not in stderr
    session, result = records(stdout)
    assert session["type"] == "session"
    assert result["type"] == "result" and result["status"] == "interrupted"
    assert llm.requests == []  # the turn never started
    assert count_running(server) == 0


# -- the app ----------------------------------------------------------------------------------


def drain(controller: int, until: Callable[[bytes], bool], within: float = 60.0) -> bytes:
    """Read the app's screen output (it must be read, or the app blocks writing) until
    `until` holds for what was read so far."""
    deadline = time.monotonic() + within
    seen = read_until(controller, until, within)
    # Not there once the terminal has ended is not a hang: only the ceiling fails the test.
    if not until(seen) and time.monotonic() >= deadline:
        pytest.fail(f"the app never got there; its screen ended with {seen[-300:]!r}")
    return seen


def start_app(
    workspace: Path, env: dict[str, str], *, controlling: bool = True
) -> tuple[subprocess.Popen[bytes], int]:
    """The app on a new pty that is its controlling terminal, as a terminal window gives
    it: closing the pty's other end hangs it up (SIGHUP). Not `controlling`: a pty it only
    reads and writes, whose closing sends no signal. Returns the process and that end."""
    return start_on_terminal(
        [sys.executable, "-m", "codewhale", "-C", str(workspace)],
        {**env, "TERM": "xterm-256color"},
        controlling=controlling,
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    ("how", "status"),
    [("close the terminal", 129), ("close a terminal it does not control", 129), ("SIGTERM", 143)],
)
def test_the_app_saves_and_quits_when_its_terminal_closes_or_on_sigterm(
    llm, tmp_path, marker, how, status
):
    server = marker()
    workspace, _, env = setup_home(tmp_path, hanging_server(server, "exit"), llm)
    llm.route(is_child, respond=lambda body: Reply(fault=Fault.stall(seconds=60)))
    llm.enqueue(
        Reply(tool_calls=[ToolCallSpec("agent_open", {"prompt": "child 0"})]),
        Reply(text="waiting for the child"),
    )
    process, controller = start_app(
        workspace, env, controlling=how != "close a terminal it does not control"
    )
    try:
        drain(controller, lambda screen: b"Ask" in screen)
        os.write(controller, b"delegate")
        drain(controller, lambda screen: b"delegate" in screen)  # typed, not pasted
        os.write(controller, b"\r")
        drain(
            controller,
            lambda _: any(is_child(r.json) for r in llm.requests) and running(server),
        )
        if how == "SIGTERM":
            process.send_signal(signal.SIGTERM)
            drain(controller, lambda _: process.poll() is not None)
        else:
            os.close(controller)
        process.wait(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
        with contextlib.suppress(OSError):
            os.close(controller)

    assert process.returncode == status
    assert [a["status"] for a in recorded_children(workspace, env)] == ["interrupted"]
    assert count_running(server) == 0
    # The session is whole: the interrupted turn is in it, and it goes on from there.
    llm.enqueue(Reply(text="carrying on"))
    resumed = subprocess.run(
        [*EXEC, "-C", str(workspace), "--continue", "--json", "--approve", "deny", "go on"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert resumed.returncode == 0, resumed.stderr
    assert records(resumed.stdout)[0]["resumed"] is True
    sent = [m.get("content") for m in llm.requests[-1].json["messages"]]
    assert "delegate" in sent and sent[-1] == "go on"
