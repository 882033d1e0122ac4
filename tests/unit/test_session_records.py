"""The shapes a session file's lines may hold: strict, extras dropped, problems named."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

from codewhale.sessions.records import message_problem, valid_header, valid_message

CALL = {"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}
HEADER = {"kind": "session", "id": "s1", "workspace": "/w", "created_at": 1.5, "model": "m"}


@pytest.mark.parametrize(
    "message",
    [
        {"role": "system", "content": "You are CodeWhale."},
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": None, "tool_calls": [CALL]},
        {"role": "assistant", "content": "done", "reasoning_content": "why", "tool_calls": []},
        {"role": "tool", "tool_call_id": "c1", "content": "1 line"},
    ],
)
def test_a_message_the_engine_writes_passes_as_the_same_object(message: dict[str, Any]) -> None:
    assert valid_message(message) is message
    assert message_problem(message) == "valid"


def test_keys_the_engine_does_not_write_are_dropped_at_every_level_but_not_from_the_input() -> None:
    call = {**CALL, "index": 0, "function": {**CALL["function"], "extra": 2}}  # type: ignore[dict-item]
    message = {"role": "assistant", "content": None, "tool_calls": [call], "name": "x"}
    assert valid_message(message) == {"role": "assistant", "content": None, "tool_calls": [CALL]}
    assert message["name"] == "x" and call["index"] == 0


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        (5, "not a JSON object"),
        ({}, "no role"),
        ({"role": 7}, "role: 7 is not one of system, user, assistant, tool"),
        (
            {"role": "bot", "content": "x"},
            "role: 'bot' is not one of system, user, assistant, tool",
        ),
        ({"role": "user", "content": 5}, "user.content: should be a string"),
        ({"role": "user"}, "user.content: is missing"),
        ({"role": "system", "content": None}, "system.content: should be a string"),
        ({"role": "tool", "content": "x"}, "tool.tool_call_id: is missing"),
        (
            {"role": "assistant", "content": None, "tool_calls": "x"},
            "assistant.tool_calls: should be a list",
        ),
        (
            {"role": "assistant", "content": None, "tool_calls": [{**CALL, "id": 1}]},
            "assistant.tool_calls.0.id: should be a string",
        ),
        (
            {"role": "assistant", "content": None, "tool_calls": [{**CALL, "type": "code"}]},
            "assistant.tool_calls.0.type: should be 'function'",
        ),
        ({"role": "assistant", "content": True}, "assistant.content: should be a string"),
    ],
)
def test_a_wrong_shape_is_refused_and_says_where(value: Any, problem: str) -> None:
    assert valid_message(value) is None
    assert message_problem(value) == problem


@pytest.mark.parametrize("created_at", [1, 1.5])
def test_a_header_takes_a_whole_or_fractional_time(created_at: float) -> None:
    assert valid_header({**HEADER, "created_at": created_at})


@pytest.mark.parametrize(
    "header",
    [
        {**HEADER, "created_at": True},
        {**HEADER, "created_at": "1"},
        {**HEADER, "kind": "message"},
        {key: value for key, value in HEADER.items() if key != "model"},
        [HEADER],
    ],
)
def test_anything_else_is_not_a_header(header: Any) -> None:
    assert not valid_header(header)


def test_reading_records_loads_no_validation_library() -> None:
    """The early history of a `--continue` is read through here before the first frame."""
    probe = "import sys, codewhale.sessions.reading; print('pydantic' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert done.stdout.strip() == "False", done.stderr


def test_a_message_read_from_json_passes_as_the_same_object() -> None:
    """Its size is then taken from its line (sessions/reading.py): no copy, no re-encode."""
    message = json.loads(json.dumps({"role": "assistant", "content": None, "tool_calls": [CALL]}))
    assert valid_message(message) is message
