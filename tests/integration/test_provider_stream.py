"""The provider client against the real loopback server: the happy paths."""

from __future__ import annotations

import json

import pytest

from codewhale.providers.client import ChatClient, encode_body
from codewhale.providers.types import (
    ReasoningDelta,
    StreamFinished,
    TextDelta,
    ToolCallDelta,
    Usage,
)
from tests.support.llm_server import Reply, ToolCallSpec
from tests.support.settings import TEST_KEY, loopback_settings

HELLO = [{"role": "user", "content": "hello"}]


@pytest.fixture
async def client(llm):
    async with ChatClient(loopback_settings(llm.base_url), retry_base_delay_secs=0.01) as client:
        yield client


async def collect(client, messages=HELLO, **kwargs):
    return [event async for event in client.stream(messages, **kwargs)]


async def test_plain_text_arrives_as_the_deltas_the_server_sent(llm, client):
    llm.enqueue(Reply(text=["Hel", "lo, ", "world"]))
    events = await collect(client)
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["Hel", "lo, ", "world"]
    finished = events[-1]
    assert isinstance(finished, StreamFinished)
    assert finished.completion.content == "Hello, world"
    assert finished.completion.finish_reason == "stop"
    assert finished.completion.tool_calls == ()
    assert sum(isinstance(e, StreamFinished) for e in events) == 1


async def test_two_tool_calls_with_interleaved_fragments_are_reassembled_by_index(llm, client):
    llm.enqueue(
        Reply(
            tool_calls=[
                ToolCallSpec(
                    "grep_files",
                    {"pattern": "def main", "path": "src"},
                    id="call_a",
                    fragments=['{"pattern": ', '"def main", ', '"path": "src"}'],
                ),
                ToolCallSpec(
                    "read_file",
                    {"path": "README.md"},
                    id="call_b",
                    fragments=['{"pa', 'th": "READ', 'ME.md"}'],
                ),
            ],
            interleave=True,
        )
    )
    events = await collect(client, tools=[{"type": "function", "function": {"name": "x"}}])
    fragments = [e for e in events if isinstance(e, ToolCallDelta)]
    assert [f.index for f in fragments] == [0, 1, 0, 1, 0, 1]
    completion = events[-1].completion
    assert completion.finish_reason == "tool_calls"
    first, second = completion.tool_calls
    assert (first.id, first.name, json.loads(first.arguments)) == (
        "call_a",
        "grep_files",
        {"pattern": "def main", "path": "src"},
    )
    assert (second.id, second.name, json.loads(second.arguments)) == (
        "call_b",
        "read_file",
        {"path": "README.md"},
    )


async def test_reasoning_content_streams_separately_from_the_answer(llm, client):
    llm.enqueue(Reply(reasoning=["Let me ", "think."], text="42"))
    events = await collect(client)
    assert [e.text for e in events if isinstance(e, ReasoningDelta)] == ["Let me ", "think."]
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["42"]
    completion = events[-1].completion
    assert (completion.reasoning, completion.content) == ("Let me think.", "42")
    first_text = next(i for i, e in enumerate(events) if isinstance(e, TextDelta))
    assert all(isinstance(e, ReasoningDelta) for e in events[:first_text])


async def test_usage_with_deepseek_cache_fields_comes_from_the_final_chunk(llm, client):
    llm.enqueue(
        Reply(
            text="ok",
            usage={
                "prompt_tokens": 1200,
                "completion_tokens": 30,
                "total_tokens": 1230,
                "prompt_cache_hit_tokens": 1024,
                "prompt_cache_miss_tokens": 176,
                "completion_tokens_details": {"reasoning_tokens": 12},
            },
        )
    )
    completion = (await collect(client))[-1].completion
    assert completion.usage == Usage(
        input_tokens=1200,
        output_tokens=30,
        cache_hit_tokens=1024,
        cache_miss_tokens=176,
        reasoning_tokens=12,
    )
    body = llm.requests[-1].json
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}


async def test_openai_style_cached_tokens_are_read_as_cache_hits(llm, client):
    llm.enqueue(
        Reply(
            text="ok",
            usage={
                "prompt_tokens": 100,
                "completion_tokens": 5,
                "prompt_tokens_details": {"cached_tokens": 64},
            },
        )
    )
    usage = (await collect(client))[-1].completion.usage
    assert (usage.cache_hit_tokens, usage.cache_miss_tokens) == (64, 36)


@pytest.mark.parametrize("reason", ["length", "content_filter", "insufficient_system_resource"])
async def test_finish_reasons_are_passed_through(llm, client, reason):
    llm.enqueue(Reply(text="partial", finish_reason=reason))
    assert (await collect(client))[-1].completion.finish_reason == reason


async def test_request_body_is_deterministic_bytes_with_the_key_only_in_the_header(llm, client):
    llm.enqueue(Reply(text="ok"))
    messages = [{"role": "system", "content": "be brief ✓"}, *HELLO]
    await collect(client, messages, temperature=0.2)
    recorded = llm.requests[-1]
    expected = encode_body(client.build_body(messages, temperature=0.2))
    assert recorded.raw_body == expected
    assert recorded.headers["authorization"] == f"Bearer {TEST_KEY}"
    assert TEST_KEY.encode() not in recorded.raw_body
    assert recorded.json["model"] == "deepseek-v4-flash"
    assert "✓".encode() in recorded.raw_body


async def test_complete_returns_the_finished_completion(llm, client):
    llm.enqueue(Reply(text="done", chunk_size=1))
    completion = await client.complete(HELLO)
    assert completion.content == "done"


async def test_non_streamed_request_reads_a_whole_completion(llm, client):
    llm.enqueue(
        Reply(
            text="here",
            reasoning="hmm",
            tool_calls=[ToolCallSpec("list_dir", {"path": "."}, id="call_1")],
        )
    )
    completion = await client.request(HELLO, tools=[{"type": "function"}])
    assert llm.requests[-1].json["stream"] is False
    assert completion.content == "here"
    assert completion.reasoning == "hmm"
    assert completion.tool_calls[0].name == "list_dir"
    assert json.loads(completion.tool_calls[0].arguments) == {"path": "."}
    assert completion.usage is not None and completion.usage.input_tokens > 0


async def test_concurrent_streams_share_one_client(llm, client):
    import asyncio

    llm.respond = lambda request: Reply(text=request["messages"][-1]["content"].upper())
    prompts = [f"child {n}" for n in range(12)]
    results = await asyncio.gather(
        *(client.complete([{"role": "user", "content": p}]) for p in prompts)
    )
    assert [r.content for r in results] == [p.upper() for p in prompts]


TOOL = {"type": "function", "function": {"name": "read_file", "parameters": {"type": "object"}}}


def offline_client(llm) -> ChatClient:
    """A client with the `local` preset's habits, aimed at the scripted server."""
    settings = loopback_settings(llm.base_url, provider="local", api_key=None)
    return ChatClient(settings, retry_base_delay_secs=0.01)


async def test_a_server_that_cannot_stream_tools_gets_them_unstreamed(llm):
    llm.enqueue(Reply(tool_calls=[ToolCallSpec("read_file", {"path": "a"})]), Reply(text="hi"))
    async with offline_client(llm) as client:
        events = [event async for event in client.stream(HELLO, tools=[TOOL])]
        plain = await client.complete(HELLO)
    assert [type(event) for event in events] == [StreamFinished]
    assert events[0].completion.tool_calls[0].name == "read_file"
    first, second = (request.json for request in llm.requests)
    assert first["stream"] is False and first["tool_choice"] == "auto"
    assert "stream_options" not in first
    assert second["stream"] is True and "tools" not in second and plain.content == "hi"


async def test_an_empty_unstreamed_answer_is_asked_again_without_tools(llm):
    llm.enqueue(
        Reply(text="", usage={"prompt_tokens": 900, "completion_tokens": 2}),
        Reply(text=["Hel", "lo"], usage={"prompt_tokens": 100, "completion_tokens": 5}),
    )
    async with offline_client(llm) as client:
        events = [event async for event in client.stream(HELLO, tools=[TOOL])]
    assert [event.text for event in events if isinstance(event, TextDelta)] == ["Hel", "lo"]
    completion = events[-1].completion
    assert completion.content == "Hello"
    assert (completion.usage.input_tokens, completion.usage.output_tokens) == (1000, 7)
    retry = llm.requests[1].json
    assert retry["stream"] is True and "tools" not in retry and "tool_choice" not in retry


async def test_a_server_that_needs_text_content_never_gets_null(llm):
    llm.enqueue(Reply(text="ok"))
    history = [
        *HELLO,
        {"role": "assistant", "content": None, "tool_calls": []},
        {"role": "tool", "tool_call_id": "c1", "content": "x"},
    ]
    async with offline_client(llm) as client:
        await client.complete(history)
    sent = llm.requests[0].json["messages"]
    assert sent[1]["content"] == "" and history[1]["content"] is None


async def test_a_provider_without_tools_never_sends_them(llm):
    llm.enqueue(Reply(text="streamed"), Reply(text="whole"))
    settings = loopback_settings(llm.base_url, provider="local", api_key=None, offer_tools=False)
    async with ChatClient(settings) as client:
        streamed = await client.complete(HELLO, tools=[TOOL])
        whole = await client.request(HELLO, tools=[TOOL])
    assert (streamed.content, whole.content) == ("streamed", "whole")
    first, second = (request.json for request in llm.requests)
    assert first["stream"] is True and "tools" not in first and "tool_choice" not in first
    assert second["stream"] is False and "tools" not in second
