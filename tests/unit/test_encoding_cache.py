"""Request bodies encoded from cached fragments are byte-identical to the plain encoder.

Forked sub-agents rely on it: a child's request must start with exactly the bytes of
its parent's, so the provider's prefix cache hits.
"""

from __future__ import annotations

import asyncio
import gc
import json
import weakref
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from codewhale.providers.client import ChatClient, encode_body
from codewhale.sessions.store import SessionStore
from codewhale.tools.registry import ToolRegistry, default_tools
from tests.support.local_model import local_settings
from tests.support.settings import loopback_settings

URL = "http://127.0.0.1:9/v1"


def plain(body: dict[str, Any]) -> bytes:
    return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


@pytest.fixture
def client():
    client = ChatClient(loopback_settings(URL))
    yield client
    asyncio.run(client.aclose())


@pytest.fixture
def text_client():
    """A client for a server that needs content as a string (null becomes "")."""
    client = ChatClient(local_settings(URL))
    assert client._needs_text_content
    yield client
    asyncio.run(client.aclose())


def tool_call(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


CONVERSATION: list[dict[str, Any]] = [
    {"role": "system", "content": 'You are CodeWhale.\n\tBe brief. "Quotes" and \\ slashes'},
    {"role": "user", "content": "Lis le fichier « notes » — 读一下 notes.txt 🐳"},
    {
        "role": "assistant",
        "content": None,
        "reasoning_content": "need the file\u2028then answer\x00\x1f",
        "tool_calls": [
            tool_call("call_1", "read_file", '{"path": "notes.txt"}'),
            tool_call("call_2", "grep_files", '{"pattern": "é|ü", "max": 3}'),
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": "1\tline 1\n2\tline 2"},
    {"role": "tool", "tool_call_id": "call_2", "content": ""},
    {"role": "assistant", "content": "Done: ✅ 2 files", "name": None},
    {"role": "user", "content": "nums", "extra": {"f": 1.5, "i": -3, "b": True, "l": [None]}},
]

PARAMS: list[dict[str, Any]] = [
    {},
    {"temperature": 0.2, "max_tokens": 512},
    {"tool_choice": "auto", "temperature": None},
    {"stream_options": {"include_usage": False}, "top_p": 1e-7},
    {"response_format": {"type": "json_object"}, "stop": ["\n\n", "ü"]},
]


@pytest.mark.parametrize("params", PARAMS)
@pytest.mark.parametrize("stream", [True, False])
@pytest.mark.parametrize("with_tools", [True, False])
@pytest.mark.parametrize("which", ["client", "text_client"])
def test_encoded_request_is_the_plain_encoding_byte_for_byte(
    request, which, with_tools, stream, params
):
    client = request.getfixturevalue(which)
    tools = ToolRegistry(default_tools()).schemas() if with_tools else None
    for size in range(len(CONVERSATION) + 1):  # a growing conversation, cached as it grows
        messages = CONVERSATION[:size]
        built = client.build_body(messages, tools=tools, stream=stream, **params)
        encoded = client.encode_request(messages, tools=tools, stream=stream, **params)
        assert encoded == plain(built) == encode_body(built)
        assert json.loads(encoded) == built


def test_text_content_servers_get_an_empty_string_for_null_content(text_client):
    encoded = text_client.encode_request(CONVERSATION)
    assert b'"content":null' not in encoded
    assert json.loads(encoded)["messages"][2]["content"] == ""
    # The conversation itself is untouched.
    assert CONVERSATION[2]["content"] is None


def count_encodings(client, monkeypatch) -> list[Any]:
    """The objects the client's message cache encodes from now on."""
    encoded: list[Any] = []
    cache = client._message_fragments
    original = type(cache)._encode

    def counting(self, item):
        encoded.append(item)
        return original(self, item)

    monkeypatch.setattr(type(cache), "_encode", counting)
    return encoded


def test_each_message_is_encoded_once_however_many_requests(client, monkeypatch):
    messages = [dict(message) for message in CONVERSATION[:2]]
    tools = ToolRegistry(default_tools()).schemas()
    encoded = count_encodings(client, monkeypatch)
    for step in range(20):
        client.encode_request(messages, tools=tools)
        messages.append({"role": "tool", "tool_call_id": f"c{step}", "content": f"out {step}"})
    # Every message once, every tool schema once.
    assert len(encoded) == 2 + 19 + len(tools)


def test_a_replaced_message_or_a_rewritten_list_is_encoded_afresh(client, monkeypatch):
    messages = [dict(message) for message in CONVERSATION]
    client.encode_request(messages)
    encoded = count_encodings(client, monkeypatch)
    # Sent messages are replaced, never edited: the replacement is a new dict.
    messages[1] = {**messages[1], "content": "changed"}
    messages[2] = {key: value for key, value in messages[2].items() if key != "tool_calls"}
    assert client.encode_request(messages) == plain(client.build_body(messages))
    assert encoded == [messages[1], messages[2]]
    # A compaction: older turns folded into one summary, the recent ones kept as they were.
    summary = {"role": "user", "content": "summary of turns 1-3"}
    messages[1:4] = [summary]
    assert client.encode_request(messages) == plain(client.build_body(messages))
    assert encoded[2:] == [summary]
    del messages[1:]  # /clear
    assert client.encode_request(messages) == plain(client.build_body(messages))


def test_a_long_conversation_encodes_only_its_new_messages(client, monkeypatch):
    messages = [{"role": "user", "content": f"message {i}"} for i in range(1000)]
    client.encode_request(messages)
    encoded = count_encodings(client, monkeypatch)
    for step in range(5):
        messages.append({"role": "tool", "tool_call_id": f"c{step}", "content": "out"})
        assert client.encode_request(messages) == plain(client.build_body(messages))
    assert encoded == messages[1000:]


def test_conversations_taking_turns_on_one_client_keep_their_encodings(client, monkeypatch):
    conversations = [
        [{"role": "system", "content": "shared prompt"}, {"role": "user", "content": f"task {n}"}]
        for n in range(6)
    ]
    for messages in conversations:
        client.encode_request(messages)
    encoded = count_encodings(client, monkeypatch)
    for step in range(3):
        for n, messages in enumerate(conversations):
            messages.append({"role": "assistant", "content": f"step {step} of {n}"})
            assert client.encode_request(messages) == plain(client.build_body(messages))
    # More conversations than whole lists kept: each still encodes only its new message.
    assert len(encoded) == 3 * len(conversations)


class Message(dict):
    """A message that can be watched with a weak reference."""


def test_a_cleared_conversation_is_not_kept_alive_by_the_cache(client):
    messages = [Message(role="system", content="prompt")]
    messages += [Message(role="user", content=f"turn {n}") for n in range(300)]
    client.encode_request(messages)
    watched = [weakref.ref(message) for message in messages[1:]]
    del messages[1:]  # /clear
    # Released once the cache has doubled since it last looked (here, 600 requests on).
    for turn in range(600):
        messages.append(Message(role="user", content=f"after {turn}"))
        client.encode_request(messages)
    assert client.encode_request(messages) == plain(client.build_body(messages))
    gc.collect()
    assert all(ref() is None for ref in watched)


def test_a_fork_with_the_same_messages_in_a_new_list_gets_the_same_prefix(client):
    parent = [dict(message) for message in CONVERSATION]
    tools = ToolRegistry(default_tools()).schemas()
    parent_bytes = client.encode_request(parent, tools=tools)
    child = [*parent, {"role": "system", "content": "fork state"}]
    child_bytes = client.encode_request(child, tools=list(tools))
    messages_prefix = parent_bytes.split(b'],"tools":')[0]  # up to the last message's "}"
    assert child_bytes.startswith(messages_prefix + b',{"role":"system","content":"fork state"}')
    assert child_bytes == plain(client.build_body(child, tools=tools))


def test_one_off_conversations_do_not_pile_up_in_the_cache(client):
    kept = [{"role": "system", "content": "system prompt"}]
    for call in range(2000):
        one_off = [{"role": "user", "content": f"rlm sub-call {call}"}]
        assert client.encode_request(one_off) == plain(client.build_body(one_off))
        client.encode_request(kept)
    assert len(client._message_fragments) < 600
    assert client.encode_request(kept) == plain(client.build_body(kept))


def test_a_long_conversation_is_held_once_not_per_message_as_well(client):
    """Messages already inside the joined encoding of the conversation need no entry of
    their own: the cache holds the conversation's bytes once (issue 27's RSS growth)."""
    messages = [Message(role="system", content="prompt")]
    for turn in range(2000):
        messages.append(Message(role="user", content=f"turn {turn} " + "x" * 200))
        client.encode_request(messages)
    assert len(client._message_fragments) < 600  # one entry per message would be 2001
    assert client.encode_request(messages) == plain(client.build_body(messages))


def test_a_one_off_request_keeps_nothing_and_encodes_as_the_plain_encoder(client, text_client):
    for each in (client, text_client):
        summary_request = [Message(message) for message in CONVERSATION]
        body = b"".join(each.encode_request_parts(summary_request, remember=False))
        assert body == plain(each.build_body(summary_request))
        assert len(each._message_fragments) == 0
        watched = weakref.ref(summary_request[1])
        del summary_request
        gc.collect()
        assert watched() is None


def test_objects_dropped_from_the_cache_and_their_ids_reused_are_encoded_afresh(client):
    for round_ in range(300):
        # Fresh dicts each time, often at addresses freed by the previous round's.
        messages = [{"role": "user", "content": f"round {round_} message {i}"} for i in range(5)]
        assert client.encode_request(messages) == plain(client.build_body(messages))


json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=12,
)
messages_strategy = st.lists(
    st.fixed_dictionaries(
        {"role": st.sampled_from(["system", "user", "assistant", "tool"])},
        optional={
            "content": st.none() | st.text(),
            "tool_call_id": st.text(max_size=10),
            "tool_calls": st.lists(
                st.builds(tool_call, st.text(max_size=8), st.text(max_size=8), st.text()),
                max_size=3,
            ),
            "extra": json_values,
        },
    ),
    max_size=8,
)


@settings(max_examples=150, deadline=None)
@given(history=messages_strategy, more=messages_strategy, tools=st.lists(json_values, max_size=3))
def test_any_conversation_encodes_as_the_plain_encoder_does(history, more, tools):
    # One client per example: a fixture would be shared across examples.
    for settings_ in (loopback_settings(URL), local_settings(URL)):
        client = ChatClient(settings_)
        tool_schemas = [{"type": "function", "function": value} for value in tools]
        try:
            for messages in (history, history + more):
                built = client.build_body(messages, tools=tool_schemas, temperature=0.5)
                assert client.encode_request(
                    messages, tools=tool_schemas, temperature=0.5
                ) == plain(built)
        finally:
            asyncio.run(client.aclose())


# -- the session file: buffered between checkpoints ------------------------------------


def test_session_lines_reach_the_file_at_checkpoints_not_per_line(tmp_path):
    store = SessionStore(tmp_path)
    info, writer = store.create(tmp_path, "m")
    header = info.path.read_text()
    assert json.loads(header)["kind"] == "session"  # flushed at once, for `sessions list`

    writer.record_event({"type": "turn_started", "turn": 1, "prompt": "hi"})
    writer.record_event({"type": "assistant_delta", "text": "not recorded"})
    assert info.path.read_text() == header  # an event waits for the next checkpoint

    messages = [{"role": "system", "content": "s"}, {"role": "user", "content": "hi 🐳"}]
    writer.record_messages(messages)
    lines = info.path.read_text().splitlines()
    assert [json.loads(line)["kind"] for line in lines] == [
        "session",
        "event",
        "message",
        "message",
    ]

    writer.record_event({"type": "turn_complete", "status": "completed"})
    assert json.loads(info.path.read_text().splitlines()[-1])["event"]["type"] == "turn_complete"

    writer.record_clear()
    messages = [messages[0], {"role": "user", "content": "again"}]
    writer.record_messages(messages)
    writer.close()
    loaded = store.load(info.id)
    assert loaded.messages == messages and not loaded.warnings
