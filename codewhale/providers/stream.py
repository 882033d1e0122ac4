"""Turn chat-completion chunks into events and assemble the final Completion.

Pure data handling, no I/O: the client feeds it decoded JSON chunks.
"""

from __future__ import annotations

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
)


@dataclass
class _PartialToolCall:
    id: str | None = None
    name: str = ""
    arguments: list[str] = field(default_factory=list)


class StreamAssembler:
    """Accumulates one streamed response; tool calls are keyed by their `index`."""

    def __init__(self) -> None:
        self._content: list[str] = []
        self._reasoning: list[str] = []
        self._calls: dict[int, _PartialToolCall] = {}
        self.finish_reason: str | None = None
        self.usage: Usage | None = None
        self.model = ""

    def feed(self, chunk: Any) -> Iterator[StreamEvent]:
        """Absorb one decoded chunk and yield the deltas it carried."""
        if not isinstance(chunk, Mapping):
            raise ProtocolError(f"expected a JSON object in the stream, got {type(chunk).__name__}")
        if isinstance(chunk.get("error"), Mapping):
            message = chunk["error"].get("message") or "unknown error"
            raise ProtocolError(f"the provider reported an error mid-stream: {message}")
        if isinstance(chunk.get("model"), str):
            self.model = chunk["model"]
        if isinstance(chunk.get("usage"), Mapping):
            self.usage = Usage.from_wire(chunk["usage"])
        for choice in chunk.get("choices") or ():
            if not isinstance(choice, Mapping) or choice.get("index", 0) != 0:
                continue
            yield from self._feed_delta(choice.get("delta") or {})
            if choice.get("finish_reason"):
                self.finish_reason = str(choice["finish_reason"])

    def _feed_delta(self, delta: Mapping[str, Any]) -> Iterator[StreamEvent]:
        reasoning = delta.get("reasoning_content")
        if isinstance(reasoning, str) and reasoning:
            self._reasoning.append(reasoning)
            yield ReasoningDelta(reasoning)
        content = delta.get("content")
        if isinstance(content, str) and content:
            self._content.append(content)
            yield TextDelta(content)
        for fragment in delta.get("tool_calls") or ():
            yield self._feed_tool_fragment(fragment)

    def _feed_tool_fragment(self, fragment: Any) -> ToolCallDelta:
        if not isinstance(fragment, Mapping) or not isinstance(fragment.get("index", 0), int):
            raise ProtocolError(f"malformed tool call fragment: {str(fragment)[:200]}")
        index = fragment.get("index", 0)
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
        )


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
