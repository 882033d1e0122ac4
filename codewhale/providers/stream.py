"""Turn a response's bytes into events and assemble the final Completion.

Pure data handling, no I/O: the client feeds it the body's bytes (SSEDecoder) and the
decoded JSON chunks (StreamAssembler). Providers differ in where they put things
(docs/PROVIDERS.md, "Stream shapes"); every shape they send is read here, so nothing
above this module knows which provider answered.
"""

from __future__ import annotations

import codecs
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from codewhale.providers.errors import ProtocolError
from codewhale.providers.types import (
    Completion,
    ReasoningDelta,
    StreamEvent,
    TextDelta,
    ToolCall,
    ToolCallDelta,
    Usage,
    reported_cost,
)


class SSEDecoder:
    """Server-sent events from a body's bytes, in whatever pieces they arrive.

    `feed` returns one string per event that ended in those bytes: its data lines joined
    by newlines, "" for an event that carried other fields only (`event:`, `id:`,
    `retry:`). Comments (`:` lines, a server's keep-alives) are no event. Lines end in
    CRLF, LF or CR, as the SSE grammar allows; the text is UTF-8, a broken sequence
    replaced rather than fatal. An event unfinished when the body ends is dropped.
    """

    _FIELDS = frozenset({"event", "id", "retry"})

    def __init__(self) -> None:
        self._text = codecs.getincrementaldecoder("utf-8")(errors="replace")
        # The start of a line whose end has not arrived, in the pieces it came in: one
        # event's line may span megabytes (a whole answer or tool argument in one delta),
        # and re-joining it with every piece would copy it once per piece.
        self._line: list[str] = []
        self._data: list[str] = []
        self._pending = False  # a field seen since the last event ended
        self._started = False

    def feed(self, chunk: bytes) -> list[str]:
        text = self._text.decode(chunk)
        if not self._started and text:
            self._started = True
            text = text.removeprefix("\ufeff")
        if self._line:
            ended = "\n" in text or "\r" in text or self._line[-1].endswith("\r")
            self._line.append(text)
            if not ended:
                return []
            text = "".join(self._line)
        if "\r" in text:
            # A CR last may be the first half of a CRLF: kept until the next piece.
            text = text.replace("\r\n", "\n")
            body, cr = (text[:-1], "\r") if text.endswith("\r") else (text, "")
            lines = body.replace("\r", "\n").split("\n")
            lines[-1] += cr
        else:
            lines = text.split("\n")
        rest = lines.pop()
        self._line = [rest] if rest else []
        events = []
        for line in lines:
            if not line:
                if self._pending:
                    events.append("\n".join(self._data))
                    self._data, self._pending = [], False
            elif line[0] != ":":
                name, _, value = line.partition(":")
                if value[:1] == " ":
                    value = value[1:]
                if name == "data":
                    self._data.append(value)
                    self._pending = True
                elif name in self._FIELDS:
                    self._pending = True
        return events


@dataclass
class _PartialToolCall:
    id: str | None = None
    name: str = ""
    arguments: list[str] = field(default_factory=list)


class StreamAssembler:
    """Accumulates one streamed response.

    Tool calls are keyed by their `index`, or by their `id` from providers that send no
    index (see _call_index).
    """

    def __init__(self) -> None:
        self._content: list[str] = []
        self._reasoning: list[str] = []
        self._calls: dict[int, _PartialToolCall] = {}
        self.finish_reason: str | None = None
        self.usage: Usage | None = None
        self.cost: float | None = None
        self.model = ""

    def feed(self, chunk: Any) -> Iterator[StreamEvent]:
        """Absorb one decoded chunk and yield the deltas it carried.

        Usage may come with the last choice or alone in a final chunk whose `choices` is
        empty (OpenAI's `include_usage`); a chunk with neither carries nothing.
        """
        if not isinstance(chunk, Mapping):
            raise ProtocolError(f"expected a JSON object in the stream, got {type(chunk).__name__}")
        if isinstance(chunk.get("error"), Mapping):
            message = chunk["error"].get("message") or "unknown error"
            raise ProtocolError(f"the provider reported an error mid-stream: {message}")
        if isinstance(chunk.get("model"), str):
            self.model = chunk["model"]
        if isinstance(chunk.get("usage"), Mapping):
            self.usage = Usage.from_wire(chunk["usage"])
            self.cost = reported_cost(chunk["usage"])
        for choice in chunk.get("choices") or ():
            if not isinstance(choice, Mapping) or choice.get("index", 0) != 0:
                continue
            yield from self._feed_delta(choice.get("delta") or {})
            if choice.get("finish_reason"):
                self.finish_reason = str(choice["finish_reason"])

    def _feed_delta(self, delta: Any) -> Iterator[StreamEvent]:
        if not isinstance(delta, Mapping):
            raise ProtocolError(f"malformed delta: {str(delta)[:200]}")
        for event in (*_reasoning_deltas(delta), *_content_deltas(delta.get("content"))):
            self._record(event)
            yield event
        for fragment in delta.get("tool_calls") or ():
            yield self._feed_tool_fragment(fragment)

    def _record(self, event: TextDelta | ReasoningDelta) -> None:
        kept = self._content if isinstance(event, TextDelta) else self._reasoning
        kept.append(event.text)

    def _feed_tool_fragment(self, fragment: Any) -> ToolCallDelta:
        if not isinstance(fragment, Mapping):
            raise ProtocolError(f"malformed tool call fragment: {str(fragment)[:200]}")
        index = self._call_index(fragment)
        call = self._calls.setdefault(index, _PartialToolCall())
        function = fragment.get("function") or {}
        new_id = fragment.get("id") if isinstance(fragment.get("id"), str) else None
        name = function.get("name") if isinstance(function.get("name"), str) else None
        arguments = function.get("arguments")
        arguments = arguments if isinstance(arguments, str) else ""
        if new_id and not call.id:
            call.id = new_id
        if name:
            # Some servers resend the name on every fragment; others split it.
            call.name = name if call.name in ("", name) else call.name + name
        call.arguments.append(arguments)
        return ToolCallDelta(index=index, id=new_id, name=name, arguments=arguments)

    def _call_index(self, fragment: Mapping[str, Any]) -> int:
        """The call a fragment belongs to.

        DeepSeek and OpenAI number every fragment with `index` and send the `id` only
        with a call's first fragment, so the index alone decides. Gemini sends no
        `index`: each parallel call comes with its own `id`, so a new id starts a new
        call and a fragment with neither continues the last one.
        """
        index = fragment.get("index")
        if index is not None:
            if not isinstance(index, int):
                raise ProtocolError(f"malformed tool call fragment: {str(fragment)[:200]}")
            return index
        call_id = fragment.get("id")
        if not isinstance(call_id, str) or not call_id:
            return max(self._calls, default=0)
        for known_index, call in self._calls.items():
            if call.id == call_id:
                return known_index
        return max(self._calls, default=-1) + 1

    def completion(self, finish_reason: str | None = None) -> Completion:
        """The response so far; `finish_reason` overrides what the stream said."""
        calls = tuple(
            ToolCall(
                id=partial.id or f"call_{index}",
                name=partial.name,
                arguments="".join(partial.arguments),
                index=index,
            )
            for index, partial in sorted(self._calls.items())
        )
        return Completion(
            content="".join(self._content),
            reasoning="".join(self._reasoning),
            tool_calls=calls,
            finish_reason=finish_reason or self.finish_reason or "",
            usage=self.usage,
            model=self.model,
            cost=self.cost,
        )


def _reasoning_deltas(delta: Mapping[str, Any]) -> Iterator[ReasoningDelta]:
    """DeepSeek's `reasoning_content`, and Groq's and OpenRouter's `reasoning`.

    A server that fills both for compatibility sends the same text twice; it is one
    thought, so it is kept once. Different texts are both kept, `reasoning_content` first.
    """
    reasoning_content = _text(delta.get("reasoning_content"))
    reasoning = _text(delta.get("reasoning"))
    if reasoning_content:
        yield ReasoningDelta(reasoning_content)
    if reasoning and reasoning != reasoning_content:
        yield ReasoningDelta(reasoning)


def _content_deltas(content: Any) -> Iterator[TextDelta | ReasoningDelta]:
    """`content` is a string, or (Mistral) a list of typed parts, each read in order."""
    if isinstance(content, str) and content:
        yield TextDelta(content)
    elif isinstance(content, list):
        for part in content:
            yield from _part_deltas(part)


def _part_deltas(part: Any) -> Iterator[TextDelta | ReasoningDelta]:
    """A `text` part is answer, a `thinking` part (Magistral's) reasoning.

    A thinking part holds its text as a string or as text parts. Other parts
    (references) carry nothing to show.
    """
    if not isinstance(part, Mapping):
        return
    if part.get("type") == "text":
        text = _text(part.get("text"))
        if text:
            yield TextDelta(text)
    elif part.get("type") == "thinking":
        for thought in _content_deltas(part.get("thinking")):
            yield ReasoningDelta(thought.text)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def completion_from_message(body: Any) -> Completion:
    """Read a non-streamed `chat.completion` object."""
    if not isinstance(body, Mapping) or not isinstance(body.get("choices"), list):
        raise ProtocolError("the provider's reply has no 'choices' list")
    if not body["choices"]:
        raise ProtocolError("the provider's reply has an empty 'choices' list")
    choice = body["choices"][0]
    message = choice.get("message") if isinstance(choice, Mapping) else None
    if not isinstance(message, Mapping):
        raise ProtocolError("the provider's reply has no message")
    assembler = StreamAssembler()
    tool_calls = [
        {**call, "index": call.get("index", position)}
        for position, call in enumerate(message.get("tool_calls") or ())
        if isinstance(call, Mapping)
    ]
    delta = {**message, "tool_calls": tool_calls}
    chunk = {
        "model": body.get("model"),
        "usage": body.get("usage"),
        "choices": [{"index": 0, "delta": delta, "finish_reason": choice.get("finish_reason")}],
    }
    for _ in assembler.feed(chunk):
        pass
    return assembler.completion()
