"""The engine's own time per step at 10 and at 1,000 messages, against the loopback LLM.

A step's overhead runs from the moment the server has written the last byte of one
streamed answer to the moment it has read the whole next request: reading the end of
the stream, usage accounting, tool dispatch, message bookkeeping, session writes,
request encoding and sending. Both ends are taken by the server, in a process of its
own (in the engine's process its threads would hold the GIL the engine needs, and take
their time stamps late whenever the engine holds it). The answer streams its events
1 ms apart, as a model does: the engine reads each as it comes, and only the last ones
after the model has finished. Each size is a session continued from a file of that many
messages (the `--continue` path), then run for STEPS read_file steps, compaction checked
every step but its window set beyond reach; the history repeats the same kind of step
(about 525 bytes a message: 1,000 messages send 0.54 MB).

The yardstick is the bare I/O of a step, measured in the same run on the same terms
(issues 16 and 31): a round trip of the floor of any client (an asyncio socket, no HTTP
library at all: a yardstick that does not move with anyone's HTTP code), kept alive and
sending the client's headers and a body of the median size of the engine's requests at
that size (moving 0.5 MB over loopback is network time, not engine time), that reads
the step's SSE answer (the same events, the model's name aside) streamed without pauses
to its last byte. The body is padding the server does not parse, as the engine's body is
parsed outside its window.

Printed beside it, not a target: a bare step, the same window as the engine's with no
engine in it. The same client reads the answer as it streams 1 ms apart and at once
sends the next request; the server stamps both ends as it does the engine's. It holds
only what no client can avoid: waking on the last byte, the send, the server's read.
"""

from __future__ import annotations

import asyncio
import bisect
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from bench.targets import target
from codewhale import __version__
from codewhale.permissions import Mode
from codewhale.runtime import open_runtime
from codewhale.sessions.store import SessionStore
from codewhale.tools.base import ToolContext
from codewhale.tools.files import ReadFile
from tests.support import llm_server
from tests.support.llm_server import LoopbackLLM, Reply, ToolCallSpec

SIZES = (10, 1_000)
STEPS = 30
ROUNDS = 5
BARE_RUNS = 60
FILE_LINES = 20
KEY = "sk-bench-000000000000"
# The engine's own work in a step (the stream's end, a read_file call, bookkeeping, the
# session line, encoding) at most what the bare I/O of that step costs again.
TARGET = 2.0
# Seconds between an answer's events, as a model streams them.
CHUNK_DELAY = 0.001


# -- the server's process ---------------------------------------------------------------


def answer(body: Any) -> Reply:
    """STEPS read_file calls after the user's last message, then a last word; the same
    read_file call to every bare request (paced as a model streams, or at once)."""
    paced = body.get("bare", "paced") == "paced"
    step = Reply(
        tool_calls=[ToolCallSpec("read_file", {"path": "notes.txt"})],
        chunk_delay=CHUNK_DELAY if paced else 0.0,
    )
    if "bare" in body:
        return step
    messages = body["messages"]
    last_user = max(i for i, message in enumerate(messages) if message["role"] == "user")
    if sum(message["role"] == "tool" for message in messages[last_user:]) >= STEPS:
        return Reply(text="done")
    return step


def serve() -> None:
    """A LoopbackLLM answering with `answer`; prints its URL, then, for each line read,
    the time stamps since the last report as one JSON line."""
    answered: list[float] = []
    write_chunk = llm_server._Handler._write_chunk

    def stamped_write_chunk(handler: llm_server._Handler, data: bytes) -> None:
        write_chunk(handler, data)
        if not data:  # the final chunk: the answer's last byte is out
            answered.append(time.time())

    # A probe on the test server (which records arrivals, not answers), not on the code
    # measured.
    llm_server._Handler._write_chunk = stamped_write_chunk  # type: ignore[method-assign]
    with LoopbackLLM() as llm:
        llm.respond = answer
        print(llm.base_url, flush=True)
        reported = done = 0
        for _ in sys.stdin:
            requests = llm.requests[reported:]
            reported += len(requests)
            stamps = {
                "arrived": [request.ts for request in requests],
                "sizes": [len(request.raw_body) for request in requests],
                "answered": answered[done:],
            }
            done = len(answered)
            print(json.dumps(stamps), flush=True)


@contextmanager
def server_process() -> Iterator[tuple[str, Any]]:
    """The server in its own process: (base URL, a function returning its new stamps)."""
    server = subprocess.Popen(
        [sys.executable, "-m", "bench.engine_overhead", "serve"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert server.stdin is not None and server.stdout is not None
    pipe_in, pipe_out = server.stdin, server.stdout

    def stamps() -> dict[str, list[float]]:
        pipe_in.write("\n")
        pipe_in.flush()
        stamps: dict[str, list[float]] = json.loads(pipe_out.readline())
        return stamps

    try:
        yield pipe_out.readline().strip(), stamps
    finally:
        server.communicate(timeout=10)


# -- the engine's process -----------------------------------------------------------------


def percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(int(fraction * len(ordered)), len(ordered) - 1)]


def bare_request(base_url: str, body_size: int, pace: str) -> bytes:
    """A request with the engine's headers and a body of `body_size` bytes asking for the
    step's answer streamed `pace`d ("paced" as a model streams, or "fast")."""
    url = urlsplit(base_url)
    # The body's fields that shape the answer, as the engine's requests have them.
    as_the_engine_asks = {"stream": True, "stream_options": {"include_usage": True}}
    head = (
        f"POST {url.path}/chat/completions HTTP/1.1\r\n"
        f"Host: {url.netloc}\r\n"
        "Content-Type: application/json\r\n"
        "Accept: text/event-stream\r\n"
        f"User-Agent: codewhale/{__version__}\r\n"
        f"Authorization: Bearer {KEY}\r\n"
        f"X-Loopback-Json: {json.dumps(as_the_engine_asks | {'bare': pace})}\r\n"
        f"Content-Length: {body_size}\r\n\r\n"
    ).encode()
    # Padding the server leaves unparsed (parsing it is outside the engine's window too).
    return head + b"\xff" * body_size


def steps_ms(stamps: dict[str, list[float]], count: int) -> list[float]:
    """Per step, from the server's last byte of one answer to its read of the next request."""
    arrived, answered = stamps["arrived"], sorted(stamps["answered"])
    # One request per step and nothing else (a compaction's summary call, say, would pair
    # the wrong times).
    assert len(arrived) == count + 1, len(arrived)
    # Each request with the answer written last before it arrived: a stamp of an earlier
    # batch's last answer can come in with this one (the client reads the last byte before
    # the server's thread notes the time).
    return [
        (arrival - answered[bisect.bisect(answered, arrival) - 1]) * 1000 for arrival in arrived[1:]
    ]


async def bare_round_trips_ms(base_url: str, body_size: int) -> list[float]:
    """Round trips over a bare asyncio socket: `body_size` bytes out, the step's answer
    streamed at once, read to its last byte."""
    request = bare_request(base_url, body_size, "fast")
    url = urlsplit(base_url)
    reader, writer = await asyncio.open_connection(url.hostname, url.port)
    samples = []
    try:
        for run in range(BARE_RUNS + 1):
            started = time.perf_counter()
            writer.write(request)
            await writer.drain()
            status = await read_response(reader)
            assert status == 200, status
            if run:  # the first one warms the server's handler, as the engine's first does
                samples.append((time.perf_counter() - started) * 1000)
    finally:
        writer.close()
    return samples


async def bare_steps_ms(base_url: str, body_size: int, stamps: Any) -> list[float]:
    """Steps over a bare asyncio socket: the answer read as it streams to its last byte,
    then `body_size` bytes out at once."""
    request = bare_request(base_url, body_size, "paced")
    url = urlsplit(base_url)
    reader, writer = await asyncio.open_connection(url.hostname, url.port)
    stamps()
    try:
        for _ in range(BARE_RUNS + 1):
            writer.write(request)
            await writer.drain()
            status = await read_response(reader)
            assert status == 200, status
    finally:
        writer.close()
    return steps_ms(stamps(), BARE_RUNS)


async def read_response(reader: asyncio.StreamReader) -> int:
    """Read one HTTP/1.1 response to its last byte (Content-Length or chunked); its status."""
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    fields = {k.strip().lower(): v.strip() for k, _, v in (x.partition(":") for x in lines[1:])}
    if "content-length" in fields:
        await reader.readexactly(int(fields["content-length"]))
    else:  # chunked: size lines and chunks up to the empty last one
        while size := int((await reader.readuntil(b"\r\n")).strip(), 16):
            await reader.readexactly(size + 2)
        await reader.readuntil(b"\r\n")
    return int(lines[0].split()[1])


async def seed_session(workspace: Path, home: Path, size: int) -> None:
    """A session file of `size` messages: the system prompt, then read_file steps."""
    output = await ReadFile().run(
        {"path": "notes.txt"}, ToolContext(workspace=workspace, session_id="seed")
    )
    messages: list[dict[str, object]] = [
        {"role": "system", "content": "You are CodeWhale. " * 200},
        {"role": "user", "content": "read it many times"},
    ]
    while len(messages) < size:
        call_id = f"seed_{len(messages)}"
        arguments = '{"path": "notes.txt"}'
        function = {"name": "read_file", "arguments": arguments}
        messages.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": call_id, "type": "function", "function": function}],
            }
        )
        messages.append({"role": "tool", "tool_call_id": call_id, "content": output.output})
    _, writer = SessionStore(home / "data").create(workspace.resolve(), "m")
    writer.record_messages(messages[:size])
    writer.close()


async def engine_steps_ms(workspace: Path, stamps: Any) -> tuple[list[float], list[int], int]:
    """Per step, the overhead (ms); the request sizes (bytes); the messages at the end."""
    session = open_runtime(
        workspace=workspace,
        # Checked every step, as always, but never reached: the steps' cost at this size.
        overrides={"context": {"window": 10_000_000}},
        mode=Mode.YOLO,
        continue_latest=True,
        max_steps=STEPS + 5,
    )
    stamps()
    await session.submit("once more")
    size = len(session.messages)
    await session.close()
    seen = stamps()
    return steps_ms(seen, STEPS), [int(size) for size in seen["sizes"]], size


async def measure(base_url: str, stamps: Any) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        home = Path(scratch) / "home"
        os.environ.update(
            CODEWHALE_HOME=str(home), CODEWHALE_BASE_URL=base_url, DEEPSEEK_API_KEY=KEY
        )
        workspaces = {}
        body_sizes = {}
        for size in SIZES:
            workspace = workspaces[size] = Path(scratch) / f"ws{size}"
            workspace.mkdir()
            (workspace / "notes.txt").write_text(
                "".join(f"line {i}: some text of a source file\n" for i in range(FILE_LINES))
            )
            await seed_session(workspace, home, size)
            # Warm-up (imports, first connection), and the engine's request sizes.
            _, sizes, _ = await engine_steps_ms(workspace, stamps)
            body_sizes[size] = int(statistics.median(sizes))
        bare: dict[int, list[float]] = {size: [] for size in SIZES}
        bare_steps: dict[int, list[float]] = {size: [] for size in SIZES}
        steps: dict[int, list[float]] = {size: [] for size in SIZES}
        ends: dict[int, int] = {}
        # Interleaved rounds: a noisy neighbour slows both figures, not one.
        for _ in range(ROUNDS):
            for size in SIZES:
                bare[size] += await bare_round_trips_ms(base_url, body_sizes[size])
                bare_steps[size] += await bare_steps_ms(base_url, body_sizes[size], stamps)
                await seed_session(workspaces[size], home, size)
                samples, _, ends[size] = await engine_steps_ms(workspaces[size], stamps)
                steps[size] += samples
    for size in SIZES:
        round_trip = statistics.median(bare[size])
        floor = statistics.median(bare_steps[size])
        median, p95 = statistics.median(steps[size]), percentile(steps[size], 0.95)
        label = f"{size}->{ends[size]} messages"
        print(
            f"engine: bare round trip, {body_sizes[size] / 1000:5.0f} KB body, same SSE bytes"
            f"  median {round_trip:6.2f} ms"
        )
        print(f"engine: bare step (no engine in it)                median {floor:6.2f} ms")
        print(
            f"engine: overhead per step {label:<19} median {median:6.2f} ms  p95 {p95:6.2f} ms"
            f"  ({median / round_trip:.2f}x a bare round trip, {median / floor:.2f}x a bare step)"
        )
        target(f"engine overhead per step at {size:,} messages", median / round_trip, "≤", TARGET)


def main() -> None:
    if sys.argv[1:] == ["serve"]:
        serve()
        return
    with server_process() as (base_url, stamps):
        asyncio.run(measure(base_url, stamps))


if __name__ == "__main__":
    main()
