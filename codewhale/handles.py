"""The handle store: big payloads kept out of the context, read back by projection.

A var_handle names a payload (`session_id/name`) and describes it; `handle_read`
returns a slice, a line range, counts, a JSONPath query or a description of it.

Costs are kept off the hot paths:
- an in-memory value is described once, at `put`;
- a file (a child transcript that keeps growing) is folded into a hash and two
  indexes (line starts, and byte/char anchors every 64 KB) only as new bytes are
  appended, so describing it after each appended line costs the new bytes, and a
  slice or line range seeks to the nearest anchor instead of reading the file;
- `read_async` (what the handle_read tool calls) runs projections in a thread,
  and a JSONPath query over a large payload in a separate process
  (codewhale.handles_worker): `json.loads` of megabytes holds the GIL throughout,
  which a thread cannot hide from the event loop.
"""

from __future__ import annotations

import asyncio
import bisect
import codecs
import hashlib
import json
import os
import re
import threading
from array import array
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

DEFAULT_MAX_CHARS = 12_000
HARD_MAX_CHARS = 50_000
PREVIEW_CHARS = 160
PROJECTIONS = ("slice", "range", "count", "jsonpath", "introspect")
# A file is indexed and read in pieces of this size; an anchor is kept at least this far
# apart, so a slice decodes at most this much before the characters it returns.
CHUNK_BYTES = 64 * 1024
# From this many characters a JSONPath query runs in the worker process: below it,
# json.loads holds the GIL for only a few milliseconds, less than starting a request.
WORKER_MIN_CHARS = 512_000

PROJECTION_HELP = (
    "handle_read needs exactly one projection: "
    'slice {"start": 0, "end": 2000, "unit": "chars"|"lines"} (0-based, end exclusive), '
    'range {"start": 1, "end": 40} (1-based inclusive lines), '
    '"count": true, '
    '"jsonpath": "$.items[0:3]" (JSON payloads, RFC 9535), '
    '"introspect": true. '
    'Example: {"handle": "sess/tool_output_1", "range": {"start": 1, "end": 50}}'
)

# Exactly the boundaries str.splitlines() uses, so in-memory text keeps its line numbering.
_LINE_BREAK = re.compile("\r\n|[\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")
_NEWLINE_BYTE = re.compile(b"\n")
_NEWLINE = re.compile("\n")


class HandleError(ValueError):
    """A bad handle reference or projection; the message tells the model how to fix it."""


def json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "str"
    if isinstance(value, list | tuple):
        return "list"
    if isinstance(value, Mapping):
        return "dict"
    raise HandleError(f"cannot store a {type(value).__name__} in a handle")


class _TextView:
    """A consistent snapshot of a payload's text: its length, a reader and its lines."""

    def __init__(
        self,
        chars: int,
        read: Callable[[int, int], str],
        line_index: Callable[[], tuple[Sequence[int], int]],
    ) -> None:
        self.chars = chars
        self.read = read  # chars [start, stop), stop <= chars
        self._line_index = line_index
        self._lines: tuple[Sequence[int], int] | None = None

    def _starts(self) -> tuple[Sequence[int], int]:
        # Char offsets of line starts; only the first `count` entries belong to this
        # snapshot. Asked for only by line-based projections (in-memory text builds it
        # on first use).
        if self._lines is None:
            self._lines = self._line_index()
        return self._lines

    def bound(self, index: int) -> int:
        """Start of line `index` (0-based); the end of the text past the last line."""
        starts, count = self._starts()
        return starts[index] if index < count else self.chars

    @property
    def line_count(self) -> int:
        # Same rule as str.splitlines(): a trailing line without a break still counts.
        starts, count = self._starts()
        return count - 1 + (1 if self.chars > starts[count - 1] else 0)


class _ValueEntry:
    """An in-memory value, described once: it never changes after `put`."""

    path = None

    def __init__(self, session_id: str, name: str, value: Any) -> None:
        self.session_id = session_id
        self.name = name
        self.kind = json_type(value)
        self.value = value
        # Non-string values are read through their JSON text; keep it, or every slice
        # of a big dict would serialise it again.
        self.text = value if isinstance(value, str) else _dumps(value)
        # surrogatepass: text decoded with surrogateescape must not make `put` fail.
        encoded = self.text.encode("utf-8", "surrogatepass")
        self.nbytes = len(encoded)
        sized = isinstance(value, list | tuple | Mapping | str)
        self._description = {
            "kind": "var_handle",
            "session_id": session_id,
            "name": name,
            "type": self.kind,
            "length": len(value) if sized else len(self.text),
            "repr_preview": self.text[:PREVIEW_CHARS],
            "sha256": hashlib.sha256(encoded).hexdigest(),
        }
        self._line_starts: array | None = None
        self._lock = threading.Lock()

    def describe(self) -> dict[str, Any]:
        return dict(self._description)

    def view(self) -> _TextView:
        text = self.text
        return _TextView(len(text), lambda a, b: text[a:b], self._line_index)

    def _line_index(self) -> tuple[Sequence[int], int]:
        with self._lock:  # built once, on the first line-based read
            if self._line_starts is None:
                starts = array("q", [0])
                starts.extend(match.end() for match in _LINE_BREAK.finditer(self.text))
                self._line_starts = starts
            return self._line_starts, len(self._line_starts)

    def counts(self) -> dict[str, Any]:
        if self.kind != "str":
            value = self.value
            length = len(value) if isinstance(value, list | tuple | Mapping) else None
            return {"json_type": self.kind, "length": length, "bytes": self.nbytes}
        return {"chars": len(self.text), "lines": self.view().line_count, "bytes": self.nbytes}


class _Anchors:
    """Places where decoding a file can start afresh, as parallel byte/char offsets.

    Every line start is one (right after b"\\n" no multi-byte sequence is pending), and
    one more is kept per CHUNK_BYTES so that a slice inside a long line seeks close to
    it. The arrays only grow, so a snapshot's first entries never change under a reader.
    """

    def __init__(self) -> None:
        self.line_bytes = array("q", [0])
        self.line_chars = array("q", [0])
        self.chunk_bytes = array("q", [0])
        self.chunk_chars = array("q", [0])

    def nearest(self, char: int, lines: int, chunks: int) -> tuple[int, int]:
        """The (byte, char) anchor at or before `char` among the first lines/chunks."""
        line = bisect.bisect_right(self.line_chars, char, 0, lines) - 1
        chunk = bisect.bisect_right(self.chunk_chars, char, 0, chunks) - 1
        return max(
            (self.line_bytes[line], self.line_chars[line]),
            (self.chunk_bytes[chunk], self.chunk_chars[chunk]),
        )


class _FileEntry:
    """A text file that may keep growing (JSONL transcripts): indexed as it grows.

    `length` is in characters of the UTF-8 text (invalid bytes count as one U+FFFD each,
    as when decoding with errors="replace"); a multi-byte character whose last bytes are
    not written yet is counted once it is complete. `sha256` covers the bytes on disk.
    A file that shrinks or is replaced by another file is indexed again from the start.
    """

    kind = "str"
    value = None

    def __init__(self, session_id: str, name: str, path: Path) -> None:
        self.session_id = session_id
        self.name = name
        self.path = path
        self._lock = threading.Lock()
        self._reset(None)

    def _reset(self, identity: tuple[int, int] | None) -> None:
        self._identity = identity
        self._bytes = 0  # bytes folded into the hash and the anchors
        self._chars = 0  # characters decoded from them
        self._hash = hashlib.sha256()
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self._preview = ""
        self._anchors = _Anchors()

    def _catch_up(self) -> None:
        """Fold the bytes appended since the last call in; call with the lock held."""
        try:
            stat = os.stat(self.path)
        except FileNotFoundError:  # a transcript is described before its first line
            if self._identity is not None:
                self._reset(None)
            return
        identity = (stat.st_dev, stat.st_ino)
        if identity != self._identity or stat.st_size < self._bytes:
            self._reset(identity)
        if stat.st_size == self._bytes:
            return
        with open(self.path, "rb") as handle:
            handle.seek(self._bytes)
            remaining = stat.st_size - self._bytes
            while remaining > 0 and (chunk := handle.read(min(CHUNK_BYTES, remaining))):
                remaining -= len(chunk)
                self._fold(chunk)

    def _fold(self, chunk: bytes) -> None:
        anchors = self._anchors
        clean = self._bytes - len(self._decoder.getstate()[0])  # before a split character
        if clean - anchors.chunk_bytes[-1] >= CHUNK_BYTES:
            anchors.chunk_bytes.append(clean)
            anchors.chunk_chars.append(self._chars)
        text = self._decoder.decode(chunk)
        self._hash.update(chunk)
        # A b"\n" is never part of a multi-byte sequence, nor swallowed by "replace", so
        # the k-th newline byte of the chunk is the k-th "\n" of its decoded text.
        anchors.line_bytes.extend(self._bytes + m.end() for m in _NEWLINE_BYTE.finditer(chunk))
        anchors.line_chars.extend(self._chars + m.end() for m in _NEWLINE.finditer(text))
        if len(self._preview) < PREVIEW_CHARS:
            self._preview += text[: PREVIEW_CHARS - len(self._preview)]
        self._bytes += len(chunk)
        self._chars += len(text)

    def describe(self) -> dict[str, Any]:
        with self._lock:
            self._catch_up()
            return {
                "kind": "var_handle",
                "session_id": self.session_id,
                "name": self.name,
                "type": "str",
                "length": self._chars,
                "repr_preview": self._preview,
                "sha256": self._hash.copy().hexdigest(),
            }

    def snapshot(self) -> tuple[_TextView, int]:
        """A view of the file as indexed now, and its size in bytes."""
        with self._lock:
            self._catch_up()
            anchors, size, chars = self._anchors, self._bytes, self._chars
            lines, chunks = len(anchors.line_chars), len(anchors.chunk_chars)

        def read(start: int, stop: int) -> str:
            position, at = anchors.nearest(start, lines, chunks)
            return _decode_range(self.path, position, size, start - at, stop - start)

        return _TextView(chars, read, lambda: (anchors.line_chars, lines)), size

    def view(self) -> _TextView:
        return self.snapshot()[0]

    def counts(self) -> dict[str, Any]:
        view, size = self.snapshot()
        return {"chars": view.chars, "lines": view.line_count, "bytes": size}


def _decode_range(path: Path, position: int, size: int, skip: int, wanted: int) -> str:
    """`wanted` chars after the first `skip` chars decoded from byte `position` on.

    Reads only as far as needed (and never past `size`, the indexed length).
    """
    if wanted <= 0:
        return ""
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    pieces = []
    with open(path, "rb") as handle:
        handle.seek(position)
        remaining = size - position
        while wanted > 0 and remaining > 0:
            chunk = handle.read(min(CHUNK_BYTES, remaining))
            if not chunk:
                break
            remaining -= len(chunk)
            text = decoder.decode(chunk)
            if skip:
                dropped = min(skip, len(text))
                text, skip = text[dropped:], skip - dropped
            pieces.append(text[:wanted])
            wanted -= len(pieces[-1])
    return "".join(pieces)


_Entry = _ValueEntry | _FileEntry


class HandleStore:
    """All handles of one process; thread-safe because tools run concurrently."""

    def __init__(self) -> None:
        self._entries: dict[tuple[str, str], _Entry] = {}
        self._counters: dict[tuple[str, str], int] = {}
        self._lock = threading.Lock()

    def next_name(self, session_id: str, prefix: str) -> str:
        """A fresh name like `tool_output_3` within the session."""
        with self._lock:
            count = self._counters.get((session_id, prefix), 0) + 1
            self._counters[(session_id, prefix)] = count
        return f"{prefix}_{count}"

    def put(self, session_id: str, name: str, value: Any) -> dict[str, Any]:
        entry = _ValueEntry(session_id, name, value)
        with self._lock:
            self._entries[(session_id, name)] = entry
        return entry.describe()

    def put_file(self, session_id: str, name: str, path: Path) -> dict[str, Any]:
        """Register a text file (e.g. a JSONL transcript) that may keep growing.

        Registering the same file again (each sub-agent projection does) keeps its
        index, so the new description costs only the bytes appended since.
        """
        path = Path(path)
        with self._lock:
            entry = self._entries.get((session_id, name))
            if not isinstance(entry, _FileEntry) or entry.path != path:
                entry = _FileEntry(session_id, name, path)
                self._entries[(session_id, name)] = entry
        return entry.describe()

    def describe(self, entry: _Entry) -> dict[str, Any]:
        return entry.describe()

    def resolve(self, ref: Any) -> _Entry:
        """Find a handle by var_handle object or `session_id/name` string."""
        if isinstance(ref, Mapping):
            key = (str(ref.get("session_id", "")), str(ref.get("name", "")))
        elif isinstance(ref, str) and "/" in ref:
            session_id, _, name = ref.rpartition("/")
            key = (session_id, name)
        else:
            raise HandleError(
                "handle must be a var_handle object or a 'session_id/name' string, "
                f"got {str(ref)[:80]!r}"
            )
        with self._lock:
            entry = self._entries.get(key)
        if entry is None:
            raise HandleError(f"no handle named '{key[0]}/{key[1]}'")
        return entry

    def read(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """Run one `handle_read` call here and now (blocking; see `read_async`)."""
        entry, projection, limit = self._request(arguments)
        return _project(entry, projection, arguments, limit, worker=False)

    async def read_async(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """Run one `handle_read` call without blocking the event loop.

        Everything runs in a thread; a JSONPath query over a large payload goes on
        from that thread to the worker process and waits there for its answer.
        """
        entry, projection, limit = self._request(arguments)
        return await asyncio.to_thread(_project, entry, projection, arguments, limit, worker=True)

    def _request(self, arguments: Mapping[str, Any]) -> tuple[_Entry, str, int]:
        entry = self.resolve(arguments.get("handle"))
        given = [name for name in PROJECTIONS if arguments.get(name) not in (None, False)]
        if len(given) != 1:
            raise HandleError(PROJECTION_HELP)
        return entry, given[0], _max_chars(arguments.get("max_chars"))


def _project(
    entry: _Entry, projection: str, arguments: Mapping[str, Any], limit: int, *, worker: bool
) -> dict[str, Any]:
    reply: dict[str, Any] = {
        "handle": f"{entry.session_id}/{entry.name}",
        "projection": projection,
    }
    if projection == "count":
        return {**reply, **entry.counts()}
    if projection == "introspect":
        return {**reply, **_introspect(entry)}
    if projection == "jsonpath":
        shown, total = _jsonpath(entry, arguments["jsonpath"], limit, worker=worker)
    else:
        view = entry.view()
        if projection == "slice":
            begin, stop = _slice_bounds(view, arguments["slice"])
        else:
            begin, stop = _range_bounds(view, arguments["range"])
        total = max(stop - begin, 0)
        shown = view.read(begin, min(stop, begin + limit))
    return {
        **reply,
        "content": shown,
        "truncated": total > limit,
        "shown_chars": len(shown),
        "omitted_chars": max(total - limit, 0),
    }


def _max_chars(value: Any) -> int:
    if value is None:
        return DEFAULT_MAX_CHARS
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise HandleError("max_chars must be a positive integer")
    return min(value, HARD_MAX_CHARS)


def _int_field(spec: Mapping[str, Any], key: str, default: int | None = None) -> int | None:
    value = spec.get(key, default)
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise HandleError(f"{key} must be a non-negative integer, got {value!r}")
    return value


def _slice_bounds(view: _TextView, spec: Any) -> tuple[int, int]:
    if not isinstance(spec, Mapping):
        raise HandleError('slice must be an object like {"start": 0, "end": 100}')
    start = _int_field(spec, "start", 0) or 0
    end = _int_field(spec, "end")
    unit = spec.get("unit", "chars")
    if unit == "lines":
        return _line_bounds(view, start, end)
    if unit != "chars":
        raise HandleError("slice unit must be 'chars' or 'lines'")
    stop = view.chars if end is None else min(end, view.chars)
    return min(start, view.chars), stop


def _range_bounds(view: _TextView, spec: Any) -> tuple[int, int]:
    if not isinstance(spec, Mapping) or "start" not in spec:
        raise HandleError('range must be an object like {"start": 1, "end": 40} (1-based lines)')
    start = _int_field(spec, "start") or 0
    end = _int_field(spec, "end")
    if start < 1 or (end is not None and end < start):
        raise HandleError("range needs 1 <= start <= end (1-based, inclusive line numbers)")
    return _line_bounds(view, start - 1, end)


def _line_bounds(view: _TextView, start: int, end: int | None) -> tuple[int, int]:
    """Char bounds of lines [start, end) (0-based), clamped like a list slice."""
    last = view.line_count  # index of the end-of-text bound
    begin = view.bound(min(start, last))
    stop = view.bound(min(end, last)) if end is not None else view.chars
    return begin, stop


def _introspect(entry: _Entry) -> dict[str, Any]:
    info = entry.describe()
    details: dict[str, Any] = {
        "type": info["type"],
        "length": info["length"],
        "sha256": info["sha256"],
        "preview": info["repr_preview"],
    }
    if isinstance(entry.value, Mapping):
        details["keys"] = list(entry.value)[:50]
    if entry.kind == "str":
        details["lines"] = entry.view().line_count
    return details


# -- JSONPath: the same functions run here and in the worker process ---------------------


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, indent=2)


def compile_jsonpath(expression: Any) -> Any:
    import jsonpath_rfc9535

    if not isinstance(expression, str):
        raise HandleError("jsonpath must be a string such as '$.items[0]'")
    try:
        return jsonpath_rfc9535.compile(expression)
    except jsonpath_rfc9535.JSONPathError as error:
        raise HandleError(f"invalid JSONPath {expression!r}: {error}") from None


def parse_document(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        raise HandleError(
            "this handle holds plain text, not JSON; use slice or range instead"
        ) from None
    except RecursionError:
        raise HandleError("this JSON is nested too deeply to query") from None


def run_jsonpath(expression: str, document: Any, limit: int) -> tuple[str, int]:
    """The matches as an indented JSON list: its first `limit` chars and its full length.

    The list is encoded piece by piece, so a query matching most of a large document
    (`$..*`) never holds its whole JSON text; the pieces are exactly json.dumps's.
    """
    import jsonpath_rfc9535

    query = compile_jsonpath(expression)
    try:
        matches = [node.value for node in query.find(document)]
    except jsonpath_rfc9535.JSONPathError as error:
        raise HandleError(f"invalid JSONPath {expression!r}: {error}") from None
    encoder = json.JSONEncoder(ensure_ascii=False, indent=2)
    shown: list[str] = []
    kept = total = 0
    for piece in encoder.iterencode(matches):
        total += len(piece)
        if kept < limit:
            shown.append(piece[: limit - kept])
            kept += len(shown[-1])
    return "".join(shown), total


def read_file_text(path: str | Path, size: int) -> str:
    """The first `size` bytes of a file as text, decoded as file handles are."""
    with open(path, "rb") as handle:
        return handle.read(size).decode("utf-8", errors="replace")


def _jsonpath(entry: _Entry, expression: Any, limit: int, *, worker: bool) -> tuple[str, int]:
    compile_jsonpath(expression)  # a bad expression fails before any payload moves
    if isinstance(entry, _FileEntry):
        size = entry.snapshot()[1]
        if worker and size >= WORKER_MIN_CHARS:
            from codewhale.handles_worker import jsonpath_in_worker

            return jsonpath_in_worker(expression, limit, path=entry.path, size=size)
        return run_jsonpath(expression, parse_document(read_file_text(entry.path, size)), limit)
    if worker and len(entry.text) >= WORKER_MIN_CHARS and entry.kind in ("str", "list", "dict"):
        from codewhale.handles_worker import jsonpath_in_worker

        return jsonpath_in_worker(expression, limit, text=entry.text)
    document = parse_document(entry.text) if entry.kind == "str" else entry.value
    return run_jsonpath(expression, document, limit)
