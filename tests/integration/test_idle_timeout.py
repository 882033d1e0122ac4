"""The idle timeout, exactly as specified: it bounds the wait for the first byte and the
gap between chunks, never the length of an answer that keeps streaming.

Real streams from the loopback server, paced by the server itself; the limit is a
sub-agent's `api_timeout_secs` (the engine's request_timeout_secs) or the client's own.
"""

from __future__ import annotations

import pytest

from codewhale.providers import errors
from codewhale.providers.client import ChatClient
from codewhale.providers.retry import Retrying
from codewhale.providers.types import StreamFinished, TextDelta
from codewhale.runtime import events
from tests.support.llm_server import Fault, Reply
from tests.support.settings import loopback_settings
from tests.support.subagents import REPORT, for_task, wait_done

HELLO = [{"role": "user", "content": "hello"}]
# The figures: one delta every 0.8 s under a 2 s limit.
GAP_SECS = 0.8
IDLE_SECS = 2


def texts(seen) -> list[str]:
    return [event.text for event in seen if isinstance(event, events.AssistantDelta)]


async def test_events_without_text_keep_a_paced_stream_alive(llm, make_session):
    """The finish_reason, usage and [DONE] events come 0.8 s apart like the deltas: three
    gaps in a row with no text (2.4 s) once cut every such answer at its end."""
    session = make_session()
    session.engine.request_timeout_secs = IDLE_SECS
    pieces = ["one ", "two ", "three"]
    llm.enqueue(Reply(text=pieces, chunk_delay=GAP_SECS))
    result = await session.engine.run_turn("answer slowly")
    await session.close()
    assert result.status == "completed", result.error
    assert result.final_text == "".join(pieces)
    assert texts(session.seen) == pieces


async def test_one_gap_past_the_limit_ends_the_request_at_that_gap(llm, make_session):
    session = make_session()
    session.engine.request_timeout_secs = IDLE_SECS
    pieces = [f"w{i} " for i in range(8)]
    # Four deltas 0.8 s apart, then 2.5 s of silence (the server goes on after it, too late).
    pause = Fault.pause(after_chunks=4, seconds=2.5)
    llm.enqueue(Reply(text=pieces, chunk_delay=GAP_SECS, fault=pause))
    llm.enqueue(Reply(text="must not be used"))
    result = await session.engine.run_turn("answer with a pause")
    await session.close()
    assert result.status == "timed_out"
    assert result.error == "API call timed out after 2000ms"
    assert texts(session.seen) == pieces[:4]
    closed = [e for e in session.seen if isinstance(e, events.AssistantMessage)]
    assert [(e.content, e.interrupted) for e in closed] == [("".join(pieces[:4]), True)]
    assert len(llm.requests) == 1  # the caller's own limit is not retried


async def test_the_callers_limit_is_not_retried_and_names_the_idle_timeout(llm):
    llm.enqueue(Reply(text=["a ", "b ", "c"], fault=Fault.pause(after_chunks=0, seconds=2.5)))
    llm.enqueue(Reply(text="must not be used"))
    seen = []
    settings = loopback_settings(llm.base_url)
    async with ChatClient(settings, retry_base_delay_secs=0.01) as client:
        with pytest.raises(errors.RequestTimeoutError) as caught:
            async for event in client.stream(HELLO, idle_timeout_secs=IDLE_SECS):
                seen.append(event)
    assert seen == []
    assert "No data from DeepSeek for 2 s (idle timeout)" in str(caught.value)
    assert len(llm.requests) == 1


async def test_the_shorter_stream_idle_timeout_still_applies_and_is_retried(llm):
    llm.enqueue(Reply(text="lost", fault=Fault.pause(after_chunks=0, seconds=5)))
    llm.enqueue(Reply(text="second try"))
    settings = loopback_settings(llm.base_url, stream_idle_timeout_secs=0.5)
    async with ChatClient(settings, retry_base_delay_secs=0.01) as client:
        seen = [event async for event in client.stream(HELLO, idle_timeout_secs=60)]
    assert [type(e) for e in seen] == [Retrying, TextDelta, StreamFinished]
    assert seen[0].reason == "idle timeout"


@pytest.mark.slow
async def test_a_child_streaming_for_two_minutes_with_08s_gaps_under_a_2s_limit_completes(
    llm, make_session
):
    session = make_session(config=f"[subagents]\napi_timeout_secs = {IDLE_SECS}\n")
    assert session.manager.builder.api_timeout == IDLE_SECS
    # 150 events 0.8 s apart, then finish_reason, usage and [DONE] as far apart: 122 s.
    pieces = ["word "] * 149 + [REPORT]
    llm.route(for_task("long answer"), Reply(text=pieces, chunk_delay=GAP_SECS))
    opened = session.manager.open({"prompt": "long answer"})
    done = await wait_done(session, opened["agent_id"], timeout_ms=300_000)
    await session.close()
    assert done["status"] == "completed", done.get("error")
    record = next(r for r in session.manager.records() if r["agent_id"] == opened["agent_id"])
    # The server's own pacing: the answer really streamed for two minutes.
    assert record["finished_at_ms"] - record["started_at_ms"] >= 120_000
