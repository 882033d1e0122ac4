"""The turn loop: ask the model, run its tool calls, repeat until it answers.

The engine runs turns on a Conversation it is given. Callers talk to it through
`run_turn`, `steer` (a user message at the next safe point), `queue` (a message
for after the turn) and `cancel`; they observe it through events.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any, Protocol

from codewhale.engine import events
from codewhale.engine.compaction import (
    Compaction,
    CompactionError,
    CompactionFailed,
    CompactionPolicy,
    Compactor,
    NothingToCompact,
    tokens_for,
)
from codewhale.engine.conversation import Conversation, Inbox, UsageMeter
from codewhale.engine.dispatch import ToolDispatcher
from codewhale.engine.written_tool_calls import IGNORED_TOOLS_WARNING, writes_a_tool_call
from codewhale.hooks.names import HookEvent
from codewhale.providers.client import ChatClient
from codewhale.providers.errors import ProviderError, RequestTimeoutError
from codewhale.providers.pricing import cost_usd
from codewhale.providers.retry import Retrying
from codewhale.providers.types import (
    Completion,
    ReasoningDelta,
    StreamFinished,
    TextDelta,
    Usage,
)
from codewhale.tools.base import ToolContext
from codewhale.tools.registry import ToolRegistry

DEFAULT_MAX_STEPS = 100
MAX_TRUNCATIONS = 3
CONTINUE_AFTER_LENGTH = (
    "Your previous reply was cut off by the output length limit. Continue exactly where it "
    "stopped, without repeating what you already wrote."
)
INTERRUPTED_NOTE = "[interrupted by the user]"
# Children opened together tend to end together. After one completion wakes a held
# turn, it waits for the others while they keep arriving (no gap longer than the
# quiet period, no longer than the cap in all), so one model call reads them all
# instead of one call per completion. A steer, or no child left running, ends it.
SETTLE_QUIET_SECS = 0.2
SETTLE_CAP_SECS = 1.0


class Recorder(Protocol):
    """Where an engine persists its conversation (a session file, a child's transcript)."""

    # The event types it keeps: the engine converts only those (it emits several a step).
    recorded_events: frozenset[str]

    def record_messages(self, messages: list[dict[str, Any]]) -> None: ...
    def record_event(self, event: dict[str, Any]) -> None: ...
    def sync(self) -> None: ...


@dataclass
class TurnResult:
    status: str  # completed | failed | interrupted | max_steps | timed_out
    steps: int
    usage: Usage
    final_text: str = ""
    error: str = ""


@dataclass
class Engine:
    """Runs turns on a Conversation; steers and runtime events arrive through its Inbox.

    `hold` says whether something outstanding (its children) will post to the inbox: while
    it does, a turn whose model has answered stays open and resumes on the next arrival.
    """

    client: ChatClient
    tools: ToolRegistry
    context: ToolContext
    conversation: Conversation
    emit: Callable[[events.Event], None] = lambda event: None
    model: str | None = None
    max_steps: int = DEFAULT_MAX_STEPS
    recorder: Recorder | None = None
    inbox: Inbox = field(default_factory=Inbox)
    meter: UsageMeter = field(default_factory=UsageMeter)
    hold: Callable[[], bool] = lambda: False
    # The tool list to offer (a forked child keeps its opener's); default: every tool.
    offered_tools: list[dict[str, Any]] | None = None
    # An idle timeout per model request (sub-agents): no byte for this long ends the turn
    # "timed_out", while an answer that keeps streaming is never cut.
    request_timeout_secs: float | None = None
    requester: str = "parent"
    # When to summarise older turns (the `[context]` config); the window follows the model.
    compaction: CompactionPolicy = field(default_factory=CompactionPolicy)
    turns: int = 0
    # Told the index of each user prompt as it joins the messages (/rewind's checkpoints).
    on_prompt: Callable[[int], None] = lambda index: None
    _queued: deque[str] = field(default_factory=deque)
    _turn_state: _TurnState | None = None
    _task: asyncio.Task[Any] | None = None
    # Said once: the server seems to drop the tools (engine/written_tool_calls.py).
    _told_tools_ignored: bool = False

    def __post_init__(self) -> None:
        self.dispatcher = ToolDispatcher(
            self.tools, self.context, self._emit, requester=self.requester
        )
        # Built once: the schemas never change during a conversation.
        self._schemas = (
            self.offered_tools if self.offered_tools is not None else self.tools.schemas()
        )
        self.compactor = Compactor(self.client, self.compaction)

    def schemas(self) -> list[dict[str, Any]]:
        return self._schemas

    @property
    def messages(self) -> list[dict[str, Any]]:
        return self.conversation.messages

    @property
    def usage(self) -> Usage:
        """Every token spent for this conversation, its delegates' included."""
        return self.meter.total

    def _emit(self, event: events.Event) -> None:
        if self.recorder is not None and event.type in self.recorder.recorded_events:
            self.recorder.record_event(event.to_dict())
        self.emit(event)

    def _checkpoint(self, *, sync: bool = False) -> None:
        """Persist new messages; fsync at turn boundaries."""
        if self.recorder is not None:
            self.recorder.record_messages(self.messages)
            if sync:
                self.recorder.sync()

    @property
    def running(self) -> bool:
        return self._task is not None

    def streamed_text(self) -> str:
        """The answer the model request under way has streamed so far; "" between requests."""
        state = self._turn_state
        return state.partial_text() if state is not None and state.streaming else ""

    def steer(self, text: str) -> None:
        """Add a user message to the running turn at its next safe point."""
        self.inbox.steer(text)

    def queue(self, text: str) -> None:
        """Run `text` as a new turn once the current one ends."""
        self._queued.append(text)

    def cancel(self) -> bool:
        """Stop the running turn (stream and tools); False if nothing was running."""
        if self._task is None:
            return False
        self._task.cancel()
        return True

    async def stop(self) -> None:
        """Cancel the running turn and wait until it has recorded how it ended."""
        task = self._task
        if task is None or task is asyncio.current_task():
            return
        task.cancel()
        await asyncio.wait({task})

    async def run_turn(self, prompt: str) -> TurnResult:
        """One user turn, then any queued ones; returns the last turn's result."""
        result = await self._run_single(prompt)
        while self._queued and result.status != "interrupted":
            result = await self._run_single(self._queued.popleft())
        return result

    async def continue_turn(self, note: str | None = None) -> TurnResult:
        """Resume from the current messages (a checkpoint), optionally adding a user note."""
        return await self._run_single(note)

    async def _run_single(self, prompt: str | None) -> TurnResult:
        self.turns += 1
        self.context.journal.begin_turn(self.turns)
        self._task = asyncio.current_task()
        self._emit(events.TurnStarted(turn=self.turns, prompt=prompt or ""))
        # What arrived between turns (a child finishing after Esc) happened first.
        self._accept_inbox()
        if prompt is not None:
            self.messages.append({"role": "user", "content": prompt})
            self.on_prompt(len(self.messages) - 1)
        state = self._turn_state = _TurnState()
        try:
            result = await self._loop(state)
        except asyncio.CancelledError:
            if self._task is not None:
                self._task.uncancel()
            self._close_interrupted(state)
            result = TurnResult("interrupted", state.steps, state.usage, state.partial_text())
        finally:
            self._task = None
            self._turn_state = None
        self._checkpoint(sync=True)
        if result.error:
            self._emit(events.ErrorEvent(message=result.error))
        self._emit(
            events.TurnComplete(
                status=result.status,
                steps=result.steps,
                usage=result.usage.counts(),
                final_text=result.final_text,
            )
        )
        return result

    async def _loop(self, state: _TurnState) -> TurnResult:
        truncations = 0
        while True:
            self._accept_inbox()
            if state.steps >= self.max_steps:
                return TurnResult(
                    "max_steps",
                    state.steps,
                    state.usage,
                    error=f"Stopped after {self.max_steps} steps (max_steps); "
                    "ask to continue if more work is needed.",
                )
            state.steps += 1
            self._checkpoint()
            try:
                completion = await self._request(state)
            except RequestTimeoutError:
                assert self.request_timeout_secs is not None
                return TurnResult(
                    "timed_out",
                    state.steps,
                    state.usage,
                    error=f"API call timed out after {int(self.request_timeout_secs * 1000)}ms",
                )
            except ProviderError as error:
                return TurnResult("failed", state.steps, state.usage, error=error.message)
            self.messages.append(_assistant_message(completion))
            self._emit(
                events.AssistantMessage(
                    content=completion.content,
                    reasoning=completion.reasoning,
                    tool_calls=len(completion.tool_calls),
                    finish_reason=completion.finish_reason,
                )
            )
            if completion.finish_reason == "length" and not completion.tool_calls:
                truncations += 1
                if truncations >= MAX_TRUNCATIONS:
                    return TurnResult(
                        "failed",
                        state.steps,
                        state.usage,
                        completion.content,
                        error=f"The reply was cut off by the output limit {truncations} times "
                        "in a row; ask for a shorter answer or split the task.",
                    )
                self.messages.append({"role": "user", "content": CONTINUE_AFTER_LENGTH})
                continue
            truncations = 0
            if completion.finish_reason == "content_filter":
                return TurnResult(
                    "failed",
                    state.steps,
                    state.usage,
                    completion.content,
                    error="The provider's content filter stopped the reply.",
                )
            if not completion.tool_calls:
                if self.inbox:
                    continue  # the user (or a child) added something while the answer streamed
                if self.hold():
                    # The turn stays open while children run: the next arrival (a
                    # completion, or a steer typed meanwhile) resumes it at once.
                    self._emit(events.WaitStarted(reason="children"))
                    try:
                        await self.inbox.wait()
                        await self._settle_completions()
                    finally:
                        self._emit(events.WaitEnded(reason="children"))
                    continue
                return TurnResult("completed", state.steps, state.usage, completion.content)
            state.pending_calls = list(completion.tool_calls)
            outcomes = await self.dispatcher.run(completion.tool_calls)
            state.pending_calls = []
            self.messages.extend(outcome.message() for outcome in outcomes)
            self._checkpoint()

    async def _settle_completions(self) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + SETTLE_CAP_SECS
        while self.hold() and not self.inbox.has_steer:
            quiet = min(SETTLE_QUIET_SECS, deadline - loop.time())
            if quiet <= 0:
                return
            try:
                async with asyncio.timeout(quiet):
                    await self.inbox.next_arrival()
            except TimeoutError:
                return

    def _accept_inbox(self) -> None:
        for item in self.inbox.drain():
            self.messages.append({"role": "user", "content": item.text})
            if item.steer:
                self._emit(events.SteerAccepted(text=item.text))

    def clear_steers(self) -> None:
        self.inbox.drop_steers()

    async def _request(self, state: _TurnState) -> Completion:
        """One model request; the client retries it, and says so before each retry."""
        state.deltas.clear()
        if self.compactor.due(self.conversation, self._schemas, self._model):
            await self._compact(state)
        messages = self.conversation.request_messages()
        self.conversation.last_request_size = len(messages)
        self.conversation.tools = self._schemas
        streamed = False
        # The idle timeout is the client's: it sees every byte, and an event that carries
        # no delta (a finish_reason, the usage) is data all the same.
        stream = self.client.stream(
            messages,
            tools=self._schemas,
            model=self.model,
            idle_timeout_secs=self.request_timeout_secs,
        )
        state.streaming = True
        try:
            async with aclosing(stream):
                async for event in stream:
                    if isinstance(event, Retrying):
                        self._emit(_retrying_event(event))
                    elif isinstance(event, TextDelta):
                        streamed = True
                        state.deltas.append(event.text)
                        self._emit(events.AssistantDelta(text=event.text))
                    elif isinstance(event, ReasoningDelta):
                        streamed = True
                        self._emit(events.ReasoningDelta(text=event.text))
                    elif isinstance(event, StreamFinished):
                        return self._finished(event.completion, state)
        except ProviderError:
            # The client never retries once deltas were delivered (they would repeat), so
            # the shown part is closed as cut short and the turn fails with the reason.
            if streamed:
                self._emit(
                    events.AssistantMessage(
                        content=state.partial_text(), finish_reason="error", interrupted=True
                    )
                )
            raise
        finally:
            state.streaming = False
        raise ProviderError("the stream ended without a completion")  # pragma: no cover

    def _finished(self, completion: Completion, state: _TurnState) -> Completion:
        if completion.usage is not None:
            # The answer is appended next: the count covers it too.
            self.compactor.observe(self.conversation, completion.usage, len(self.messages) + 1)
            self._spent(completion.usage, self.model or "", state, reported=completion.cost)
        else:
            # Some local servers send no usage: counted from the sizes, and said to be.
            self._spent(self._estimated_usage(completion), self.model or "", state)
        if self._schemas and not completion.tool_calls and not self._told_tools_ignored:
            offered = (schema["function"]["name"] for schema in self._schemas)
            if writes_a_tool_call(completion.content, offered):
                self._told_tools_ignored = True
                self._emit(events.WarningEvent(message=IGNORED_TOOLS_WARNING))
        return completion

    def _estimated_usage(self, completion: Completion) -> Usage:
        """The request's tokens as compaction estimates them, the answer's the same way."""
        prompt = self.compactor.size(self.conversation, self._schemas)
        answer = completion.content + completion.reasoning
        answer += "".join(call.arguments for call in completion.tool_calls)
        produced = max(1, tokens_for(len(answer.encode("utf-8"))))
        return Usage(input_tokens=prompt, output_tokens=produced, estimated=True)

    def _spent(
        self, usage: Usage, model: str, state: _TurnState | None, reported: float | None = None
    ) -> None:
        if state is not None:
            state.usage += usage
        provider = self.client.settings.provider
        self.meter.add_own(usage, cost_usd(provider, model, usage, reported=reported))
        self._emit(
            events.UsageEvent(
                input=usage.input_tokens,
                output=usage.output_tokens,
                cache_hit=usage.cache_hit_tokens,
                cache_miss=usage.cache_miss_tokens,
                estimated=usage.estimated,
            )
        )

    # -- the context window ----------------------------------------------------------------

    @property
    def _model(self) -> str:
        return self.model or self.client.settings.model

    def context_use(self) -> tuple[int, int]:
        """(tokens the next request would carry, the model's window)."""
        size = self.compactor.size(self.conversation, self._schemas)
        return size, self.compactor.window(self._model)

    async def compact(self) -> Compaction:
        """Summarise the older turns now (/compact); CompactionError leaves all as it was."""
        done = await self._compact(None)
        assert done is not None  # on demand, a compaction either happens or raises
        self._checkpoint(sync=True)
        return done

    async def _compact(self, state: _TurnState | None) -> Compaction | None:
        """Compact (in a turn: if still due), record it and say so; a failure only warns."""
        manual = state is None
        if self.context.hooks.has(HookEvent.PRE_COMPACT):
            trigger = _trigger(manual)
            payload = {"trigger": trigger, "custom_instructions": ""}
            await self.context.hooks.run(HookEvent.PRE_COMPACT, trigger, payload)
        # The session file must hold every message before the record that folds them.
        self._checkpoint()
        try:
            done = await self.compactor.compact(
                self.conversation, self._schemas, self._model, manual=manual
            )
        except CompactionError as error:
            if not isinstance(error, NothingToCompact):
                self._emit(CompactionFailed(trigger=_trigger(manual), message=str(error)))
            if manual:
                raise
            return None
        if done is None:
            return None
        if done.usage is not None:
            self._spent(done.usage, done.model, state)
        self._checkpoint()  # what was appended while the summary was written comes first
        kept = len(self.messages) - done.recent_start
        self._emit(done.event(_trigger(manual), kept))
        return done

    def _close_interrupted(self, state: _TurnState) -> None:
        """Leave a valid conversation behind: partial text kept, open tool calls answered."""
        if state.pending_calls:
            for call in state.pending_calls:
                answered = any(
                    m.get("role") == "tool" and m.get("tool_call_id") == call.id
                    for m in self.messages
                )
                if not answered:
                    self.messages.append(
                        {"role": "tool", "tool_call_id": call.id, "content": INTERRUPTED_NOTE}
                    )
        elif partial := state.partial_text():
            self.messages.append({"role": "assistant", "content": f"{partial}\n{INTERRUPTED_NOTE}"})
        self._emit(
            events.AssistantMessage(
                content=state.partial_text(), finish_reason="interrupted", interrupted=True
            )
        )


@dataclass
class _TurnState:
    steps: int = 0
    usage: Usage = field(default_factory=Usage)
    # The current request's answer as it streamed, one piece per delta: a str grown with
    # += is copied whole per delta (CPython appends in place only to a local with one
    # reference), which made a long answer quadratic. Joined only when read.
    deltas: list[str] = field(default_factory=list)
    # A request is streaming `deltas`; once its answer is in the messages they are not news.
    streaming: bool = False
    pending_calls: list[Any] = field(default_factory=list)

    def partial_text(self) -> str:
        """The answer streamed so far; joined once, and kept joined for the next read."""
        if len(self.deltas) > 1:
            self.deltas[:] = ["".join(self.deltas)]
        return self.deltas[0] if self.deltas else ""


def _assistant_message(completion: Completion) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": completion.content or None}
    if completion.tool_calls:
        # DeepSeek wants its reasoning sent back on turns that called tools.
        if completion.reasoning:
            message["reasoning_content"] = completion.reasoning
        message["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments},
            }
            for call in completion.tool_calls
        ]
    return message


def _trigger(manual: bool) -> str:
    return "manual" if manual else "auto"


def _retrying_event(notice: Retrying) -> events.Retrying:
    return events.Retrying(
        attempt=notice.attempt,
        max_attempts=notice.max_attempts,
        delay=notice.delay,
        reason=notice.reason,
    )
