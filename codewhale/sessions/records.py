"""What a session file's lines may hold, checked as they are loaded.

A message is sent to the provider on every request of a resumed session, so only the
shapes the engine writes pass: a record of the wrong type (`5`, `{"role": 7}`, a
content that is a number) is skipped, never sent. Keys the engine does not write are
dropped from what is sent (a newer version's extras) but left in the file.

The shapes are checked by hand, strictly (a number is not a string, `true` is not a
time): four message shapes and a header are a few lines of checks, where a validation
library costs a `--continue` about 100 ms of imports and schema building before the
first line is read (the early history is drawn from here).
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

ROLES = ("system", "user", "assistant", "tool")


class _Invalid(Exception):
    """A value that is not the shape asked for: what is wrong, and where (the keys and
    indexes leading to it, added as the error passes up through them)."""

    def __init__(self, what: str) -> None:
        super().__init__(what)
        self.what = what
        self.path: list[str] = []

    def at(self, key: str) -> _Invalid:
        self.path.insert(0, key)
        return self

    def __str__(self) -> str:
        return f"{'.'.join(self.path)}: {self.what}" if self.path else self.what


# A check takes a value and returns it as it may be sent (the value itself when it has
# nothing to drop) or raises _Invalid. Where it sits is only spelled out on a failure:
# a resumed session checks every message before its history is drawn.
Check = Callable[[Any], Any]


def _text(value: Any) -> str:
    if type(value) is not str:
        raise _Invalid("should be a string")
    return value


def _text_or_null(value: Any) -> str | None:
    return None if value is None else _text(value)


def _number(value: Any) -> float:
    if type(value) not in (int, float):
        raise _Invalid("should be a number")
    return value  # type: ignore[no-any-return]


def _exactly(expected: str) -> Check:
    def check(value: Any) -> str:
        if value != expected or type(value) is not str:
            raise _Invalid(f"should be {expected!r}")
        return value

    return check


def _list_of(item: Check) -> Check:
    def check(value: Any) -> list[Any]:
        if type(value) is not list:
            raise _Invalid("should be a list")
        items = []
        for index, entry in enumerate(value):
            try:
                items.append(item(entry))
            except _Invalid as problem:
                raise problem.at(str(index)) from None
        same = all(map(operator.is_, items, value))
        return value if same else items

    return check


def _object(required: dict[str, Check], optional: dict[str, Check] | None = None) -> Check:
    """A JSON object with these keys; any other key is dropped."""
    fields = [(key, check, True) for key, check in required.items()]
    fields += [(key, check, False) for key, check in (optional or {}).items()]
    known = {key for key, _, _ in fields}

    def check(value: Any) -> dict[str, Any]:
        if type(value) is not dict:
            raise _Invalid("should be a JSON object")
        kept: dict[str, Any] = {}
        same = value.keys() <= known
        for key, field, needed in fields:
            if key not in value:
                if needed:
                    raise _Invalid("is missing").at(key)
                continue
            given = value[key]
            try:
                kept[key] = field(given)
            except _Invalid as problem:
                raise problem.at(key) from None
            same = same and kept[key] is given
        return value if same else kept

    return check


_TOOL_CALL = _object(
    {
        "id": _text,
        "type": _exactly("function"),
        "function": _object({"name": _text, "arguments": _text}),
    }
)
_MESSAGES: dict[str, Check] = {
    "system": _object({"role": _text, "content": _text}),
    "user": _object({"role": _text, "content": _text}),
    "assistant": _object(
        {"role": _text, "content": _text_or_null},
        {"reasoning_content": _text, "tool_calls": _list_of(_TOOL_CALL)},
    ),
    "tool": _object({"role": _text, "tool_call_id": _text, "content": _text}),
}
_HEADER = _object(
    {
        "kind": _exactly("session"),
        "id": _text,
        "workspace": _text,
        "created_at": _number,
        "model": _text,
    }
)


def _message(value: Any) -> dict[str, Any]:
    if type(value) is not dict:
        raise _Invalid("not a JSON object")
    role = value.get("role")
    if role is None:
        raise _Invalid("no role")
    if type(role) is not str or role not in _MESSAGES:
        raise _Invalid(f"{role!r} is not one of {', '.join(ROLES)}").at("role")
    try:
        message: dict[str, Any] = _MESSAGES[role](value)
    except _Invalid as problem:
        raise problem.at(role) from None
    return message


def valid_message(value: Any) -> dict[str, Any] | None:
    """`value` as a message fit to send (itself when it has nothing extra), or None."""
    try:
        return _message(value)
    except _Invalid:
        return None


def message_problem(value: Any) -> str:
    """Why `value` is not a message, in a few words (for the damage warning)."""
    try:
        _message(value)
    except _Invalid as problem:
        return str(problem)
    return "valid"


def valid_header(value: Any) -> bool:
    try:
        _HEADER(value)
    except _Invalid:
        return False
    return True
