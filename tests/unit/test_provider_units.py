"""Pure pieces of the provider layer: retry timing and chunk assembly."""

from __future__ import annotations

import random
from email.utils import formatdate

import pytest

from codewhale.providers.errors import ProtocolError
from codewhale.providers.retry import MAX_BACKOFF_SECS, RetryBudget, parse_retry_after
from codewhale.providers.stream import StreamAssembler, completion_from_message


@pytest.mark.parametrize(
    ("header", "expected"),
    [("3", 3.0), ("0.5", 0.5), ("-2", 0.0), (None, None), ("", None), ("soon", None)],
)
def test_parse_retry_after_seconds(header, expected):
    assert parse_retry_after(header) == expected


def test_parse_retry_after_http_date():
    now = 1_700_000_000.0
    header = formatdate(now + 30, usegmt=True)
    assert parse_retry_after(header, now=now) == pytest.approx(30, abs=1)


def test_backoff_grows_with_jitter_and_stops_at_max_retries():
    budget = RetryBudget(max_retries=5, deadline_secs=1000, base_delay_secs=1, rng=random.Random(7))
    delays = [budget.next_delay(None) for _ in range(5)]
    for attempt, delay in enumerate(delays):
        ceiling = min(2**attempt, MAX_BACKOFF_SECS)
        assert ceiling / 2 <= delay <= ceiling
    assert budget.next_delay(None) is None


def test_backoff_never_waits_past_the_deadline():
    budget = RetryBudget(max_retries=10, deadline_secs=1.0)
    assert budget.next_delay(5.0) is None
    assert budget.next_delay(0.2) == 0.2


def test_tool_call_without_id_gets_a_stable_one():
    assembler = StreamAssembler()
    chunk = {
        "choices": [
            {
                "index": 0,
                "delta": {
                    "tool_calls": [{"index": 2, "function": {"name": "ls", "arguments": "{}"}}]
                },
            }
        ]
    }
    list(assembler.feed(chunk))
    (call,) = assembler.completion().tool_calls
    assert (call.id, call.name, call.index) == ("call_2", "ls", 2)


@pytest.mark.parametrize("chunk", [[1, 2], "text", {"choices": [{"delta": {"tool_calls": ["x"]}}]}])
def test_malformed_chunks_are_protocol_errors(chunk):
    with pytest.raises(ProtocolError):
        list(StreamAssembler().feed(chunk))


def test_an_error_object_inside_the_stream_is_reported():
    with pytest.raises(ProtocolError, match="overloaded"):
        list(StreamAssembler().feed({"error": {"message": "overloaded"}}))


@pytest.mark.parametrize("body", [{}, {"choices": []}, {"choices": [{"message": None}]}, []])
def test_non_streamed_reply_without_a_message_is_a_protocol_error(body):
    with pytest.raises(ProtocolError):
        completion_from_message(body)
