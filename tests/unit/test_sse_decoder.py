"""The SSE decoder gives the same events however the body's bytes are split."""

from __future__ import annotations

from codewhale.providers.stream import SSEDecoder

# CRLF, LF and lone CR line ends, a BOM, a comment, a field-only event, multi-line data
# and multi-byte UTF-8: every place a split can fall awkwardly.
STREAM = (
    "\ufeff: keep-alive\r\n\r\n"
    "event: message\r\ndata: caf\u00e9\r\n\r\n"
    "data: one\ndata: two \U0001f433\n\n"
    "id: 7\r\r"
    "data: last\r\r\n"
).encode()
EVENTS = ["caf\u00e9", "one\ntwo \U0001f433", "", "last"]


def decode(pieces: list[bytes]) -> list[str]:
    decoder = SSEDecoder()
    return [event for piece in pieces for event in decoder.feed(piece)]


def test_the_whole_body_at_once_gives_each_event():
    assert decode([STREAM]) == EVENTS


def test_a_body_split_at_any_two_places_gives_the_same_events():
    for first in range(len(STREAM) + 1):
        for second in range(first, len(STREAM) + 1):
            pieces = [STREAM[:first], STREAM[first:second], STREAM[second:]]
            assert decode(pieces) == EVENTS, (first, second)


def test_a_body_fed_byte_by_byte_gives_the_same_events():
    assert decode([bytes([byte]) for byte in STREAM]) == EVENTS


def test_a_line_longer_than_every_read_is_one_event_when_it_ends():
    """A whole answer or tool argument may come in one delta: megabytes on one line."""
    value = "x" * 5_000_000
    body = f"data: {value}\r\n\r\n".encode()
    pieces = [body[i : i + 65_536] for i in range(0, len(body), 65_536)]
    decoder = SSEDecoder()
    assert [decoder.feed(piece) for piece in pieces[:-1]] == [[]] * (len(pieces) - 1)
    assert decoder.feed(pieces[-1]) == [value]


def test_a_cr_at_the_end_of_a_read_ends_its_line_only_once_the_next_read_says_so():
    decoder = SSEDecoder()
    assert decoder.feed(b"data: a\r") == []
    assert decoder.feed(b"\n") == []  # CRLF: one line end, not two
    assert decoder.feed(b"data: b\r") == []
    assert decoder.feed(b"\r") == []  # a blank line, unless an LF follows
    assert decoder.feed(b"data: c\r") == ["a\nb"]  # none did: the event ended
    assert decoder.feed(b"more") == []  # a lone CR ended "data: c"; "more" starts a line
    assert decoder.feed(b"\n\n") == ["c"]  # "more" is no field: the event holds "c"
