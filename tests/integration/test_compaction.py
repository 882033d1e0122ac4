"""Compaction against the loopback LLM: what goes on the wire, what the session file keeps,
what a failing summariser leaves, children, and /compact in the app."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from codewhale.config import load_config
from codewhale.engine import events
from codewhale.engine.compaction import (
    SUMMARISER_PROMPT,
    CompactionFailed,
    CompactionPolicy,
    ContextCompacted,
)
from codewhale.engine.conversation import Conversation
from codewhale.engine.loop import Engine
from codewhale.permissions import Mode, ModeSwitch
from codewhale.providers.client import ChatClient, encode_body
from codewhale.runtime import RuntimeRequestError, open_runtime
from codewhale.tools.base import ToolContext
from codewhale.tools.files import ReadFile
from codewhale.tools.registry import ToolRegistry
from codewhale.tui.app import CodeWhaleApp
from codewhale.tui.transcript import Notice
from tests.support.llm_server import Fault, Reply, ToolCallSpec
from tests.support.settings import TEST_KEY, loopback_settings

SYSTEM = "You are the engine under test. " * 30
STEPS_PER_TURN = 6
WINDOW = 6_000


def is_summariser(body: Any) -> bool:
    return body["messages"][0]["content"] == SUMMARISER_PROMPT


def main_requests(llm) -> list:
    return [r for r in llm.requests if not is_summariser(r.json)]


def scripted(body: Any) -> Reply:
    """Read notes.txt STEPS_PER_TURN times per user turn, then answer."""
    messages = body["messages"]
    last_user = max(i for i, m in enumerate(messages) if m["role"] == "user")
    results = sum(1 for m in messages[last_user:] if m["role"] == "tool")
    if results < STEPS_PER_TURN:
        return Reply(tool_calls=[ToolCallSpec("read_file", {"path": "notes.txt"})])
    return Reply(text=f"turn done after {results} reads")


def summary_reply(text: str = "The user asked for notes.txt to be read, again and again.") -> Reply:
    return Reply(text=text)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    (root / "notes.txt").write_text("".join(f"line {i}: some notes to read\n" for i in range(40)))
    return root


def make_engine(llm, workspace: Path, seen: list[events.Event], **policy: Any) -> Engine:
    return Engine(
        client=ChatClient(loopback_settings(llm.base_url)),
        tools=ToolRegistry([ReadFile()]),
        context=ToolContext(workspace=workspace, session_id="t", modes=ModeSwitch(Mode.YOLO)),
        conversation=Conversation([{"role": "system", "content": SYSTEM}]),
        emit=seen.append,
        compaction=CompactionPolicy(**{"window": WINDOW, **policy}),
    )


def encoded(message: dict[str, Any]) -> bytes:
    return encode_body(message)


def common_prefix(a: bytes, b: bytes) -> int:
    size = min(len(a), len(b))
    return next((i for i in range(size) if a[i] != b[i]), size)


def assert_tool_calls_whole(messages: list[dict[str, Any]]) -> None:
    """Every tool result follows its call, and every call has its result, in one request."""
    open_calls: set[str] = set()
    for message in messages:
        if message["role"] == "tool":
            assert message["tool_call_id"] in open_calls, "a tool result without its call"
            open_calls.discard(message["tool_call_id"])
            continue
        assert not open_calls, "a tool call without its result"
        open_calls = {call["id"] for call in message.get("tool_calls") or ()}


async def test_a_long_session_stays_within_the_window_and_keeps_its_bytes(llm, workspace):
    llm.route(is_summariser, respond=lambda body: summary_reply())
    llm.respond = scripted
    seen: list[events.Event] = []
    engine = make_engine(llm, workspace, seen)
    for turn in range(8):
        result = await engine.run_turn(f"read the notes, round {turn}")
        assert result.status == "completed"
    await engine.client.aclose()

    compactions = [e for e in seen if isinstance(e, ContextCompacted)]
    assert len(compactions) >= 2
    requests = main_requests(llm)
    # Bounded: the loopback counts a token per 4 bytes, the engine's threshold is 80%.
    sizes = [len(r.raw_body) // 4 for r in requests]
    assert max(sizes) <= WINDOW
    assert sum(sizes) > 3 * WINDOW  # the session as a whole went far past the window

    system = encoded({"role": "system", "content": SYSTEM})
    for request in requests:
        assert request.raw_body.startswith(b'{"model":"deepseek-v4-flash","messages":[' + system)
        assert_tool_calls_whole(request.json["messages"])

    compacted = [i for i, r in enumerate(requests) if "[Summary of" in r.raw_body.decode()]
    first = compacted[0]
    before, after, later = requests[first - 1], requests[first], requests[first + 1]
    summary, *kept = after.json["messages"][1:]
    assert summary["content"].startswith("[Summary of the earlier conversation.")
    assert "notes.txt to be read" in summary["content"]
    # The kept messages that the request before also carried: the very same bytes.
    carried = [m for m in kept if encoded(m) in before.raw_body]
    assert len(carried) >= 2
    for message in carried:
        assert encoded(message) in after.raw_body
    # The cache sees the system prompt, then after the compaction the new prefix is stable.
    assert common_prefix(before.raw_body, after.raw_body) >= len(system)
    messages_end = after.raw_body.index(b'],"tools":')
    assert later.raw_body.startswith(after.raw_body[:messages_end])


@pytest.mark.parametrize(
    ("refusal", "said"),
    [
        (Reply(fault=Fault.status(400, "summaries refused")), "summaries refused"),
        (Reply(text="", finish_reason="content_filter"), "content filter stopped the summary"),
        (Reply(text="   "), "answered with nothing"),
    ],
)
async def test_a_failing_summariser_leaves_the_conversation_whole(llm, workspace, refusal, said):
    llm.route(is_summariser, refusal)
    llm.respond = scripted
    seen: list[events.Event] = []
    engine = make_engine(llm, workspace, seen, window=3_000)
    result = await engine.run_turn("read the notes")
    await engine.client.aclose()

    assert result.status == "completed"
    warnings = [e for e in seen if isinstance(e, CompactionFailed)]
    assert warnings and said in warnings[0].message
    assert not any(isinstance(e, ContextCompacted) for e in seen)
    # Every request carried the whole conversation so far, untouched.
    last = main_requests(llm)[-1].json["messages"]
    assert last == engine.messages[: len(last)]
    assert not any("[Summary of" in str(m.get("content")) for m in last)
    # One attempt, then quiet until the context grows by another share of the window.
    assert sum(1 for r in llm.requests if is_summariser(r.json)) < len(main_requests(llm))


async def test_no_compaction_splits_a_tool_call_from_its_results(llm, workspace):
    # Two calls per response: the cut has to fall outside each call-and-results group.
    def two_calls(body: Any) -> Reply:
        reply = scripted(body)
        if reply.tool_calls:
            spec = ToolCallSpec("read_file", {"path": "notes.txt"})
            return Reply(tool_calls=[spec, ToolCallSpec("read_file", {"path": "notes.txt"})])
        return reply

    llm.route(is_summariser, respond=lambda body: summary_reply())
    llm.respond = two_calls
    seen: list[events.Event] = []
    engine = make_engine(llm, workspace, seen, keep_recent=0.1)
    for turn in range(4):
        await engine.run_turn(f"round {turn}")
    await engine.client.aclose()
    assert any(isinstance(e, ContextCompacted) for e in seen)
    for request in main_requests(llm):
        assert_tool_calls_whole(request.json["messages"])


@pytest.fixture
def session_env(llm, monkeypatch, workspace):
    monkeypatch.setenv("CODEWHALE_BASE_URL", llm.base_url)
    monkeypatch.setenv("DEEPSEEK_API_KEY", TEST_KEY)
    return workspace


async def test_a_resumed_session_starts_from_the_compacted_conversation(llm, session_env):
    llm.route(is_summariser, respond=lambda body: summary_reply("Two questions were answered."))
    llm.enqueue(Reply(text="one"), Reply(text="two"), Reply(text="three"))
    runtime = open_runtime(workspace=session_env)
    await runtime.submit("first question")
    await runtime.submit("second question")
    await runtime.submit("third question")
    done = await runtime.compact()
    assert (done.summarised, done.kept) == (4, 2)  # the newest turn stays as it was
    live = runtime.engine.conversation.request_messages()
    session_id = runtime.info.id
    await runtime.close()

    again = open_runtime(workspace=session_env, resume=session_id)
    try:
        assert again.messages == live
        assert "Two questions were answered." in again.messages[1]["content"]
        llm.enqueue(Reply(text="four"))
        await again.submit("fourth question")
    finally:
        await again.close()
    sent = [(m["role"], m["content"]) for m in main_requests(llm)[-1].json["messages"][1:]]
    assert sent == [
        ("user", live[1]["content"]),
        ("user", "third question"),
        ("assistant", "three"),
        ("user", "fourth question"),
    ]


async def test_compact_refuses_while_a_turn_runs_and_when_there_is_nothing(llm, session_env):
    runtime = open_runtime(workspace=session_env)
    try:
        with pytest.raises(RuntimeRequestError, match="nothing older"):
            await runtime.compact()
        llm.enqueue(Reply(text="done"))
        await runtime.submit("only question")
        with pytest.raises(RuntimeRequestError, match="nothing older"):
            await runtime.compact()  # one turn: it is the newest, kept as it is
    finally:
        await runtime.close()


CHILD_TASK = "Read notes.txt and report what it says. " * 60


def is_child(body: Any) -> bool:
    """By the child's system prompt: compacted, its assignment is only in the summary."""
    return "You are a sub-agent" in str(body["messages"][0].get("content"))


async def test_a_child_compacts_with_its_own_models_window(llm, session_env):
    # The child's first answer reports a prompt near deepseek-v4-flash's 128k window.
    near_window = {"prompt_tokens": 120_000, "completion_tokens": 50, "total_tokens": 120_050}
    report = "SUMMARY: done\nCHANGES: None.\nEVIDENCE:\n- a:1\nRISKS: none\nBLOCKERS: None."
    llm.route(is_summariser, respond=lambda body: summary_reply("The child was asked to read."))
    llm.route(
        is_child,
        Reply(tool_calls=[ToolCallSpec("read_file", {"path": "notes.txt"})], usage=near_window),
        Reply(text=report),
    )
    llm.enqueue(
        Reply(tool_calls=[ToolCallSpec("agent_open", {"prompt": CHILD_TASK})]),
        Reply(text="opened"),
        Reply(text="all done"),
    )
    runtime = open_runtime(workspace=session_env, mode=Mode.YOLO)
    try:
        await runtime.submit("delegate the reading")
    finally:
        await runtime.close()
    child = [r.json["messages"] for r in main_requests(llm) if is_child(r.json)]
    summaries = [r for r in llm.requests if is_summariser(r.json)]
    assert len(summaries) == 1
    assert CHILD_TASK.strip() in summaries[0].json["messages"][1]["content"]
    # The child's second request: its system prompt, the summary, then its tool exchange.
    assert len(child) == 2
    assert child[1][0] == child[0][0]
    assert child[1][1]["content"].startswith("[Summary of the earlier conversation.")
    assert [m["role"] for m in child[1][2:]] == ["assistant", "tool"]
    # The parent's own requests were never compacted.
    parent = [r.json["messages"] for r in main_requests(llm) if not is_child(r.json)]
    assert not any("[Summary of" in json.dumps(messages) for messages in parent)


async def test_slash_compact_in_the_app_says_what_was_kept(llm, session_env):
    llm.route(is_summariser, respond=lambda body: summary_reply())
    llm.enqueue(Reply(text="first answer"), Reply(text="second answer"))
    app = CodeWhaleApp(load_config(workspace=session_env), session_env)
    async with app.run_test(size=(120, 30)) as pilot:
        for prompt in ("first", "second"):
            await app.start_turn(prompt)
            await _until(pilot, lambda: not app.turn_running)
        for char in "/compact":
            await pilot.press(char)
        await pilot.press("enter")
        await _until(pilot, lambda: any("Compacted" in _said(n) for n in app.query(Notice)))
        said = next(_said(n) for n in app.query(Notice) if "Compacted" in _said(n))
        # The loopback is not DeepSeek's own endpoint: the summary uses the session's model.
        assert "2 messages summarised into one by deepseek-v4-pro" in said
        assert "the 2 most recent kept as they were" in said
        assert "tokens of 128,000" in said
        assert app.runtime is not None
        assert app.runtime.messages[1:] == [
            {"role": "user", "content": "first"},
            {"role": "assistant", "content": "first answer"},
            {"role": "user", "content": "second"},
            {"role": "assistant", "content": "second answer"},
        ]  # the list the session file mirrors is untouched; requests use the view
        await app.action_quit()


def _said(notice: Notice) -> str:
    return str(notice.render())


async def _until(pilot, condition, timeout: float = 10.0) -> None:
    import time

    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not reached"
        await pilot.pause(0.02)
