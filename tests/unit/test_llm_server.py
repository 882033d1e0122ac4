"""The loopback LLM itself: it must speak the wire format exactly as scripted."""

from __future__ import annotations

import asyncio
import contextlib
import json

import httpx
import pytest

from tests.support.llm_server import Fault, LoopbackLLM, Reply, ToolCallSpec

STREAM = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
# Longer than any wait a test makes on a held request: reaching it would be the bug.
STALL_SECS = 300


def data_lines(text: str) -> list:
    payloads = [line[6:] for line in text.splitlines() if line.startswith("data: ")]
    return [p if p == "[DONE]" else json.loads(p) for p in payloads]


def post(llm, body) -> httpx.Response:
    return httpx.post(f"{llm.base_url}/chat/completions", json=body, timeout=5)


def test_stream_sends_role_first_then_chunks_finish_and_done(llm):
    llm.enqueue(Reply(text=["a", "b"]))
    response = post(llm, STREAM)
    assert response.headers["content-type"] == "text/event-stream"
    lines = data_lines(response.text)
    assert lines[0]["choices"][0]["delta"] == {"role": "assistant", "content": "a"}
    assert lines[1]["choices"][0]["delta"] == {"content": "b"}
    assert lines[2]["choices"][0]["finish_reason"] == "stop"
    assert lines[-1] == "[DONE]"
    assert not any("usage" in line for line in lines[:-1])


def test_usage_chunk_only_when_requested(llm):
    llm.enqueue(Reply(text="x"))
    lines = data_lines(post(llm, {**STREAM, "stream_options": {"include_usage": True}}).text)
    usage_chunk = lines[-2]
    assert usage_chunk["choices"] == []
    assert usage_chunk["usage"]["prompt_tokens"] > 0


def test_interleaved_tool_calls_alternate_by_index(llm):
    calls = [
        ToolCallSpec("a", "{}", id="c1", fragments=["{", "}"]),
        ToolCallSpec("b", "[]", id="c2", fragments=["[", "]"]),
    ]
    llm.enqueue(Reply(tool_calls=calls, interleave=True))
    lines = data_lines(post(llm, STREAM).text)
    fragments = [line["choices"][0]["delta"]["tool_calls"][0] for line in lines[:4]]
    assert [f["index"] for f in fragments] == [0, 1, 0, 1]
    assert fragments[0]["id"] == "c1" and fragments[0]["function"]["name"] == "a"
    assert "id" not in fragments[2]
    assert lines[4]["choices"][0]["finish_reason"] == "tool_calls"


def test_non_streamed_reply_is_one_json_completion(llm):
    llm.enqueue(Reply(text="whole", tool_calls=[ToolCallSpec("t", {"k": 1})]))
    body = post(llm, {**STREAM, "stream": False}).json()
    message = body["choices"][0]["message"]
    assert message["content"] == "whole"
    assert json.loads(message["tool_calls"][0]["function"]["arguments"]) == {"k": 1}
    assert body["usage"]["total_tokens"] > 0


def test_status_fault_with_retry_after(llm):
    llm.enqueue(Reply(fault=Fault.status(429, message="slow down", retry_after=2)))
    response = post(llm, STREAM)
    assert response.status_code == 429
    assert response.headers["retry-after"] == "2"
    assert response.json()["error"]["message"] == "slow down"


def test_cut_fault_breaks_the_chunked_body(llm):
    llm.enqueue(Reply(text=["a", "b", "c"], fault=Fault.cut(after_chunks=1)))
    with pytest.raises(httpx.RemoteProtocolError):
        post(llm, STREAM)


def test_no_done_and_malformed_and_empty_faults(llm):
    llm.enqueue(Reply(text="t", fault=Fault.no_done()))
    lines = data_lines(post(llm, STREAM).text)
    assert "[DONE]" not in lines and all(c["choices"][0]["finish_reason"] is None for c in lines)
    llm.enqueue(Reply(text=["a", "b"], fault=Fault.malformed_json(after_chunks=1)))
    assert "data: {not json" in post(llm, STREAM).text
    llm.enqueue(Reply(fault=Fault.empty_body()))
    response = post(llm, STREAM)
    assert response.status_code == 200 and response.content == b""


def test_keepalive_only_sends_comments_and_no_data(llm):
    llm.enqueue(Reply(fault=Fault.keepalive_only(interval=0.02, duration=0.2)))
    text = post(llm, STREAM).text
    assert text.count(": keep-alive") >= 3
    assert "data:" not in text


def test_stop_ends_a_stall_promptly():
    server = LoopbackLLM().start()
    server.enqueue(Reply(fault=Fault.stall(seconds=STALL_SECS)))

    async def stalled_request():
        async with httpx.AsyncClient(timeout=STALL_SECS) as client:
            with contextlib.suppress(httpx.HTTPError):
                await client.post(f"{server.base_url}/chat/completions", json=STREAM)

    async def scenario():
        task = asyncio.create_task(stalled_request())
        while not server.requests:  # the request has reached its stall
            await asyncio.sleep(0.01)
        # Ceilings far below the stall: a stop that waited for it would miss them.
        await asyncio.wait_for(asyncio.to_thread(server.stop), STALL_SECS / 10)
        await asyncio.wait_for(task, STALL_SECS / 10)

    asyncio.run(asyncio.wait_for(scenario(), STALL_SECS / 2))


async def test_routes_serve_concurrent_conversations(llm):
    llm.route(lambda body: body["messages"][-1]["content"] == "left", Reply(text="L"))
    llm.route(lambda body: body["messages"][-1]["content"] == "right", Reply(text="R"))
    async with httpx.AsyncClient(timeout=5) as client:

        async def ask(word: str) -> str:
            body = {**STREAM, "stream": False, "messages": [{"role": "user", "content": word}]}
            response = await client.post(f"{llm.base_url}/chat/completions", json=body)
            return response.json()["choices"][0]["message"]["content"]

        assert await asyncio.gather(ask("right"), ask("left")) == ["R", "L"]


def test_respond_callable_answers_unlimited_requests_and_bodies_are_recorded(llm):
    llm.respond = lambda body: Reply(text=body["messages"][-1]["content"][::-1])
    raw = b'{"model":"m","stream":false,"messages":[{"role":"user","content":"abc"}]}'
    for _ in range(3):
        response = httpx.post(
            f"{llm.base_url}/chat/completions",
            content=raw,
            headers={"Content-Type": "application/json"},
        )
        assert response.json()["choices"][0]["message"]["content"] == "cba"
    assert [r.raw_body for r in llm.requests] == [raw] * 3


def test_nothing_scripted_is_a_500(llm):
    response = post(llm, STREAM)
    assert response.status_code == 500
    assert "no scripted reply" in response.json()["error"]["message"]


async def test_sixteen_delayed_requests_run_in_parallel(llm):
    # Each request is held until the server stops: served one at a time, the second
    # would never arrive; served in parallel, all sixteen are in at once.
    llm.respond = lambda body: Reply(text="ok", request_delay=STALL_SECS)
    body = {**STREAM, "stream": False}
    async with httpx.AsyncClient(timeout=STALL_SECS) as client:
        held = [
            asyncio.create_task(client.post(f"{llm.base_url}/chat/completions", json=body))
            for _ in range(16)
        ]
        async with asyncio.timeout(STALL_SECS / 2):  # a ceiling for a hang
            while len(llm.requests) < 16:
                await asyncio.sleep(0.01)
        for task in held:
            task.cancel()
        await asyncio.gather(*held, return_exceptions=True)
    assert len(llm.requests) == 16
