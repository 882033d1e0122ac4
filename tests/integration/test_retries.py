"""One retry layer (the client), counted in real requests at loopback servers.

Each test drives the engine the way a session does, so a second layer of retries
anywhere between the engine and the wire would show up as extra requests.
"""

from __future__ import annotations

import asyncio
import json
import re
import socket
import struct
import subprocess
import sys
import threading
import time
from email.utils import formatdate

import pytest

from codewhale.engine import events
from codewhale.permissions import Mode
from codewhale.runtime import open_runtime
from tests.support.llm_server import Fault, Reply
from tests.support.settings import TEST_KEY, app_environment

ANSWER = ["one ", "two ", "three"]


@pytest.fixture
async def make_session(llm, tmp_path, monkeypatch):
    """A runtime aimed at `base_url` (default: the loopback LLM) with these [network] values."""
    monkeypatch.setenv("DEEPSEEK_API_KEY", TEST_KEY)
    workspace = tmp_path / "repo"
    workspace.mkdir()
    opened = []

    def make(base_url: str | None = None, **network):
        network.setdefault("retry_deadline_secs", 30)
        seen: list[events.Event] = []
        session = open_runtime(
            workspace=workspace,
            mode=Mode.YOLO,
            emit=seen.append,
            retry_base_delay_secs=0.01,
            overrides={"base_url": base_url or llm.base_url, "network": network},
        )
        session.seen = seen
        opened.append(session)
        return session

    yield make
    for session in opened:
        await session.close()


def of_type(seen, kind):
    return [event for event in seen if isinstance(event, kind)]


def deltas(seen) -> list[str]:
    return [event.text for event in of_type(seen, events.AssistantDelta)]


def always_503(body):
    return Reply(fault=Fault.status(503, message="overloaded"))


# -- 1. max_retries is obeyed exactly, and the message counts what was sent ---------------


async def test_max_retries_zero_sends_one_request(llm, make_session):
    llm.respond = always_503
    session = make_session(max_retries=0)
    result = await session.engine.run_turn("hi")
    assert result.status == "failed"
    assert len(llm.requests) == 1
    assert "gave up after 1 attempt)" in result.error
    assert of_type(session.seen, events.Retrying) == []


@pytest.mark.parametrize("max_retries", [1, 3])
async def test_max_retries_n_sends_n_plus_one_requests_and_says_so(llm, make_session, max_retries):
    llm.respond = always_503
    session = make_session(max_retries=max_retries)
    result = await session.engine.run_turn("hi")
    sent = len(llm.requests)
    assert sent == max_retries + 1
    assert f"gave up after {sent} attempts)" in result.error
    assert "HTTP 503" in result.error and "overloaded" in result.error
    notices = of_type(session.seen, events.Retrying)
    assert [(n.attempt, n.max_attempts) for n in notices] == [
        (attempt, sent) for attempt in range(2, sent + 1)
    ]
    assert {n.reason for n in notices} == {"HTTP 503"}


# -- 2. a stream cut mid-way: never a delta twice ------------------------------------------


async def test_a_cut_after_deltas_fails_the_request_without_repeating_them(llm, make_session):
    llm.enqueue(Reply(text=ANSWER, fault=Fault.cut(after_chunks=2)), Reply(text=ANSWER))
    session = make_session(max_retries=4)
    result = await session.engine.run_turn("count")
    assert result.status == "failed"
    assert len(llm.requests) == 1
    assert deltas(session.seen) == ["one ", "two "]
    assert "broke mid-response" in result.error
    assert "not retried: part of the response was already delivered" in result.error
    # What was shown is closed as cut short, so a front end does not extend it later.
    (closed,) = of_type(session.seen, events.AssistantMessage)
    assert (closed.content, closed.interrupted, closed.finish_reason) == ("one two ", True, "error")
    # The user asks again; the answer arrives whole, in one request.
    assert (await session.engine.run_turn("again")).final_text == "one two three"
    assert len(llm.requests) == 2
    assert "".join(deltas(session.seen)) == "one two one two three"


async def test_a_cut_before_any_delta_is_retried_and_each_delta_arrives_once(llm, make_session):
    llm.enqueue(Reply(text=ANSWER, fault=Fault.cut(after_chunks=0)), Reply(text=ANSWER))
    session = make_session(max_retries=4)
    result = await session.engine.run_turn("count")
    assert result.final_text == "one two three"
    assert len(llm.requests) == 2
    assert deltas(session.seen) == ANSWER
    (notice,) = of_type(session.seen, events.Retrying)
    assert (notice.attempt, notice.reason) == (2, "stream cut")


# -- 3. Retry-After ------------------------------------------------------------------------


async def test_retry_after_is_waited_for_and_announced(llm, make_session):
    llm.enqueue(Reply(fault=Fault.status(429, retry_after=0.3)), Reply(text="ok"))
    session = make_session(max_retries=2)
    started = time.monotonic()
    result = await session.engine.run_turn("hi")
    assert result.final_text == "ok"
    assert time.monotonic() - started >= 0.3
    assert len(llm.requests) == 2
    (notice,) = of_type(session.seen, events.Retrying)
    assert (notice.delay, notice.reason) == (0.3, "HTTP 429, Retry-After")
    assert notice.to_dict()["type"] == "retrying"


async def test_an_http_date_retry_after_is_honoured(llm, make_session):
    # Whole seconds on the wire: "now + 2 s" is 1 to 2 s away by the time it is read.
    llm.enqueue(
        Reply(fault=Fault.status(503, retry_after=formatdate(time.time() + 2, usegmt=True)))
    )
    llm.enqueue(Reply(text="ok"))
    session = make_session(max_retries=2)
    assert (await session.engine.run_turn("hi")).final_text == "ok"
    (notice,) = of_type(session.seen, events.Retrying)
    assert 0.5 < notice.delay <= 2.0
    assert len(llm.requests) == 2


@pytest.mark.parametrize(
    ("retry_after", "asked", "limit"),
    [
        (lambda: 3600, "3600", "more than the 60 s CodeWhale waits"),
        # Dated when the test runs, not when it is collected (minutes earlier under xdist).
        (lambda: formatdate(time.time() + 3600, usegmt=True), "3[56][0-9][0-9]", "more than"),
        (lambda: 45, "45", r"past the retry deadline \(retry_deadline_secs = 30\)"),
    ],
    ids=["seconds", "http-date", "past-deadline"],
)
async def test_a_retry_after_too_long_gives_up_at_once_and_says_why(
    llm, make_session, retry_after, asked, limit
):
    header = retry_after()
    llm.respond = lambda body: Reply(fault=Fault.status(429, retry_after=header))
    session = make_session(max_retries=4, retry_deadline_secs=30)
    # A ceiling below the deadline and every asked wait: a run that waited would miss it.
    async with asyncio.timeout(20):
        result = await session.engine.run_turn("hi")
    assert len(llm.requests) == 1
    assert re.search(
        rf"the server asked to wait {asked} s before trying again, {limit}", result.error
    )
    assert "gave up after 1 attempt)" in result.error
    assert of_type(session.seen, events.Retrying) == []


# -- 4. connection failures go through the same layer, with the same count -----------------


class ResettingServer:
    """Accepts a connection, reads the request, and resets it before answering a byte."""

    def __init__(self) -> None:
        self.requests = 0
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.1)
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._listener.getsockname()[1]}/v1"

    def _serve(self) -> None:
        while not self._stopping.is_set():
            try:
                connection, _ = self._listener.accept()
            except TimeoutError:
                continue
            with connection:
                if connection.recv(65536):
                    self.requests += 1
                # Linger 0: close() sends RST, the "connection reset by peer" of a dead proxy.
                connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))

    def __enter__(self) -> ResettingServer:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stopping.set()
        self._thread.join(timeout=2)
        self._listener.close()


async def test_a_reset_before_any_byte_is_retried_max_retries_times(make_session):
    with ResettingServer() as server:
        url = server.base_url
        session = make_session(base_url=url, max_retries=2)
        result = await session.engine.run_turn("hi")
    assert result.status == "failed"
    assert server.requests == 3
    # A self-hosted endpoint is named by its URL, not by the preset's provider.
    assert f"Could not reach {url}" in result.error
    assert "gave up after 3 attempts)" in result.error
    notices = of_type(session.seen, events.Retrying)
    assert [(n.attempt, n.reason) for n in notices] == [
        (2, "connection failed"),
        (3, "connection failed"),
    ]


async def test_a_refused_connection_is_retried_by_the_same_count(make_session):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    session = make_session(base_url=f"http://127.0.0.1:{port}/v1", max_retries=1)
    result = await session.engine.run_turn("hi")
    assert "gave up after 2 attempts)" in result.error
    assert [n.attempt for n in of_type(session.seen, events.Retrying)] == [2]


# -- what `codewhale exec --json` prints ------------------------------------------------------


def run_exec_json(llm, tmp_path, prompt: str) -> list[dict]:
    env = app_environment(
        CODEWHALE_HOME=str(tmp_path / "home"),
        CODEWHALE_BASE_URL=llm.base_url,
        DEEPSEEK_API_KEY=TEST_KEY,
    )
    workspace = tmp_path / "repo"
    workspace.mkdir(exist_ok=True)
    result = subprocess.run(
        [sys.executable, "-m", "codewhale", "exec", "--json", "-C", str(workspace), prompt],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    return [json.loads(line) for line in result.stdout.splitlines()]


def test_exec_json_announces_a_retry_and_prints_each_delta_once(llm, tmp_path):
    llm.enqueue(Reply(fault=Fault.status(503)), Reply(text=ANSWER))
    lines = run_exec_json(llm, tmp_path, "count")
    kinds = [line["type"] for line in lines]
    retrying = lines[kinds.index("retrying")]
    assert (retrying["attempt"], retrying["reason"]) == (2, "HTTP 503")
    assert [line["text"] for line in lines if line["type"] == "assistant_delta"] == ANSWER
    assert len(llm.requests) == 2


def test_exec_json_never_repeats_deltas_after_a_reset_mid_stream(llm, tmp_path):
    llm.enqueue(Reply(text=ANSWER, fault=Fault.cut(after_chunks=2)), Reply(text=ANSWER))
    lines = run_exec_json(llm, tmp_path, "count")
    assert [line["text"] for line in lines if line["type"] == "assistant_delta"] == ["one ", "two "]
    assert lines[-2]["type"] == "turn_complete" and lines[-2]["status"] == "failed"
    assert lines[-1]["type"] == "result" and lines[-1]["status"] == "error"
    assert len(llm.requests) == 1
