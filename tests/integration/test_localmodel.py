"""The provider client and the app against the real llama.cpp server on SmolLM2-135M.

These share one server per xdist worker (see the `xdist_group` mark); tests that kill
or restart a server start their own.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from codewhale.providers.client import ChatClient
from codewhale.providers.errors import LocalServerError, StreamInterruptedError
from codewhale.providers.local_server import process_exited
from codewhale.providers.types import StreamFinished, TextDelta
from codewhale.runtime import open_runtime
from tests.support.local_model import local_settings, make_server, running_server
from tests.support.settings import app_environment

pytestmark = [pytest.mark.localmodel, pytest.mark.slow, pytest.mark.xdist_group("localmodel")]

GREETING = [{"role": "user", "content": "Write one friendly sentence about the sea."}]
READ_TOOL = {
    "type": "function",
    "function": {
        "name": "read_file",
        "description": "Read a text file from the workspace.",
        "parameters": {
            "type": "object",
            "properties": {"path": {"type": "string"}},
            "required": ["path"],
        },
    },
}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with running_server(tmp_path_factory.mktemp("llama")) as running:
        yield running


@pytest.fixture
async def client(server):
    async with ChatClient(local_settings(server.base_url)) as client:
        yield client


async def collect(stream):
    deltas, finished = [], None
    async for event in stream:
        if isinstance(event, TextDelta):
            deltas.append(event.text)
        elif isinstance(event, StreamFinished):
            finished = event.completion
    return deltas, finished


async def test_streamed_text_and_usage_match_the_unstreamed_answer(client):
    deltas, streamed = await collect(client.stream(GREETING, temperature=0, max_tokens=40))
    whole = await client.request(GREETING, temperature=0, max_tokens=40)
    assert len(deltas) > 3 and "".join(deltas) == streamed.content
    assert streamed.content == whole.content and streamed.content.strip()
    # Streamed usage comes from our runner's patch; it must agree with llama.cpp's own.
    assert streamed.usage.input_tokens == whole.usage.input_tokens > 5
    assert streamed.usage.output_tokens == whole.usage.output_tokens > 3


async def test_concurrent_requests_queue_instead_of_cutting_each_other_off(client):
    """Sub-agents share the one server: a second request must not end the first."""
    _, solo = await collect(client.stream(GREETING, temperature=0, max_tokens=40))
    together = await asyncio.gather(
        *(collect(client.stream(GREETING, temperature=0, max_tokens=40)) for _ in range(3))
    )
    for _, completion in together:
        assert completion.content == solo.content
        assert completion.usage.output_tokens == solo.usage.output_tokens


async def test_max_tokens_and_stop_sequences_end_the_answer(client):
    count = [{"role": "user", "content": "Count from 1 to 30, separated by commas."}]
    _, capped = await collect(client.stream(count, temperature=0, max_tokens=6))
    assert capped.finish_reason == "length" and capped.usage.output_tokens == 6
    _, stopped = await collect(client.stream(count, temperature=0, stop=[","]))
    assert stopped.finish_reason == "stop"
    assert stopped.content.strip() and "," not in stopped.content


async def test_streaming_with_tools_is_an_empty_body_that_the_client_never_passes_on(
    server, client
):
    ask = [{"role": "user", "content": "Read the file README.md"}]
    body = client.build_body(ask, tools=[READ_TOOL], tool_choice="auto", temperature=0)
    async with httpx.AsyncClient(timeout=120) as raw:
        response = await raw.post(server.base_url + "/chat/completions", json=body)
    assert response.status_code == 200 and response.content.strip() == b""

    _, called = await collect(client.stream(ask, tools=[READ_TOOL], temperature=0))
    assert called.finish_reason == "tool_calls"
    assert [call.name for call in called.tool_calls] == ["read_file"]
    assert "path" in json.loads(called.tool_calls[0].arguments)

    # When the constrained model picks "answer in words", the server sends no words;
    # the client asks again without tools and charges both requests.
    deltas, answered = await collect(client.stream(GREETING, tools=[READ_TOOL], temperature=0))
    assert answered.content.strip() and not answered.tool_calls
    assert "".join(deltas) == answered.content
    _, plain = await collect(client.stream(GREETING, temperature=0))
    assert answered.usage.input_tokens > plain.usage.input_tokens


async def test_a_tool_round_trip_is_accepted(client):
    """The model's own tool call (content null) and its result go back to the server."""
    ask = [{"role": "user", "content": "Read the file README.md"}]
    _, called = await collect(client.stream(ask, tools=[READ_TOOL], temperature=0))
    call = called.tool_calls[0]
    history = [
        *ask,
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments},
                }
            ],
        },
        {"role": "tool", "tool_call_id": call.id, "content": "# Demo\nA small project."},
    ]
    _, after = await collect(client.stream(history, tools=[READ_TOOL], temperature=0))
    assert after.content.strip() or after.tool_calls


async def test_a_server_killed_mid_stream_fails_clearly_and_the_next_request_restarts_it(
    tmp_path,
):
    server = make_server(tmp_path)
    # Retries as configured by default: a process that was just SIGKILLed can take a few
    # ms to die, and a request in that window is a connection error worth retrying.
    client = ChatClient(local_settings(max_retries=3), launcher=server, retry_base_delay_secs=0.2)
    story = [{"role": "user", "content": "Tell a long story about a lighthouse keeper."}]
    try:
        seen = 0
        with pytest.raises(StreamInterruptedError) as caught:
            async for event in client.stream(story, temperature=0, max_tokens=400):
                seen += isinstance(event, TextDelta)
                if seen == 3:
                    os.kill(server.pid, signal.SIGKILL)
        assert "offline SmolLM2-135M" in caught.value.message
        first_pid = server._process.pid
        completion = await client.complete(GREETING, temperature=0, max_tokens=20)
        assert completion.content.strip()
        assert server.starts == 2 and server.pid != first_pid
    finally:
        await client.aclose()
        await server.stop()
    assert not server.running


async def test_the_server_gets_no_api_key_and_stops_with_the_session(tmp_path, monkeypatch):
    monkeypatch.setenv("DEEPSEEK_API_KEY", "sk-must-not-leak-0123456789")
    server = make_server(tmp_path)
    try:
        await server.ensure_started()
        environ = Path(f"/proc/{server.pid}/environ").read_bytes()
        assert b"sk-must-not-leak" not in environ and b"API_KEY" not in environ
        pid = server.pid
    finally:
        await server.stop()
    assert not Path(f"/proc/{pid}").exists() or b"Z" in Path(f"/proc/{pid}/stat").read_bytes()


def test_the_server_exits_when_codewhale_is_killed(tmp_path):
    """SIGKILL gives us no chance to stop it; the runner notices its parent is gone."""
    script = (
        "import asyncio, sys\n"
        "from tests.support.local_model import make_server\n"
        "from pathlib import Path\n"
        "async def main():\n"
        f"    server = make_server(Path({str(tmp_path)!r}))\n"
        "    await server.ensure_started()\n"
        "    print(server.pid, flush=True)\n"
        "    await asyncio.sleep(60)\n"
        "asyncio.run(main())\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        server_pid = int(parent.stdout.readline())
        parent.kill()
        parent.wait()
        deadline = time.monotonic() + 10
        while not process_exited(server_pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert process_exited(server_pid)
    finally:
        parent.kill()


def test_codewhale_exec_answers_on_the_offline_model_with_no_key(tmp_path):
    workspace = tmp_path / "repo"
    workspace.mkdir()
    env = app_environment(CODEWHALE_HOME=str(tmp_path / "home"))
    result = subprocess.run(
        [sys.executable, "-m", "codewhale", "exec", "--json", "Say hello to me."],
        cwd=workspace,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr
    assert "bundled model answers (offline 135M model" in result.stderr
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    done = [line for line in lines if line["type"] == "turn_complete"]
    assert done and done[-1]["status"] == "completed" and done[-1]["usage"]["input"] > 0
    assert not _servers_running_in(workspace)


def _servers_running_in(workspace: Path) -> list[int]:
    """Model servers whose working directory is `workspace` (they inherit exec's)."""
    return _model_servers(lambda proc, _: (proc / "cwd").resolve() == workspace.resolve())


def _model_servers(matches) -> list[int]:
    """Live model servers for which `matches(proc_dir, cmdline)` holds."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            cmdline = (proc / "cmdline").read_bytes()
            if b"codewhale.providers.local_runner" in cmdline and matches(proc, cmdline):
                found.append(int(proc.name))
        except (OSError, ValueError):
            continue
    return [pid for pid in found if not process_exited(pid)]


async def test_a_sub_agent_completes_on_the_offline_model(tmp_path):
    workspace = tmp_path / "repo"
    workspace.mkdir()
    (workspace / "notes.txt").write_text("The launch code is 4217.\n")
    session = open_runtime(workspace=workspace)
    try:
        assert session.loaded.offline_fallback and session.local_server is not None
        opened = session.manager.open({"prompt": "Say hello in one sentence.", "type": "general"})
        done = await session.manager.evaluate(
            {"agent_id": opened["agent_id"], "block": True, "timeout_ms": 480_000}
        )
        assert done["terminal"] and done["status"] == "completed", done
        assert done["usage"]["input"] > 0 and done["usage"]["output"] > 0
    finally:
        await session.close()
    assert not session.local_server.running


async def test_a_broken_model_file_is_a_clear_error(tmp_path):
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"not a model")
    server = make_server(tmp_path)
    server.model = broken
    with pytest.raises(LocalServerError) as caught:
        await server.ensure_started()
    assert "failed to start (exit code 1)" in caught.value.message
    assert str(server.log_file) in caught.value.message and not server.running


async def test_giving_up_while_the_model_loads_leaves_no_server_behind(tmp_path):
    server = make_server(tmp_path)
    server.alias = f"giving-up-{tmp_path.name}"  # tells this test's server from others
    starting = asyncio.ensure_future(server.ensure_started())
    deadline = time.monotonic() + 10
    while not _children_running(server.alias) and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    [child] = _children_running(server.alias)
    assert not starting.done()  # the model is still loading
    starting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await starting
    deadline = time.monotonic() + 5
    while not process_exited(child) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert process_exited(child) and not server.running
    try:
        assert (await server.ensure_started()).startswith("http://127.0.0.1:")
        assert server.starts == 1
    finally:
        await server.stop()


def _children_running(alias: str) -> list[int]:
    """Live model servers serving the model under `alias`."""
    return _model_servers(lambda _, cmdline: alias.encode() in cmdline)
