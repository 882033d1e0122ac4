"""What is written to the terminal when long work ends: nothing, the bell, or an OSC."""

from __future__ import annotations

import pytest

from codewhale.tui import notify
from codewhale.tui.notify import notification

LONG = notify.MIN_SECS


def told(**settings) -> str | None:
    arguments = {
        "notify": "desktop",
        "notify_when": "unfocused",
        "focused": False,
        "elapsed_secs": LONG,
        "title": "CodeWhale: turn completed",
        "body": "Fixed it",
        "term": "xterm-256color",
    }
    return notification(**(arguments | settings))


def test_desktop_is_an_osc_9_notification():
    assert told() == "\x1b]9;CodeWhale: turn completed: Fixed it\a"


@pytest.mark.parametrize("term", ["foot", "foot-extra", "rxvt-unicode-256color"])
def test_terminals_that_want_osc_777_get_it(term):
    assert told(term=term, title="a;b") == "\x1b]777;notify;a,b;Fixed it\a"


def test_the_bell_is_one_bel():
    assert told(notify="bell") == "\a"


def test_off_or_short_work_or_a_focused_terminal_say_nothing():
    assert told(notify="off") is None
    assert told(elapsed_secs=LONG - 0.1) is None
    assert told(focused=True) is None


def test_always_tells_a_focused_terminal_too():
    assert told(focused=True, notify_when="always", notify="bell") == "\a"


def test_model_text_cannot_smuggle_escape_sequences():
    body = "\x1b]0;owned\x07done\x9c\x1b[2J\nsecond line\t\u202eevil"
    sequence = told(body=body)
    assert sequence == "\x1b]9;CodeWhale: turn completed: ]0;owneddone[2J second line evil\a"
    # One OSC: a single ESC at its start and a single BEL at its end.
    assert sequence.count("\x1b") == 1 and sequence.count("\a") == 1


def test_a_long_answer_is_cut():
    sequence = told(body="x" * 1000)
    assert sequence is not None
    assert len(sequence) < 2 * notify.MAX_CHARS and sequence.endswith("…\a")
