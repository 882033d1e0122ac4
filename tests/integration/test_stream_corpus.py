"""Every stream shape the providers send, read by the real client.

The corpus (tests/fixtures/streams/) holds one raw SSE body per provider shape, written
from the providers' documented formats, beside the Completion it must assemble to. Each
is replayed by the loopback server on 127.0.0.1 through ChatClient's streaming path:
adding a `.sse` file and its `.expected.json` adds a test. The tests after the corpus
pin each rule of the StreamAssembler on the chunk that exercises it.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from codewhale.providers.client import ChatClient
from codewhale.providers.stream import StreamAssembler, completion_from_message
from codewhale.providers.types import (
    Completion,
    ReasoningDelta,
    StreamEvent,
    StreamFinished,
    TextDelta,
    ToolCallDelta,
    Usage,
)
from tests.support.llm_server import Reply
from tests.support.settings import loopback_settings

CORPUS = Path(__file__).parent.parent / "fixtures" / "streams"
RECORDINGS = sorted(CORPUS.glob("*.sse"))
HELLO = [{"role": "user", "content": "hello"}]


def expected_path(recording: Path) -> Path:
    return recording.with_name(recording.stem + ".expected.json")


def as_expected(completion: Completion) -> dict[str, Any]:
    """The completion in the shape of an `.expected.json` file."""
    return {
        "model": completion.model,
        "content": completion.content,
        "reasoning": completion.reasoning,
        "tool_calls": [
            {"id": call.id, "name": call.name, "arguments": json.loads(call.arguments)}
            for call in completion.tool_calls
        ],
        "finish_reason": completion.finish_reason,
        # A provider's counts are never estimated: the recorded files list the counts only.
        "usage": None if completion.usage is None else _counts(completion.usage),
    }


def test_the_corpus_pairs_every_recording_with_its_expected_result():
    expected_files = {path.name for path in CORPUS.glob("*.expected.json")}
    assert len(RECORDINGS) >= 7
    assert {expected_path(recording).name for recording in RECORDINGS} == expected_files


@pytest.mark.parametrize("recording", RECORDINGS, ids=lambda path: path.stem)
async def test_a_recorded_stream_assembles_to_its_expected_completion(llm, recording):
    llm.enqueue(Reply(recorded_sse=recording.read_bytes()))
    async with ChatClient(loopback_settings(llm.base_url), retry_base_delay_secs=0.01) as client:
        events = [event async for event in client.stream(HELLO)]

    finished = [event for event in events if isinstance(event, StreamFinished)]
    assert len(finished) == 1 and events[-1] is finished[0]
    completion = finished[0].completion
    assert as_expected(completion) == json.loads(expected_path(recording).read_text())
    # What the caller saw while it streamed adds up to what it was finally given.
    assert joined(events, TextDelta) == completion.content
    assert joined(events, ReasoningDelta) == completion.reasoning
    for call in completion.tool_calls:
        fragments = [e for e in events if isinstance(e, ToolCallDelta) and e.index == call.index]
        assert "".join(fragment.arguments for fragment in fragments) == call.arguments


def joined(events: list[Any], kind: type[TextDelta] | type[ReasoningDelta]) -> str:
    return "".join(event.text for event in events if isinstance(event, kind))


# -- the assembler's rules, one chunk shape at a time ------------------------------------


def chunk(delta: Any = None, finish_reason: str | None = None, **fields: Any) -> dict[str, Any]:
    choice = {"index": 0, "delta": {} if delta is None else delta, "finish_reason": finish_reason}
    return {"model": "m", "choices": [choice], **fields}


def tool_chunk(*fragments: dict[str, Any]) -> dict[str, Any]:
    return chunk({"tool_calls": list(fragments)})


def assemble(*chunks: Any) -> tuple[list[StreamEvent], Completion]:
    assembler = StreamAssembler()
    events = [event for each in chunks for event in assembler.feed(each)]
    return events, assembler.completion()


def calls_of(completion: Completion) -> list[tuple[int, str, str, str]]:
    return [(c.index, c.id, c.name, c.arguments) for c in completion.tool_calls]


def test_fragments_without_index_start_a_new_call_for_each_new_id():
    events, completion = assemble(
        tool_chunk({"id": "a", "function": {"name": "read_file", "arguments": '{"path":"x"}'}}),
        tool_chunk({"id": "b", "function": {"name": "read_file", "arguments": '{"path":"y"}'}}),
    )
    assert [e.index for e in events if isinstance(e, ToolCallDelta)] == [0, 1]
    assert calls_of(completion) == [
        (0, "a", "read_file", '{"path":"x"}'),
        (1, "b", "read_file", '{"path":"y"}'),
    ]


def test_several_indexless_calls_in_one_delta_are_told_apart_by_id():
    _, completion = assemble(
        tool_chunk(
            {"id": "a", "function": {"name": "ls", "arguments": "{}"}},
            {"id": "b", "function": {"name": "pwd", "arguments": "{}"}},
        )
    )
    assert calls_of(completion) == [(0, "a", "ls", "{}"), (1, "b", "pwd", "{}")]


def test_a_fragment_with_neither_index_nor_id_continues_the_last_call():
    _, completion = assemble(
        tool_chunk({"id": "a", "function": {"name": "ls", "arguments": "{}"}}),
        tool_chunk({"id": "b", "function": {"name": "grep", "arguments": '{"pattern":'}}),
        tool_chunk({"function": {"arguments": '"main"}'}}),
        tool_chunk({"extra_content": {"google": {"thought_signature": "c2ln"}}}),
    )
    assert calls_of(completion) == [(0, "a", "ls", "{}"), (1, "b", "grep", '{"pattern":"main"}')]


def test_an_indexless_fragment_repeating_a_known_id_continues_that_call():
    _, completion = assemble(
        tool_chunk({"id": "a", "function": {"name": "grep", "arguments": '{"pattern":'}}),
        tool_chunk({"id": "a", "function": {"arguments": '"main"}'}}),
    )
    assert calls_of(completion) == [(0, "a", "grep", '{"pattern":"main"}')]


def test_an_indexless_fragment_before_any_call_starts_call_zero():
    _, completion = assemble(tool_chunk({"function": {"name": "ls", "arguments": "{}"}}))
    assert calls_of(completion) == [(0, "call_0", "ls", "{}")]


def test_with_an_index_the_index_alone_decides_whatever_the_ids_say():
    _, completion = assemble(
        tool_chunk({"index": 0, "id": "a", "function": {"name": "grep", "arguments": "{"}}),
        tool_chunk({"index": 1, "id": "b", "function": {"name": "ls", "arguments": "{"}}),
        tool_chunk({"index": 0, "id": "other", "function": {"arguments": "}"}}),
        tool_chunk({"index": 1, "function": {"arguments": "}"}}),
    )
    assert calls_of(completion) == [(0, "a", "grep", "{}"), (1, "b", "ls", "{}")]


@pytest.mark.parametrize(
    "pieces", [['{"path":"README.md"}'], ['{"pa', 'th":"READ', 'ME.md"}']], ids=["whole", "pieces"]
)
def test_arguments_are_the_same_whole_or_in_pieces(pieces):
    head, *rest = pieces
    _, completion = assemble(
        tool_chunk({"index": 0, "id": "a", "function": {"name": "read_file", "arguments": head}}),
        *(tool_chunk({"index": 0, "function": {"arguments": piece}}) for piece in rest),
    )
    assert calls_of(completion) == [(0, "a", "read_file", '{"path":"README.md"}')]


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
def test_either_reasoning_field_becomes_reasoning(field):
    events, completion = assemble(chunk({field: "Let me think."}), chunk({"content": "42"}))
    assert events == [ReasoningDelta("Let me think."), TextDelta("42")]
    assert (completion.reasoning, completion.content) == ("Let me think.", "42")


def test_the_same_thought_in_both_reasoning_fields_counts_once():
    events, completion = assemble(chunk({"reasoning_content": "Hm.", "reasoning": "Hm."}))
    assert events == [ReasoningDelta("Hm.")]
    assert completion.reasoning == "Hm."


def test_different_thoughts_in_the_two_fields_are_both_kept_reasoning_content_first():
    events, _ = assemble(chunk({"reasoning": "second", "reasoning_content": "first"}))
    assert events == [ReasoningDelta("first"), ReasoningDelta("second")]


def test_mistral_thinking_parts_are_reasoning_and_text_parts_are_content():
    thinking = {"type": "thinking", "thinking": [{"type": "text", "text": "17 + 25 = 42."}]}
    events, completion = assemble(
        chunk({"content": [thinking, {"type": "text", "text": "42"}]}),
        chunk({"content": [{"type": "reference", "reference_ids": [1]}, {"type": "text"}]}),
    )
    assert events == [ReasoningDelta("17 + 25 = 42."), TextDelta("42")]
    assert (completion.reasoning, completion.content) == ("17 + 25 = 42.", "42")


def test_a_thinking_part_may_hold_its_text_as_a_plain_string():
    events, _ = assemble(chunk({"content": [{"type": "thinking", "thinking": "Hm."}]}))
    assert events == [ReasoningDelta("Hm.")]


def test_a_plain_list_of_text_parts_is_content():
    parts = [{"type": "text", "text": "Hello, "}, {"type": "text", "text": "world"}]
    events, completion = assemble(chunk({"content": parts}))
    assert events == [TextDelta("Hello, "), TextDelta("world")]
    assert completion.content == "Hello, world"


WIRE_USAGE = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}


@pytest.mark.parametrize(
    "chunks",
    [
        [chunk({"content": "ok"}, "stop", usage=WIRE_USAGE)],
        [chunk({"content": "ok"}), chunk(None, "stop"), {"choices": [], "usage": WIRE_USAGE}],
    ],
    ids=["with the last choice", "alone after choices: []"],
)
def test_usage_is_read_wherever_it_comes(chunks):
    _, completion = assemble(*chunks)
    assert completion.usage == Usage(input_tokens=10, output_tokens=5, cache_miss_tokens=10)


def test_without_usage_the_completion_has_none():
    _, completion = assemble(chunk({"content": "ok"}, "stop", usage=None))
    assert completion.usage is None


def test_a_chunk_with_empty_choices_and_no_usage_changes_nothing():
    assembler = StreamAssembler()
    list(assembler.feed(chunk({"content": "ok"})))
    before = assembler.completion()
    for empty in ({"choices": []}, {"choices": None}, {"choices": [], "usage": None}, {}):
        assert list(assembler.feed(empty)) == []
    assert assembler.completion() == before


def test_a_finish_reason_on_an_empty_delta_ends_the_response():
    events, completion = assemble(chunk({"content": "ok"}), chunk({}, "length"))
    assert events == [TextDelta("ok")]
    assert completion.finish_reason == "length"


@pytest.mark.parametrize(
    "delta",
    [{"role": "assistant"}, {"content": None}, {"role": "assistant", "content": None}, None],
    ids=["role only", "null content", "role and null content", "no delta"],
)
def test_a_delta_without_text_yields_nothing(delta):
    events, completion = assemble({"choices": [{"index": 0, "delta": delta}]})
    assert events == []
    assert (completion.content, completion.reasoning, completion.tool_calls) == ("", "", ())


def test_unknown_fields_are_ignored_at_every_level():
    events, completion = assemble(
        chunk(
            {"content": "ok", "refusal": None, "annotations": []},
            "stop",
            obfuscation="Tq8",
            x_groq={"id": "req_1"},
            provider="DeepInfra",
        )
    )
    assert events == [TextDelta("ok")]
    assert (completion.content, completion.finish_reason) == ("ok", "stop")


def test_a_non_streamed_reply_reads_the_same_shapes():
    body = {
        "model": "magistral-medium-2509",
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop",
                "message": {
                    "role": "assistant",
                    "content": [
                        {"type": "thinking", "thinking": [{"type": "text", "text": "Hm."}]},
                        {"type": "text", "text": "42"},
                    ],
                },
            }
        ],
    }
    completion = completion_from_message(body)
    assert (completion.reasoning, completion.content) == ("Hm.", "42")


def _counts(usage: Usage) -> dict[str, int]:
    counts = dataclasses.asdict(usage)
    assert counts.pop("estimated") is False
    return counts
