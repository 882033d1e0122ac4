"""Every tool call runs under a time limit: real slow tools, the dispatcher, and a whole turn."""

from __future__ import annotations

import asyncio
import json
from typing import Any, ClassVar

from codewhale.engine import events
from codewhale.engine.conversation import Conversation
from codewhale.engine.dispatch import ToolDispatcher
from codewhale.engine.loop import Engine
from codewhale.permissions import ApprovalClass, Mode, ModeSwitch
from codewhale.providers.client import ChatClient
from codewhale.providers.types import ToolCall
from codewhale.tools.base import DEFAULT_TIMEOUT_SECS, Tool, ToolContext, ToolResult
from codewhale.tools.files import ReadFile
from codewhale.tools.registry import ToolRegistry
from tests.support.llm_server import Reply, ToolCallSpec
from tests.support.settings import loopback_settings


class Sleeper(Tool):
    """Sleeps for `seconds` (an argument), then answers."""

    name = "sleeper"
    description = "sleeps"
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {"seconds": {"type": "number"}},
    }
    timeout_secs = 0.3

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolResult:
        await asyncio.sleep(arguments.get("seconds", 30))
        return ToolResult("woke up")


class AskingSleeper(Sleeper):
    """The same, but it runs code: Agent mode asks the user first."""

    name = "asking_sleeper"
    approval = ApprovalClass.REQUIRED


class OwnTimeout(Tool):
    """Fails with a TimeoutError of its own, well inside the dispatcher's limit."""

    name = "own_timeout"
    description = "times out by itself"
    parameters: ClassVar[dict[str, Any]] = {"type": "object", "properties": {}}

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolResult:
        raise TimeoutError("the upstream socket timed out")


def dispatcher_for(tmp_path, mode: Mode = Mode.YOLO, emit=None) -> ToolDispatcher:
    tools = ToolRegistry([Sleeper(), AskingSleeper(), OwnTimeout()])
    context = ToolContext(workspace=tmp_path, session_id="s", modes=ModeSwitch(mode))
    return ToolDispatcher(tools, context, emit or (lambda event: None))


async def test_a_slow_call_ends_as_an_error_result_and_its_siblings_finish(tmp_path):
    seen: list[events.Event] = []
    dispatcher = dispatcher_for(tmp_path, emit=seen.append)
    slow, quick = await dispatcher.run(
        [
            ToolCall("c1", "sleeper", "{}"),
            ToolCall("c2", "sleeper", json.dumps({"seconds": 0.01})),
        ]
    )
    # Its own 30 s sleep was cut at the tool's limit.
    assert not slow.result.ok
    assert slow.result.output == "Error: sleeper timed out after 0.3 s"
    assert quick.result.ok and quick.result.output == "woke up"
    finished = [event for event in seen if isinstance(event, events.ToolCallFinished)]
    assert {(event.call_id, event.ok) for event in finished} == {("c1", False), ("c2", True)}


async def test_the_time_a_user_takes_to_approve_is_not_counted(tmp_path):
    async def answer_late(event: events.Event) -> None:
        await asyncio.sleep(0.6)  # twice the tool's limit
        assert isinstance(event, events.ApprovalRequested)
        event.resolve("approve")

    answers: list[asyncio.Task[None]] = []

    def emit(event: events.Event) -> None:
        if isinstance(event, events.ApprovalRequested):
            answers.append(asyncio.create_task(answer_late(event)))

    dispatcher = dispatcher_for(tmp_path, Mode.AGENT, emit)
    (outcome,) = await dispatcher.run(
        [ToolCall("c1", "asking_sleeper", json.dumps({"seconds": 0.05}))]
    )
    await asyncio.gather(*answers)
    assert outcome.result.ok and outcome.result.output == "woke up"


async def test_a_tools_own_timeout_error_is_not_taken_for_the_limit(tmp_path):
    (outcome,) = await dispatcher_for(tmp_path).run([ToolCall("c1", "own_timeout", "{}")])
    assert not outcome.result.ok
    assert outcome.result.output == (
        "Error: own_timeout failed: TimeoutError: the upstream socket timed out"
    )


def test_tools_get_the_default_limit_unless_they_set_their_own():
    assert ReadFile.timeout_secs == DEFAULT_TIMEOUT_SECS
    assert Sleeper.timeout_secs == 0.3


async def test_the_turn_continues_after_a_call_times_out(llm, tmp_path):
    llm.enqueue(
        Reply(tool_calls=[ToolCallSpec("sleeper", {}, id="call_slow")]),
        Reply(text="it was too slow; moving on"),
    )
    context = ToolContext(workspace=tmp_path, session_id="s", modes=ModeSwitch(Mode.YOLO))
    async with ChatClient(loopback_settings(llm.base_url)) as client:
        engine = Engine(
            client=client,
            tools=ToolRegistry([Sleeper()]),
            context=context,
            conversation=Conversation([{"role": "system", "content": "test"}]),
        )
        result = await engine.run_turn("do it")
    assert result.status == "completed"
    assert result.final_text == "it was too slow; moving on"
    tool_messages = [m for m in llm.requests[1].json["messages"] if m["role"] == "tool"]
    assert tool_messages == [
        {
            "role": "tool",
            "tool_call_id": "call_slow",
            "content": "Error: sleeper timed out after 0.3 s",
        }
    ]


def test_tools_with_their_own_limits_get_a_dispatcher_limit_above_them():
    from codewhale.rlm.tools import RlmEval
    from codewhale.subagents.tools import AgentEval
    from codewhale.tools.shell import MAX_TIMEOUT_SECS, ExecShell

    assert ExecShell.timeout_secs > MAX_TIMEOUT_SECS
    assert RlmEval.timeout_secs > 3600 and AgentEval.timeout_secs > 3600
