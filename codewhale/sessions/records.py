"""What a session file's lines may hold, as pydantic validates them on loading.

A message is sent to the provider on every request of a resumed session, so only the
shapes the engine writes pass: a record of the wrong type (`5`, `{"role": 7}`, a
content that is a number) is skipped, never sent. Keys the engine does not write are
dropped from what is sent (a newer version's extras) but left in the file.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, NotRequired

from pydantic import ConfigDict, Field, TypeAdapter, ValidationError, with_config

# pydantic reads TypedDicts from typing_extensions on Python < 3.12.
from typing_extensions import TypedDict

# Strict: a number is not a string here, whatever pydantic would coerce elsewhere.
STRICT = ConfigDict(strict=True)


@with_config(STRICT)
class _Function(TypedDict):
    name: str
    arguments: str


@with_config(STRICT)
class _ToolCall(TypedDict):
    id: str
    type: Literal["function"]
    function: _Function


@with_config(STRICT)
class _SystemMessage(TypedDict):
    role: Literal["system"]
    content: str


@with_config(STRICT)
class _UserMessage(TypedDict):
    role: Literal["user"]
    content: str


@with_config(STRICT)
class _AssistantMessage(TypedDict):
    role: Literal["assistant"]
    content: str | None
    reasoning_content: NotRequired[str]
    tool_calls: NotRequired[list[_ToolCall]]


@with_config(STRICT)
class _ToolMessage(TypedDict):
    role: Literal["tool"]
    tool_call_id: str
    content: str


@with_config(STRICT)
class _Header(TypedDict):
    kind: Literal["session"]
    id: str
    workspace: str
    created_at: float
    model: str


_MESSAGE = TypeAdapter(
    Annotated[
        _SystemMessage | _UserMessage | _AssistantMessage | _ToolMessage,
        Field(discriminator="role"),
    ]
)
_HEADER = TypeAdapter(_Header)


def valid_message(value: Any) -> dict[str, Any] | None:
    """`value` as a message fit to send (itself when it has nothing extra), or None."""
    try:
        message = _MESSAGE.validate_python(value)
    except ValidationError:
        return None
    # Validation keeps the strings themselves (no copy): equal unless keys were dropped.
    return value if message == value else dict(message)


def message_problem(value: Any) -> str:
    """Why `value` is not a message, in a few words (for the damage warning)."""
    try:
        _MESSAGE.validate_python(value)
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        return f"{where}: {first['msg']}" if where else str(first["msg"])
    return "valid"


def valid_header(value: Any) -> bool:
    try:
        _HEADER.validate_python(value)
    except ValidationError:
        return False
    return True
