"""Long answers and long tool arguments arrive whole, and a cut answer keeps exactly what
streamed (bench/stream_exec.py times the same paths; no timing is asserted here)."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys

import pytest

from codewhale.engine import events
from codewhale.permissions import Mode
from codewhale.providers.client import ChatClient
from codewhale.runtime import open_runtime
from tests.support.llm_server import Fault, Reply, ToolCallSpec
from tests.support.settings import TEST_KEY, app_environment, loopback_settings

HELLO = [{"role": "user", "content": "hello"}]
LINE = "- line {n:06d}: the café's naïve résumé, with `code` and **bold**.\n"


def prose(size: int) -> str:
    """`size` characters of Markdown-ish lines, ending in a printable character."""
    text = "".join(LINE.format(n=n) for n in range(size // len(LINE.format(n=0)) + 1))
    return text[: size - 1] + "."


@pytest.fixture
async def runtime(llm, tmp_path, monkeypatch):
    """An in-process session against the loopback server; every event kept in `.seen`."""
    monkeypatch.setenv("CODEWHALE_BASE_URL", llm.base_url)
    monkeypatch.setenv("DEEPSEEK_API_KEY", TEST_KEY)
    workspace = tmp_path / "repo"
    workspace.mkdir()
    seen: list[events.Event] = []
    session = open_runtime(
        workspace=workspace, mode=Mode.YOLO, emit=lambda event: seen.append(event)
    )
    session.seen = seen
    yield session
    await session.close()


def deltas(seen: list[events.Event]) -> list[str]:
    return [event.text for event in seen if isinstance(event, events.AssistantDelta)]


@pytest.mark.slow
def test_a_5_mb_answer_through_exec_prints_exactly_the_text(llm, tmp_path):
    """5 MB in 64-character deltas: the engine once copied its whole text per delta
    (quadratic: this answer hung past 240 s); now the answer arrives whole, in order."""
    text = prose(5_000_000)
    llm.enqueue(Reply(text=text, chunk_size=64))
    workspace = tmp_path / "repo"
    workspace.mkdir()
    env = app_environment(
        CODEWHALE_HOME=str(tmp_path / "home"),
        CODEWHALE_BASE_URL=llm.base_url,
        DEEPSEEK_API_KEY=TEST_KEY,
    )
    done = subprocess.run(
        [sys.executable, "-m", "codewhale", "exec", "-C", str(workspace), "write it all"],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout == text + "\n"


async def answer_in_http_chunks(body: bytes, size: int) -> asyncio.Server:
    """A server answering one request with the event stream `body`, `size` bytes per HTTP
    chunk, each written on its own, as a provider's proxy may cut it."""

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = re.search(rb"(?i)content-length: *(\d+)", head)
        assert length is not None
        await reader.readexactly(int(length[1]))
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
            b"Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
        )
        for start in range(0, len(body), size):
            part = body[start : start + size]
            writer.write(b"%x\r\n%s\r\n" % (len(part), part))
            await writer.drain()
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        writer.close()

    return await asyncio.start_server(answer, "127.0.0.1", 0)


def tool_call_events(arguments: str, piece: int) -> bytes:
    """The events of one streamed `write_file` call whose arguments come `piece` at a time."""
    fragments = [arguments[i : i + piece] for i in range(0, len(arguments), piece)]
    first = {"index": 0, "id": "big", "function": {"name": "write_file", "arguments": ""}}
    calls = [first] + [{"index": 0, "function": {"arguments": part}} for part in fragments]
    chunks = [{"choices": [{"index": 0, "delta": {"tool_calls": [call]}}]} for call in calls]
    chunks.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})
    return b"".join(b"data: " + json.dumps(chunk).encode() + b"\n\n" for chunk in chunks)


@pytest.mark.parametrize("piece", [20_000_100, 4096], ids=["in one delta", "in 4 KB deltas"])
async def test_a_20_mb_tool_argument_arrives_whole(piece):
    """In one delta, the argument is one SSE line spanning hundreds of network reads."""
    arguments = '{"path": "big.txt", "content": "' + "x" * 20_000_000 + '"}'
    server = await answer_in_http_chunks(tool_call_events(arguments, piece), 65_536)
    async with server:
        port = server.sockets[0].getsockname()[1]
        settings = loopback_settings(f"http://127.0.0.1:{port}/v1", max_retries=0)
        async with ChatClient(settings) as client:
            completion = await client.complete(HELLO)
    [received] = completion.tool_calls
    assert (received.id, received.name) == ("big", "write_file")
    assert received.arguments == arguments


async def test_an_interrupted_answer_keeps_exactly_the_deltas_that_streamed(llm, runtime):
    llm.enqueue(Reply(text=[f"word{i} " for i in range(200)], chunk_delay=0.02))

    def cancel_at_the_fifth_delta(event: events.Event) -> None:
        runtime.seen.append(event)
        if isinstance(event, events.AssistantDelta) and len(deltas(runtime.seen)) == 5:
            runtime.engine.cancel()

    runtime.engine.emit = cancel_at_the_fifth_delta
    result = await runtime.engine.run_turn("talk")
    shown = "".join(deltas(runtime.seen))
    assert result.status == "interrupted" and shown.startswith("word0 word1 word2 word3 word4 ")
    assert result.final_text == shown
    assert runtime.engine.messages[-1] == {
        "role": "assistant",
        "content": f"{shown}\n[interrupted by the user]",
    }
    [closed] = [e for e in runtime.seen if isinstance(e, events.AssistantMessage)]
    assert closed.interrupted and closed.content == shown


async def test_a_cut_answer_is_closed_with_only_its_own_request_s_deltas(llm, runtime):
    """The step before it streamed text too: each request's partial answer starts empty."""
    llm.enqueue(
        Reply(text=["Looking ", "first."], tool_calls=[ToolCallSpec("list_dir", {})]),
        Reply(text=["Here ", "is ", "the ", "answer"], fault=Fault.cut(after_chunks=3)),
    )
    result = await runtime.engine.run_turn("look, then answer")
    assert result.status == "failed"
    first, cut = [e for e in runtime.seen if isinstance(e, events.AssistantMessage)]
    assert first.content == "Looking first." and not first.interrupted
    assert cut.interrupted and cut.finish_reason == "error"
    assert cut.content == "Here is the " == "".join(deltas(runtime.seen)[2:])
