"""The pieces of compaction: windows, config, where to cut, what the summariser reads, the
size estimate, and the session file's record."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from codewhale.config import ConfigError, load_config
from codewhale.config_models import Config
from codewhale.engine.compaction import (
    BYTES_PER_TOKEN,
    CompactionPolicy,
    Compactor,
    ContextCompacted,
    NothingToCompact,
    choose_cut,
    describe,
    encoded_size,
    render,
)
from codewhale.engine.conversation import Conversation
from codewhale.providers.client import ChatClient
from codewhale.providers.presets import DEFAULT_CONTEXT_WINDOW, context_window
from codewhale.providers.types import Usage
from codewhale.sessions.store import SessionStore
from codewhale.tui.status import context_text
from tests.support.settings import loopback_settings

URL = "http://127.0.0.1:9/v1"


# -- windows and config ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("provider", "model", "window"),
    [
        ("deepseek", "deepseek-v4-pro", 128_000),
        ("deepseek", "a-future-deepseek-model", 128_000),
        ("openrouter", "deepseek/deepseek-chat", 128_000),
        ("openai", "gpt-4.1-mini", 1_047_576),
        ("moonshot", "kimi-k2-0905-preview", 262_144),
        ("local", "smollm2-135m", 8_192),
        ("vllm", "default", DEFAULT_CONTEXT_WINDOW),
        ("custom", "whatever", DEFAULT_CONTEXT_WINDOW),
    ],
)
def test_the_window_is_known_per_model_then_per_preset(provider, model, window):
    assert context_window(provider, model) == window


def write_config(home, text: str) -> None:
    (home / "config").mkdir(parents=True, exist_ok=True)
    (home / "config" / "config.toml").write_text(text)


def test_the_context_section_reaches_the_policy(tmp_path):
    write_config(
        tmp_path,
        '[context]\nwindow = 64000\ncompact_at = 0.7\nkeep_recent = 0.2\nsummary_model = "s"\n'
        "auto_compact = false\n",
    )
    loaded = load_config(env={"CODEWHALE_HOME": str(tmp_path)})
    assert loaded.warnings == ()
    assert CompactionPolicy.from_config(loaded.config.context) == CompactionPolicy(
        window=64_000, compact_at=0.7, keep_recent=0.2, summary_model="s", auto=False
    )
    assert CompactionPolicy.from_config(Config().context) == CompactionPolicy()


def test_a_percentage_is_refused_with_the_file_and_the_fix(tmp_path):
    write_config(tmp_path, "[context]\ncompact_at = 80\n")
    with pytest.raises(ConfigError) as error:
        load_config(env={"CODEWHALE_HOME": str(tmp_path)})
    message = str(error.value)
    assert "config.toml" in message
    assert "compact_at = 80: expected a fraction of the window such as 0.8" in message


@pytest.mark.parametrize(
    ("text", "warning"),
    [
        ("window = 100", "context.window = 100 is below the minimum 2048; using 2048"),
        (
            "compact_at = 0.5\nkeep_recent = 0.45",
            "context.keep_recent = 0.45 must be at most compact_at - 0.2; using 0.3",
        ),
    ],
)
def test_numbers_out_of_range_are_clamped_with_a_note(tmp_path, text, warning):
    write_config(tmp_path, f"[context]\n{text}\n")
    loaded = load_config(env={"CODEWHALE_HOME": str(tmp_path)})
    assert [w.split(": ", 1)[1] for w in loaded.warnings] == [warning]


def test_an_empty_summary_model_is_an_error(tmp_path):
    write_config(tmp_path, '[context]\nsummary_model = " "\n')
    with pytest.raises(ConfigError, match="expected a model id"):
        load_config(env={"CODEWHALE_HOME": str(tmp_path)})


# -- where to cut ------------------------------------------------------------------------

# One step of a conversation: a user message, an answer, or a call with its results.
step = st.one_of(
    st.builds(lambda n: [{"role": "user", "content": "u" * n}], st.integers(1, 300)),
    st.builds(lambda n: [{"role": "assistant", "content": "a" * n}], st.integers(1, 300)),
    st.builds(
        lambda calls, n: [
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": f"c{i}", "function": {"name": "t"}} for i in range(calls)],
            },
            *({"role": "tool", "tool_call_id": f"c{i}", "content": "r" * n} for i in range(calls)),
        ],
        st.integers(1, 3),
        st.integers(1, 2_000),
    ),
)


@given(st.lists(step, min_size=1, max_size=30), st.integers(0, 20_000), st.booleans())
def test_a_cut_never_separates_a_call_from_its_results(steps, budget, manual):
    messages = [{"role": "system", "content": "s"}] + [m for group in steps for m in group]
    sizes = [encoded_size(m) for m in messages[1:]]
    try:
        cut = choose_cut(messages, 1, len(messages), sizes, budget, manual=manual)
    except NothingToCompact:
        assert all(m["role"] == "tool" for m in messages[2:]) or manual
        return
    assert 1 < cut < len(messages)
    assert messages[cut]["role"] != "tool"
    kept = messages[cut:]
    calls = {c["id"] for m in kept for c in m.get("tool_calls") or ()}
    assert all(m["tool_call_id"] in calls for m in kept if m["role"] == "tool")
    # As many as fit: from any earlier cut point the kept part would not fit.
    earlier = [p for p in range(2, cut) if messages[p]["role"] != "tool"]
    if not manual:
        assert all(sum(sizes[p - 1 :]) > budget for p in earlier)


def test_on_demand_a_small_conversation_keeps_its_newest_turn():
    messages = [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "one"},
        {"role": "assistant", "content": "1"},
        {"role": "user", "content": "two"},
        {"role": "assistant", "content": "2"},
    ]
    sizes = [encoded_size(m) for m in messages[1:]]
    assert choose_cut(messages, 1, 5, sizes, 10_000, manual=True) == 3
    with pytest.raises(NothingToCompact):  # one turn: it is the newest
        choose_cut(messages[:3], 1, 3, sizes[:2], 10_000, manual=True)


# -- what the summariser reads -------------------------------------------------------------


def test_the_summariser_reads_calls_by_name_and_long_output_clipped():
    messages = [
        {"role": "user", "content": "read it"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "function": {"name": "read_file", "arguments": '{"path": "a.py"}'}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "x" * 10_000 + "THE END"},
    ]
    text = render(messages, 100_000)
    assert '[calls read_file {"path": "a.py"}]' in text
    assert "[result of read_file]" in text
    assert "characters left out" in text and text.endswith("THE END")
    assert len(render(messages, 500)) < 600


def test_the_summary_says_what_it_stands_for():
    older = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "1"}, {"id": "2"}]},
        {"role": "tool", "tool_call_id": "1", "content": ""},
        {"role": "tool", "tool_call_id": "2", "content": ""},
    ]
    assert describe(older, False) == "4 messages (1 from the user, 2 tool calls with their results)"
    summary = {"role": "user", "content": "[Summary of the earlier conversation.]"}
    assert describe([summary, older[0]], True) == (
        "an earlier summary and 1 message (1 from the user, 0 tool calls)"
    )


# -- the size ----------------------------------------------------------------------------


@pytest.fixture
def compactor():
    client = ChatClient(loopback_settings(URL))
    yield Compactor(client, CompactionPolicy(window=10_000))
    asyncio.run(client.aclose())


def test_the_size_is_the_providers_count_plus_an_estimate_of_what_is_new(compactor):
    conversation = Conversation([{"role": "system", "content": "s" * 300}])
    tools = [{"type": "function", "function": {"name": "t"}}]
    estimated = compactor.size(conversation, tools)
    assert estimated == -(-encoded_size(tools) // BYTES_PER_TOKEN) + -(
        -encoded_size(conversation.messages[0]) // BYTES_PER_TOKEN
    )
    conversation.messages.append({"role": "user", "content": "hello"})
    compactor.observe(conversation, Usage(input_tokens=4_000, output_tokens=100), covered=3)
    conversation.messages.append({"role": "assistant", "content": "hi"})  # the answer counted
    assert compactor.size(conversation, tools) == 4_100
    new = {"role": "user", "content": "z" * 3_000}
    conversation.messages.append(new)
    assert compactor.size(conversation, tools) == 4_100 + -(-encoded_size(new) // 3)
    assert compactor.due(conversation, tools, "deepseek-v4-flash") is False
    compactor.observe(conversation, Usage(input_tokens=8_000, output_tokens=10), covered=5)
    assert compactor.due(conversation, tools, "deepseek-v4-flash") is True
    # A server without usage changes nothing; a cleared conversation is measured afresh.
    compactor.observe(conversation, Usage(), covered=5)
    assert compactor.size(conversation, tools) == 8_010
    conversation.clear()
    assert compactor.size(conversation, tools) == estimated


def test_a_client_that_offers_no_tools_counts_none():
    client = ChatClient(loopback_settings(URL, offer_tools=False))
    try:
        chat_only = Compactor(client, CompactionPolicy(window=10_000))
        conversation = Conversation([{"role": "system", "content": "s" * 300}])
        tools = [{"type": "function", "function": {"name": "t", "description": "d" * 3_000}}]
        assert chat_only.size(conversation, tools) == -(
            -encoded_size(conversation.messages[0]) // BYTES_PER_TOKEN
        )
    finally:
        asyncio.run(client.aclose())


def test_a_compacted_conversation_sends_the_same_dicts():
    messages: list[dict[str, Any]] = [{"role": "system", "content": "s"}]
    messages += [{"role": "user", "content": str(i)} for i in range(6)]
    conversation = Conversation(messages)
    summary = {"role": "user", "content": "[Summary of the earlier conversation.]"}
    conversation.compact(summary, 4)
    view = conversation.request_messages()
    assert [id(m) for m in view] == [id(messages[0]), id(summary), *map(id, messages[4:])]
    conversation.last_request_size = 3
    assert conversation.request_prefix() == view[:3]
    conversation.clear()
    assert conversation.request_messages() == [messages[0]] and conversation.epoch == 1


def test_context_use_on_the_status_line():
    assert context_text(42_000, 100_000) == "ctx 42%"
    assert context_text(130_000, 128_000) == "ctx 101%"


# -- the session file ----------------------------------------------------------------------


def test_loading_a_session_applies_its_compactions(tmp_path):
    store = SessionStore(tmp_path)
    info, writer = store.create(tmp_path, "m")
    messages = [{"role": "system", "content": "s"}]
    messages += [{"role": "user", "content": f"m{i}"} for i in range(6)]
    writer.record_messages(messages)
    first = {"role": "user", "content": "[Summary of the earlier conversation.] one"}
    writer.record_event(compacted(first, kept=2))
    messages.append({"role": "assistant", "content": "later"})
    writer.record_messages(messages)
    second = {"role": "user", "content": "[Summary of the earlier conversation.] two"}
    writer.record_event(compacted(second, kept=1))
    writer.record_event(compacted(second, kept=99))  # cannot apply: skipped, said
    writer.close()
    loaded = store.load(info.id)
    assert loaded.messages == [messages[0], second, messages[-1]]
    assert len(loaded.warnings) == 1 and "unusable compaction record" in loaded.warnings[0]


def compacted(summary: dict[str, Any], *, kept: int) -> dict[str, Any]:
    event = ContextCompacted(
        trigger="auto",
        summarised=3,
        kept=kept,
        tokens_before=1,
        tokens_after=1,
        window=1,
        summary=summary,
    )
    return event.to_dict()


# -- a resumed session's first estimate ----------------------------------------------------

# The messages the engine writes (loading refuses other shapes), with text beyond ASCII
# and characters JSON escapes, and tool calls nesting objects in lists in objects. Each
# call is answered right after its message, as the engine does (loading answers a call
# left without one, and drops an answer without its call).
TOOL_CALLS = st.lists(
    st.fixed_dictionaries(
        {
            "id": st.text(),
            "type": st.just("function"),
            "function": st.fixed_dictionaries({"name": st.text(), "arguments": st.text()}),
        }
    ),
    min_size=1,
    max_size=3,
    unique_by=lambda call: call["id"],
)
ANSWERED_CALLS = st.tuples(
    st.fixed_dictionaries(
        {"role": st.just("assistant"), "content": st.none() | st.text(), "tool_calls": TOOL_CALLS},
        optional={"reasoning_content": st.text()},
    ),
    st.text(),
).map(
    lambda pair: [
        pair[0],
        *(
            {"role": "tool", "tool_call_id": call["id"], "content": pair[1]}
            for call in pair[0]["tool_calls"]
        ),
    ]
)
TURN_PARTS = st.one_of(
    st.fixed_dictionaries({"role": st.just("user"), "content": st.text()}).map(lambda m: [m]),
    st.fixed_dictionaries(
        {"role": st.just("assistant"), "content": st.none() | st.text()},
        optional={"reasoning_content": st.text()},
    ).map(lambda m: [m]),
    ANSWERED_CALLS,
)
MESSAGES = st.lists(TURN_PARTS, max_size=4).map(lambda parts: [m for part in parts for m in part])


@given(MESSAGES)
def test_a_loaded_sessions_message_sizes_are_what_the_estimate_would_encode(
    tmp_path_factory, bodies
):
    store = SessionStore(tmp_path_factory.mktemp("data"))
    info, writer = store.create(store.root, "m")
    messages = [{"role": "system", "content": "s"}, *bodies]
    writer.record_messages(messages)
    writer.close()
    loaded = store.load(info.id)
    assert loaded.messages == messages
    assert loaded.sizes == [encoded_size(m) for m in messages]


def test_sizes_follow_clears_and_compactions_and_survive_a_torn_line(tmp_path):
    store = SessionStore(tmp_path)
    info, writer = store.create(tmp_path, "m")
    messages = [{"role": "system", "content": "s"}, {"role": "user", "content": "gone"}]
    writer.record_messages(messages)
    writer.record_clear()
    del messages[1:]
    messages += [{"role": "user", "content": f"m{i} ünïcode"} for i in range(5)]
    writer.record_messages(messages)
    summary = {"role": "user", "content": "[Summary of the earlier conversation.]"}
    writer.record_event(compacted(summary, kept=2))
    writer.close()
    with info.path.open("a", encoding="utf-8") as handle:
        handle.write('{"kind": "message", "message": {"role": "assis')  # torn by a crash
    resumed = store.resume(info.id, tmp_path, "m")
    before, writer = resumed.loaded, resumed.writer
    assert len(before.warnings) == 1 and "unreadable record skipped" in before.warnings[0]
    later = {"role": "assistant", "content": "after the crash"}
    writer.record_messages([*before.messages, later])  # appends only what is new
    writer.close()
    loaded = store.load(info.id)  # the torn line was set aside as the session was taken
    assert loaded.messages == [messages[0], summary, *messages[-2:], later]
    assert loaded.warnings == []
    known = [encoded_size(m) for m in loaded.messages]
    assert loaded.sizes == [known[0], None, *known[2:]]  # the summary is not a message line


def test_a_resumed_conversation_is_estimated_as_if_every_message_were_encoded(compactor, tmp_path):
    store = SessionStore(tmp_path)
    info, writer = store.create(tmp_path, "m")
    messages: list[dict[str, Any]] = [{"role": "system", "content": "s" * 300}]
    for i in range(40):
        call = {"id": f"c{i}", "type": "function", "function": {"name": "f", "arguments": "{}"}}
        messages += [
            {"role": "user", "content": f"step {i}: résumé"},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"c{i}", "content": "ok\n" * i},
        ]
    writer.record_messages(messages)
    writer.close()
    loaded = store.load(info.id)
    tools = [{"type": "function", "function": {"name": "t"}}]
    resumed = Conversation(loaded.messages, known_sizes=loaded.sizes)

    def fresh(messages: list[dict[str, Any]]) -> int:
        return Compactor(compactor.client, compactor.policy).size(Conversation(messages), tools)

    assert compactor.size(resumed, tools) == fresh(list(messages))
    # After a clear the sizes read with the file stand for nothing any more.
    resumed.clear()
    resumed.messages.append({"role": "user", "content": "x" * 3_000})
    assert resumed.known_sizes == loaded.sizes[:1]
    assert compactor.size(resumed, tools) == fresh([messages[0], resumed.messages[1]])
