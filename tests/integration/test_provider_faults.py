"""The provider client against the real loopback server: every failure mode."""

from __future__ import annotations

import asyncio
import socket
import time

import pytest

from codewhale.providers import errors
from codewhale.providers.client import ChatClient
from codewhale.providers.retry import Retrying
from codewhale.providers.types import StreamFinished, TextDelta
from tests.support.llm_server import RESET_STAGES, Fault, Reply, ToolCallSpec
from tests.support.settings import TEST_KEY, loopback_settings

HELLO = [{"role": "user", "content": "hello"}]


def make_client(llm_or_url, **overrides) -> ChatClient:
    url = llm_or_url if isinstance(llm_or_url, str) else llm_or_url.base_url
    return ChatClient(loopback_settings(url, **overrides), retry_base_delay_secs=0.01)


@pytest.mark.parametrize("status", [429, 500, 502, 503, 504])
async def test_retryable_status_is_retried_until_it_succeeds(llm, status):
    llm.enqueue(Reply(fault=Fault.status(status)), Reply(fault=Fault.status(status)))
    llm.enqueue(Reply(text="recovered"))
    async with make_client(llm) as client:
        completion = await client.complete(HELLO)
    assert completion.content == "recovered"
    assert len(llm.requests) == 3


async def test_each_retry_is_announced_in_the_stream_before_it_is_sent(llm):
    llm.enqueue(Reply(fault=Fault.status(429, retry_after=0)), Reply(fault=Fault.status(503)))
    llm.enqueue(Reply(text="third time"))
    async with make_client(llm, max_retries=2) as client:
        seen = [event async for event in client.stream(HELLO)]
    notices = [(e.attempt, e.max_attempts, e.reason) for e in seen if isinstance(e, Retrying)]
    assert notices == [(2, 3, "HTTP 429, Retry-After"), (3, 3, "HTTP 503")]
    assert [type(e) for e in seen] == [Retrying, Retrying, TextDelta, StreamFinished]
    assert len(llm.requests) == 3


async def test_unstreamed_tool_requests_retry_in_the_same_layer(llm):
    llm.enqueue(Reply(fault=Fault.status(502)), Reply(fault=Fault.status(502)))
    llm.enqueue(Reply(tool_calls=[ToolCallSpec("read_file", {"path": "a"})]))
    local = {"provider": "local", "api_key": None}
    tool = {"type": "function", "function": {"name": "read_file", "parameters": {}}}
    async with make_client(llm, max_retries=2, **local) as client:
        seen = [event async for event in client.stream(HELLO, tools=[tool])]
        assert [type(e) for e in seen] == [Retrying, Retrying, StreamFinished]
        llm.respond = lambda request: Reply(fault=Fault.status(502))
        with pytest.raises(errors.ServerError) as caught:
            await client.request(HELLO, tools=[tool])
    assert len(llm.requests) == 3 + 3
    assert "gave up after 3 attempts" in str(caught.value)


async def test_a_stream_cut_before_any_delta_is_retried(llm):
    llm.enqueue(Reply(text="lost", fault=Fault.cut(after_chunks=0)), Reply(text="second try"))
    async with make_client(llm) as client:
        assert (await client.complete(HELLO)).content == "second try"
    assert len(llm.requests) == 2


async def test_retry_after_is_honoured(llm):
    llm.enqueue(Reply(fault=Fault.status(429, retry_after=0.4)), Reply(text="ok"))
    async with make_client(llm) as client:
        started = time.monotonic()
        await client.complete(HELLO)
        assert time.monotonic() - started >= 0.4


async def test_retry_after_beyond_the_deadline_gives_up_at_once(llm):
    llm.enqueue(Reply(fault=Fault.status(429, retry_after=50)), Reply(text="never"))
    # A ceiling below the deadline: waiting for it (or the Retry-After) would miss it.
    async with make_client(llm, retry_deadline_secs=30.0) as client, asyncio.timeout(20):
        with pytest.raises(errors.RateLimitError) as caught:
            await client.complete(HELLO)
    assert "HTTP 429" in str(caught.value)
    assert "gave up after 1 attempt" in str(caught.value)


async def test_retries_stop_after_max_retries(llm):
    llm.respond = lambda request: Reply(fault=Fault.status(503, message="overloaded"))
    async with make_client(llm, max_retries=2) as client:
        with pytest.raises(errors.ServerError) as caught:
            await client.complete(HELLO)
    assert len(llm.requests) == 3
    assert "overloaded" in str(caught.value)
    assert "gave up after 3 attempts" in str(caught.value)


NON_RETRYABLE = [
    (400, errors.BadRequestError, "rejected the request"),
    (401, errors.AuthenticationError, "rejected the API key"),
    (402, errors.InsufficientBalanceError, "insufficient balance"),
    (403, errors.PermissionDeniedError, "denied access"),
    (404, errors.NotFoundError, "Check base_url"),
    (422, errors.UnprocessableError, "could not process"),
]


@pytest.mark.parametrize(("status", "error_type", "phrase"), NON_RETRYABLE)
async def test_non_retryable_status_is_a_typed_error_sent_once(llm, status, error_type, phrase):
    llm.enqueue(Reply(fault=Fault.status(status, message=f"server says {status}")))
    llm.enqueue(Reply(text="must not be used"))
    async with make_client(llm) as client:
        with pytest.raises(error_type) as caught:
            await client.complete(HELLO)
    assert len(llm.requests) == 1
    assert caught.value.status == status
    assert phrase in str(caught.value)
    assert TEST_KEY not in str(caught.value)


async def test_401_says_where_the_key_came_from_and_never_echoes_it(llm):
    llm.enqueue(Reply(fault=Fault.status(401, message=f"Authentication failed for {TEST_KEY}")))
    async with make_client(llm) as client:
        with pytest.raises(errors.AuthenticationError) as caught:
            await client.complete(HELLO)
    message = str(caught.value)
    assert "env DEEPSEEK_API_KEY" in message
    assert TEST_KEY not in message


async def test_a_stream_cut_after_deltas_is_an_error_not_a_retry(llm):
    llm.enqueue(Reply(text=["one ", "two ", "three"], fault=Fault.cut(after_chunks=2)))
    llm.enqueue(Reply(text="must not be used"))
    seen = []
    async with make_client(llm) as client:
        with pytest.raises(errors.StreamInterruptedError) as caught:
            async for event in client.stream(HELLO):
                seen.append(event)
    assert [e.text for e in seen if isinstance(e, TextDelta)] == ["one ", "two "]
    assert len(llm.requests) == 1
    assert "not retried: part of the response was already delivered" in str(caught.value)


async def test_a_stream_without_done_or_finish_reason_is_an_error(llm):
    llm.enqueue(Reply(text=["partial ", "answer"], fault=Fault.no_done()))
    async with make_client(llm) as client:
        with pytest.raises(errors.StreamInterruptedError) as caught:
            await client.complete(HELLO)
    assert "no finish_reason and no [DONE]" in str(caught.value)


async def test_an_empty_body_is_an_error_never_an_empty_answer(llm):
    llm.enqueue(Reply(fault=Fault.empty_body()), Reply(text="must not be used"))
    async with make_client(llm) as client:
        with pytest.raises(errors.EmptyResponseError) as caught:
            await client.complete(HELLO)
    assert "empty body" in str(caught.value)
    assert "context window (n_ctx)" in str(caught.value)  # what usually causes it
    assert len(llm.requests) == 1


async def test_malformed_json_in_the_stream_is_a_protocol_error(llm):
    llm.enqueue(Reply(text=["a", "b", "c"], fault=Fault.malformed_json(after_chunks=1)))
    async with make_client(llm) as client:
        with pytest.raises(errors.ProtocolError) as caught:
            await client.complete(HELLO)
    assert "malformed JSON" in str(caught.value)


async def test_idle_timeout_fires_even_while_keepalive_comments_arrive(llm):
    # The comments go on far longer than the test waits: only the idle timeout ends it.
    llm.enqueue(Reply(fault=Fault.keepalive_only(interval=0.05, duration=300.0)))
    async with make_client(llm, stream_idle_timeout_secs=0.5, max_retries=0) as client:
        started = time.monotonic()
        with pytest.raises(errors.IdleTimeoutError) as caught:
            await client.complete(HELLO)
    assert time.monotonic() - started >= 0.5
    assert "idle timeout" in str(caught.value)


async def test_a_stalled_stream_times_out(llm):
    llm.enqueue(Reply(fault=Fault.stall(seconds=10)))
    async with make_client(llm, stream_idle_timeout_secs=0.3, max_retries=0) as client:
        with pytest.raises(errors.IdleTimeoutError):
            await client.complete(HELLO)


async def test_an_idle_timeout_before_any_delta_is_retried(llm):
    llm.enqueue(Reply(fault=Fault.stall(seconds=10)), Reply(text="after the stall"))
    async with make_client(llm, stream_idle_timeout_secs=0.3) as client:
        assert (await client.complete(HELLO)).content == "after the stall"


# A reset before the head is a failed connect; after it, a stream cut before any byte.
RESET_REASONS = {
    "before the head": "connection failed",
    "after a chunked head": "stream cut",
    "after an unframed head": "stream cut",
}


@pytest.mark.parametrize("stage", RESET_STAGES)
async def test_a_reset_before_the_first_byte_is_retried(llm, stage):
    llm.enqueue(Reply(fault=Fault.reset(stage)), Reply(text="served"))
    async with make_client(llm) as client:
        seen = [event async for event in client.stream(HELLO)]
    notices = [event for event in seen if isinstance(event, Retrying)]
    assert [notice.reason for notice in notices] == [RESET_REASONS[stage]]
    assert [e.text for e in seen if isinstance(e, TextDelta)] == ["served"]
    assert len(llm.requests) == 2


async def test_a_reset_body_read_to_the_end_of_the_connection_is_not_an_empty_answer(llm):
    llm.enqueue(Reply(fault=Fault.reset("after an unframed head")))
    async with make_client(llm, max_retries=0) as client:
        with pytest.raises(errors.StreamInterruptedError) as caught:
            await client.complete(HELLO)
    message = str(caught.value)
    assert "broke mid-response" in message and "Connection reset by peer" in message
    assert "empty body" not in message


async def test_a_stall_before_the_response_headers_says_no_headers_came_not_connecting(llm):
    llm.enqueue(Reply(text="too late", request_delay=30))
    async with make_client(llm, stream_idle_timeout_secs=0.5, max_retries=0) as client:
        with pytest.raises(errors.IdleTimeoutError) as caught:
            await client.complete(HELLO)
    message = str(caught.value)
    assert "accepted the connection but sent no response headers within 0.5 s" in message
    assert "connecting" not in message
    assert len(llm.requests) == 1


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


async def test_connection_refused_is_retried_then_reported_clearly():
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    async with make_client(url, max_retries=2) as client:
        with pytest.raises(errors.ProviderConnectionError) as caught:
            await client.complete(HELLO)
    message = str(caught.value)
    assert "Could not reach DeepSeek" in message
    assert "gave up after 3 attempts" in message


async def test_missing_key_fails_before_any_request(llm):
    llm.enqueue(Reply(text="must not be used"))
    async with make_client(llm, api_key=None) as client:
        with pytest.raises(errors.MissingApiKeyError) as caught:
            await client.complete(HELLO)
    assert "DEEPSEEK_API_KEY" in str(caught.value)
    assert llm.requests == []


async def test_keyless_local_providers_send_no_authorization_header(llm):
    llm.enqueue(Reply(text="hi"))
    async with make_client(llm, provider="ollama", label="Ollama", api_key=None) as client:
        await client.complete(HELLO)
    assert "authorization" not in llm.requests[-1].headers


@pytest.mark.parametrize(
    ("url", "allowed"),
    [
        ("http://127.0.0.1:9/v1", True),
        ("http://localhost:9/v1", True),
        ("http://[::1]:9/v1", True),
        ("https://api.example.com/v1", True),
        ("http://api.example.com/v1", False),
        ("http://10.0.0.5:8000/v1", False),
        ("ftp://example.com", False),
    ],
)
def test_plain_http_is_refused_off_this_machine(url, allowed):
    settings = loopback_settings(url)
    if allowed:
        ChatClient(settings)
    else:
        with pytest.raises(errors.InsecureEndpointError):
            ChatClient(settings)


def test_allow_insecure_http_opts_in_to_remote_plain_http():
    ChatClient(loopback_settings("http://api.example.com/v1", allow_insecure_http=True))
