"""The handle store: big payloads kept out of the context, read back by projection.

A var_handle names a payload (`session_id/name`) and describes it; `handle_read`
returns a slice, a line range, counts, a JSONPath query or a description of it.
File-backed text (child transcripts) is indexed by line offsets so a read seeks
instead of loading the whole file.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DEFAULT_MAX_CHARS = 12_000
HARD_MAX_CHARS = 50_000
PREVIEW_CHARS = 160
PROJECTIONS = ("slice", "range", "count", "jsonpath", "introspect")

PROJECTION_HELP = (
    "handle_read needs exactly one projection: "
    'slice {"start": 0, "end": 2000, "unit": "chars"|"lines"} (0-based, end exclusive), '
    'range {"start": 1, "end": 40} (1-based inclusive lines), '
    '"count": true, '
    '"jsonpath": "$.items[0:3]" (JSON payloads, RFC 9535), '
    '"introspect": true. '
    'Example: {"handle": "sess/tool_output_1", "range": {"start": 1, "end": 50}}'
)


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


@dataclass
class _Entry:
    session_id: str
    name: str
    value: Any = None
    path: Path | None = None
    _offsets: list[int] = field(default_factory=lambda: [0])
    _indexed_bytes: int = 0

    @property
    def kind(self) -> str:
        return "str" if self.path is not None else json_type(self.value)

    def text(self) -> str:
        if self.path is not None:
            # A transcript handle may be described before its first line is written.
            if not self.path.exists():
                return ""
            return self.path.read_text(encoding="utf-8", errors="replace")
        if isinstance(self.value, str):
            return self.value
        return json.dumps(self.value, ensure_ascii=False, indent=2)

    def line_offsets(self) -> list[int]:
        """Byte offsets of line starts, extended incrementally as the file grows."""
        assert self.path is not None
        size = self.path.stat().st_size if self.path.exists() else 0
        if size > self._indexed_bytes:
            with self.path.open("rb") as handle:
                handle.seek(self._indexed_bytes)
                position = self._indexed_bytes
                for line in handle:
                    position += len(line)
                    if line.endswith(b"\n"):
                        self._offsets.append(position)
                self._indexed_bytes = self._offsets[-1]
        return self._offsets

    def read_lines(self, start: int, end: int | None) -> str:
        """Lines [start, end) by 0-based index, reading only those bytes for files."""
        if self.path is None:
            lines = self.text().splitlines(keepends=True)
            return "".join(lines[start:end])
        offsets = self.line_offsets()
        if not self.path.exists():
            return ""
        size = self.path.stat().st_size
        bounds = [*offsets, size] if offsets[-1] < size else offsets
        last = len(bounds) - 1
        begin = bounds[min(start, last)]
        stop = bounds[min(end, last)] if end is not None else size
        with self.path.open("rb") as handle:
            handle.seek(begin)
            return handle.read(max(stop - begin, 0)).decode("utf-8", errors="replace")

    def line_count(self) -> int:
        if self.path is None:
            return len(self.text().splitlines())
        offsets = self.line_offsets()
        size = self.path.stat().st_size if self.path.exists() else 0
        return len(offsets) - 1 + (1 if size > offsets[-1] else 0)


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
        json_type(value)
        entry = _Entry(session_id, name, value=value)
        with self._lock:
            self._entries[(session_id, name)] = entry
        return self.describe(entry)

    def put_file(self, session_id: str, name: str, path: Path) -> dict[str, Any]:
        """Register a text file (e.g. a JSONL transcript) that may keep growing."""
        entry = _Entry(session_id, name, path=Path(path))
        with self._lock:
            self._entries[(session_id, name)] = entry
        return self.describe(entry)

    def describe(self, entry: _Entry) -> dict[str, Any]:
        text = entry.text()
        value = entry.value
        length = len(value) if isinstance(value, list | tuple | Mapping | str) else len(text)
        if entry.path is not None:
            length = len(text)
        return {
            "kind": "var_handle",
            "session_id": entry.session_id,
            "name": entry.name,
            "type": entry.kind,
            "length": length,
            "repr_preview": text[:PREVIEW_CHARS],
            "sha256": hashlib.sha256(text.encode("utf-8")).hexdigest(),
        }

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
        """Run one `handle_read` call."""
        entry = self.resolve(arguments.get("handle"))
        given = [name for name in PROJECTIONS if arguments.get(name) not in (None, False)]
        if len(given) != 1:
            raise HandleError(PROJECTION_HELP)
        projection = given[0]
        limit = _max_chars(arguments.get("max_chars"))
        handle_ref = f"{entry.session_id}/{entry.name}"
        if projection == "count":
            return {"handle": handle_ref, "projection": "count", **_counts(entry)}
        if projection == "introspect":
            return {"handle": handle_ref, "projection": "introspect", **_introspect(entry, self)}
        if projection == "jsonpath":
            content = _jsonpath(entry, arguments["jsonpath"])
        elif projection == "slice":
            content = _slice(entry, arguments["slice"])
        else:
            content = _range(entry, arguments["range"])
        shown = content[:limit]
        return {
            "handle": handle_ref,
            "projection": projection,
            "content": shown,
            "truncated": len(content) > limit,
            "shown_chars": len(shown),
            "omitted_chars": max(len(content) - limit, 0),
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


def _slice(entry: _Entry, spec: Any) -> str:
    if not isinstance(spec, Mapping):
        raise HandleError('slice must be an object like {"start": 0, "end": 100}')
    start = _int_field(spec, "start", 0) or 0
    end = _int_field(spec, "end")
    unit = spec.get("unit", "chars")
    if unit == "lines":
        return entry.read_lines(start, end)
    if unit != "chars":
        raise HandleError("slice unit must be 'chars' or 'lines'")
    return entry.text()[start:end]


def _range(entry: _Entry, spec: Any) -> str:
    if not isinstance(spec, Mapping) or "start" not in spec:
        raise HandleError('range must be an object like {"start": 1, "end": 40} (1-based lines)')
    start = _int_field(spec, "start") or 0
    end = _int_field(spec, "end")
    if start < 1 or (end is not None and end < start):
        raise HandleError("range needs 1 <= start <= end (1-based, inclusive line numbers)")
    return entry.read_lines(start - 1, end)


def _counts(entry: _Entry) -> dict[str, Any]:
    text = entry.text()
    if entry.path is None and not isinstance(entry.value, str):
        value = entry.value
        length = len(value) if isinstance(value, list | tuple | Mapping) else None
        return {"json_type": entry.kind, "length": length, "bytes": len(text.encode())}
    return {"chars": len(text), "lines": entry.line_count(), "bytes": len(text.encode())}


def _introspect(entry: _Entry, store: HandleStore) -> dict[str, Any]:
    info = store.describe(entry)
    details: dict[str, Any] = {
        "type": info["type"],
        "length": info["length"],
        "sha256": info["sha256"],
        "preview": info["repr_preview"],
    }
    if isinstance(entry.value, Mapping):
        details["keys"] = list(entry.value)[:50]
    if entry.path is not None or isinstance(entry.value, str):
        details["lines"] = entry.line_count()
    return details


def _jsonpath(entry: _Entry, expression: Any) -> str:
    import jsonpath_rfc9535

    if not isinstance(expression, str):
        raise HandleError("jsonpath must be a string such as '$.items[0]'")
    document = entry.value
    if entry.path is not None or isinstance(document, str):
        try:
            document = json.loads(entry.text())
        except ValueError:
            raise HandleError(
                "this handle holds plain text, not JSON; use slice or range instead"
            ) from None
    try:
        matches = [node.value for node in jsonpath_rfc9535.find(expression, document)]
    except jsonpath_rfc9535.JSONPathError as error:
        raise HandleError(f"invalid JSONPath {expression!r}: {error}") from None
    return json.dumps(matches, ensure_ascii=False, indent=2)
