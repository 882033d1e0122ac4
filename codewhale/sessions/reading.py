"""Reading a session file back, line by line, and noting each damaged line.

Damage is anything the writer would not have written: a line that is not JSON (torn by
a crash, hit by a stray byte), bytes that are not UTF-8, a record of the wrong shape, a
header that is not one. Damaged lines are skipped and listed; the rest is kept as it
was, so the store can rewrite the file from `kept` after setting the original aside.
"""

from __future__ import annotations

import calendar
import gc
import json
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from codewhale.sessions.records import message_problem, valid_header, valid_message

# A message's line as SessionWriter writes it: this, the message, "}".
MESSAGE_LINE = '{"kind": "message", "message": '
# The system prompt names the workspace on a line of its own (engine/prompt.py): how a
# session whose header line is damaged is still found by `--continue` in its workspace.
WORKSPACE_FACT = "- Workspace: "
_NESTED = (dict, list)
RECORD_KINDS = frozenset({"message", "clear", "rewind", "event", "meter"})
# What a tool call whose result never reached the file is answered with on load.
LOST_RESULT = (
    "[no result: it was lost, as the session file was damaged or the app stopped while "
    "the call ran; run it again if it is still needed]"
)


@dataclass
class ParsedSession:
    header: dict[str, Any]  # as written, or made up from the other lines (`recovered`)
    recovered: bool
    messages: list[dict[str, Any]] = field(default_factory=list)
    # Per message, its size as compact JSON in bytes (engine/compaction.py encoded_size),
    # from the line it was read from; None where the line cannot tell (a summary).
    sizes: list[int | None] = field(default_factory=list)
    meter: dict[str, Any] | None = None
    title: str = ""
    # "line N: what is wrong", one per damaged line, in file order.
    damage: list[str] = field(default_factory=list)
    # The undamaged record lines after the header, as read: what a repair writes back.
    kept: list[str] = field(default_factory=list)


def read_session(path: Path) -> ParsedSession | None:
    """The session in the file at `path`; None if nothing in it is a session's."""
    lines, undecodable = _decode(path.read_bytes())
    try:
        first = json.loads(lines[0])
    except ValueError:
        first = None
    parsed = ParsedSession(header=first, recovered=False) if valid_header(first) else None
    body = list(enumerate(lines[1:], start=2))
    if parsed is None:
        parsed = ParsedSession(header={}, recovered=True, damage=["line 1: the header is damaged"])
        if isinstance(first, dict) and first.get("kind") in RECORD_KINDS:
            body.insert(0, (1, lines[0]))  # the header is gone, its first record is not
    for number, line, record in _records(body):
        problem = _apply(parsed, line, record)
        if problem is not None:
            parsed.damage.append(f"line {number}: {problem}")
            continue
        parsed.kept.append(line)  # with U+FFFD for bytes that were not UTF-8
        if number in undecodable:
            parsed.damage.append(f"line {number}: bytes that are not UTF-8, read as U+FFFD")
    if parsed.recovered:
        if not parsed.messages:
            return None
        parsed.header = _recovered_header(path, parsed.messages[0])
    _pair_calls_with_results(parsed)
    return parsed


def _pair_calls_with_results(parsed: ParsedSession) -> None:
    """Answer every tool call whose result is missing, and drop results whose call is.

    A damaged line, or a stop while a tool ran, can leave either behind, and providers
    refuse every later request of such a conversation. Only memory is changed: the
    same repair is made again on the next load.
    """
    messages: list[dict[str, Any]] = []
    sizes: list[int | None] = []
    open_calls: list[str] = []

    def answer_open_calls() -> None:
        for call_id in open_calls:
            messages.append({"role": "tool", "tool_call_id": call_id, "content": LOST_RESULT})
            sizes.append(None)
        open_calls.clear()

    for message, size in zip(parsed.messages, parsed.sizes, strict=True):
        if message.get("role") == "tool":
            if message.get("tool_call_id") not in open_calls:
                continue
            open_calls.remove(message["tool_call_id"])
        else:
            answer_open_calls()
            calls = message.get("tool_calls") if message.get("role") == "assistant" else None
            open_calls.extend(str(call.get("id")) for call in calls or ())
        messages.append(message)
        sizes.append(size)
    answer_open_calls()
    parsed.messages, parsed.sizes = messages, sizes


def read_header(path: Path, workspace: str | None = None) -> tuple[dict[str, Any] | None, str]:
    """The file's header if line 1 is one, and its title (the first prompt since the
    last clear), reading no further than the title needs; not even that for another
    workspace's session (`workspace` given)."""
    with path.open(encoding="utf-8", errors="replace") as handle:
        try:
            header = json.loads(handle.readline())
        except ValueError:
            return None, ""
        if not valid_header(header):
            return None, ""
        if workspace is not None and header["workspace"] != workspace:
            return header, ""
        title = ""
        for line in handle:
            if title and '"clear"' not in line and '"rewind"' not in line:
                continue  # only a clear or rewind marker can change the title now
            try:
                title = retitle(title, json.loads(line))
            except ValueError:
                continue
    return header, title


def retitle(title: str, record: Any) -> str:
    """The title after `record`: the first prompt since the last clear marker."""
    if not isinstance(record, dict):
        return title
    if record.get("kind") == "clear":
        return ""  # a cleared conversation is named by what came after
    if record.get("kind") == "rewind" and isinstance(record.get("title"), str):
        return str(record["title"])[:80]  # its first prompt may be among those dropped
    if title or record.get("kind") != "message":
        return title
    message = valid_message(record.get("message"))
    return message["content"][:80] if message and message["role"] == "user" else title


def _decode(raw: bytes) -> tuple[list[str], set[int]]:
    """The file's lines, and the numbers of those with bytes that are not UTF-8."""
    try:
        return raw.decode("utf-8").split("\n"), set()
    except UnicodeDecodeError:
        pass
    lines, undecodable = [], set()
    for number, chunk in enumerate(raw.split(b"\n"), start=1):
        try:
            lines.append(chunk.decode("utf-8"))
        except UnicodeDecodeError:
            lines.append(chunk.decode("utf-8", errors="replace"))
            undecodable.add(number)
    return lines, undecodable


def _apply(parsed: ParsedSession, line: str, record: Any) -> str | None:
    """Take one record into `parsed`; what is wrong with it, or None."""
    if record is None:
        return "unreadable record skipped (likely a crash mid-write)"
    if not isinstance(record, dict):
        return f"not a record ({type(record).__name__})"
    kind = record.get("kind")
    if kind == "message":
        message = valid_message(record.get("message"))
        if message is None:
            return f"a message of the wrong shape ({message_problem(record.get('message'))})"
        parsed.title = retitle(parsed.title, record)
        parsed.messages.append(message)
        parsed.sizes.append(_message_size(line, record) if message is record["message"] else None)
    elif kind == "clear":
        parsed.title = ""
        del parsed.messages[1:], parsed.sizes[1:]
    elif kind == "rewind":
        drop = record.get("drop")
        if isinstance(drop, bool) or not isinstance(drop, int):
            return "unusable rewind record skipped"
        if not 0 <= drop < len(parsed.messages):
            return "unusable rewind record skipped"
        del parsed.messages[len(parsed.messages) - drop :], parsed.sizes[len(parsed.sizes) - drop :]
        parsed.title = retitle(parsed.title, record)
    elif kind == "event":
        event = record.get("event")
        if not isinstance(event, dict):
            return "an event that is not an object"
        if event.get("type") == "context_compacted" and not _compact(parsed, event):
            return "unusable compaction record skipped"
    elif kind == "meter":
        if not isinstance(record.get("meter"), dict):
            return "usage totals that are not an object"
        parsed.meter = record["meter"]
    elif kind == "session":
        return "a second header"
    # Any other kind is a newer version's: kept in the file, nothing here reads it.
    return None


def _compact(parsed: ParsedSession, event: dict[str, Any]) -> bool:
    """Apply a `context_compacted` event: its summary stands for all but the last `kept`."""
    summary, kept = valid_message(event.get("summary")), event.get("kept")
    messages = parsed.messages
    if summary is None or not isinstance(kept, int) or isinstance(kept, bool):
        return False
    if not 0 <= kept < len(messages):
        return False
    messages[1 : len(messages) - kept] = [summary]
    parsed.sizes[1 : len(parsed.sizes) - kept] = [None]  # the summary is no message line
    return True


def _recovered_header(path: Path, first: dict[str, Any]) -> dict[str, Any]:
    """A header made from what is left: the id is the file's name, the workspace is
    named in the system prompt, the creation time is in the id."""
    workspace = ""
    if first["role"] == "system":
        for fact in first["content"].splitlines():
            if fact.startswith(WORKSPACE_FACT):
                workspace = fact.removeprefix(WORKSPACE_FACT)
                break
    try:
        created = calendar.timegm(time.strptime(path.stem[5:20], "%Y%m%d_%H%M%S"))
    except ValueError:
        created = int(path.stat().st_mtime)
    return {
        "kind": "session",
        "id": path.stem,
        "workspace": workspace,
        "created_at": float(created),
        "model": "",
    }


def _records(numbered: list[tuple[int, str]]) -> Iterator[tuple[int, str, Any]]:
    """(line number, line, its record or None if unreadable) for the non-empty lines.

    One parse of all of them as a JSON array (a long session's lines parsed one by one
    cost a third more); line by line only when that fails, to find the bad lines.
    """
    numbered = [(number, line) for number, line in numbered if line.strip()]
    # Every object parsed lives on (the conversation): the collector, run by the
    # allocations, would only walk them (and the whole heap) again and again meanwhile.
    collecting = gc.isenabled()
    gc.disable()
    try:
        records = json.loads("[" + ",".join(line for _, line in numbered) + "]")
    except ValueError:
        records = None
    finally:
        if collecting:
            gc.enable()
    if records is not None and len(records) == len(numbered):
        for (number, line), record in zip(numbered, records, strict=True):
            yield number, line, record
        return
    for number, line in numbered:
        try:
            yield number, line, json.loads(line)
        except ValueError:
            yield number, line, None


def _message_size(line: str, record: dict[str, Any]) -> int | None:
    """The record's message as compact JSON, in bytes, from the line it was read from.

    The line holds it with json.dumps' default separators (", " and ": "): one space
    more per separator than the compact form, which the message's own structure counts.
    """
    if len(record) != 2 or not (line.startswith(MESSAGE_LINE) and line.endswith("}")):
        return None  # not as SessionWriter writes it
    size = len(line) if line.isascii() else len(line.encode("utf-8"))
    size -= len(MESSAGE_LINE) + 1
    message = record["message"]
    return size - _separators(message) if isinstance(message, _NESTED) else size


def _separators(value: dict[str, Any] | list[Any]) -> int:
    """How many separators JSON puts in `value`: one per key, one between items."""
    if isinstance(value, dict):
        count = 2 * len(value) - 1 if value else 0
        items: Iterable[Any] = value.values()
    else:
        count = len(value) - 1 if value else 0
        items = value
    for item in items:
        if isinstance(item, _NESTED):
            count += _separators(item)
    return count
