"""What the Tasks rows and the quit question show of a model-authored command and its
output: one safe line each, whatever control sequences they carry."""

from __future__ import annotations

from codewhale.runtime.background import TaskSnapshot
from codewhale.tui.task_rows import task_row_text
from codewhale.tui.task_screen import header_text

HOSTILE_COMMAND = "printf '\x1b]0;pwned\x07'\u202e; rm -rf /tmp/x\nsecond line"
HOSTILE_OUTPUT = "\x1b[2J\x1b[31mred\x1b[0m and \u202egnirts"


def snapshot(**changes) -> TaskSnapshot:
    fields = {
        "task_id": "bg_1",
        "command": HOSTILE_COMMAND,
        "requester": "session",
        "elapsed_ms": 61_000,
        "exit_code": None,
        "killed": False,
        "last_line": HOSTILE_OUTPUT,
    }
    return TaskSnapshot(**{**fields, **changes})


def test_a_row_drops_control_and_bidi_characters_and_keeps_two_lines():
    text = task_row_text(snapshot(), 200).plain
    assert "\x1b" not in text and "\x07" not in text and "\u202e" not in text
    head, detail = text.split("\n")
    assert head.startswith("● bg_1 printf") and head.endswith("1m01s")
    assert "red" in detail and detail.endswith("running")


def test_a_row_says_how_a_task_ended():
    assert task_row_text(snapshot(exit_code=0), 60).plain.endswith("exit 0")
    assert task_row_text(snapshot(exit_code=-15, killed=True), 60).plain.endswith("killed")


def test_a_row_fits_its_width():
    for line in task_row_text(snapshot(), 35).plain.split("\n"):
        assert len(line) == 35


def test_the_screen_header_is_one_clean_line():
    header = header_text(snapshot(exit_code=3))
    assert header.startswith("bg_1 · exit 3 · 1m01s · printf")
    assert "\n" not in header and "\x1b" not in header
