"""read_file, list_dir and write_file, and the rule every file tool reads and writes by.

Only regular files with a single hard link are read, searched or written: opening a FIFO
blocks, opening a device can have side effects, and a second hard link makes a workspace
path an alias of a file that may lie outside the workspace.
"""

from __future__ import annotations

import asyncio
import difflib
import os
import stat
from collections.abc import Iterator, Mapping
from io import BufferedReader
from pathlib import Path
from typing import Any

from codewhale.permissions import ApprovalClass, relative_to_workspace
from codewhale.tools.base import Tool, ToolContext, ToolError, ToolResult

MAX_READ_BYTES = 256 * 1024
MAX_READ_LINES = 2000
MAX_LIST_ENTRIES = 500
# Larger files must be read in ranges, and are not scanned to the end to count their lines.
LARGE_FILE_BYTES = 50 * MAX_READ_BYTES

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISLNK, "a symbolic link"),
)


class HardLinkedFile(ToolError):
    """A regular file with more than one hard link (searches skip these, and say so)."""


def check_regular(info: os.stat_result, label: str, verb: str, *, single_link: bool = True) -> None:
    """Raise unless `info` is a regular file (with a single link, when `single_link`)."""
    if not stat.S_ISREG(info.st_mode):
        kind = next((name for is_kind, name in _KINDS if is_kind(info.st_mode)), "a special file")
        raise ToolError(f"{label} is {kind}, not a regular file; only regular files can be {verb}")
    if single_link and info.st_nlink > 1:
        raise HardLinkedFile(
            f"{label} has {info.st_nlink} hard links, and a hard link can point outside the "
            f"workspace; only files with a single link can be {verb}"
        )


def lstat(path: Path, label: str) -> os.stat_result:
    """`path`'s own status (a symlink is not followed), or a ToolError saying why not."""
    try:
        return path.lstat()
    except FileNotFoundError:
        raise ToolError(f"{label}: no such file") from None
    except OSError as error:
        raise ToolError(f"{label}: {error.strerror}") from None


def open_regular(
    path: Path, label: str, verb: str = "read", *, single_link: bool = True
) -> BufferedReader:
    """Open a file `check_regular` accepts for reading, never blocking on a FIFO.

    lstat comes first so a device is never opened; the open itself is non-blocking and
    refuses a symlink, and fstat re-checks what was opened, so a FIFO or link swapped in
    between the two is refused too.
    """
    before = lstat(path, label)
    check_regular(before, label, verb, single_link=single_link)
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as error:
        raise ToolError(f"{label} cannot be {verb}: {error.strerror}") from None
    stream = os.fdopen(descriptor, "rb")
    try:
        after = os.fstat(descriptor)
        if (after.st_dev, after.st_ino) != (before.st_dev, before.st_ino):
            raise ToolError(f"{label} was replaced while being opened; try again")
        check_regular(after, label, verb, single_link=single_link)
    except ToolError:
        stream.close()
        raise
    return stream


def is_binary(sample: bytes) -> bool:
    """NUL bytes in the first block mean binary, as git decides it."""
    return b"\x00" in sample[:8192]


def read_text(path: Path, label: str | None = None, verb: str = "read") -> str:
    """A whole text file, or a ToolError naming it `label` (default: its name) saying why not."""
    label = label or path.name
    with open_regular(path, label, verb) as stream:
        data = stream.read()
    if is_binary(data):
        raise ToolError(f"{label} is a binary file ({len(data)} bytes); not shown")
    return data.decode("utf-8", errors="replace")


def check_writable(path: Path, label: str) -> None:
    """Refuse before any change to write over anything but a regular, singly linked file."""
    if os.path.lexists(path):
        check_regular(lstat(path, label), label, "written")


def write_regular(path: Path, text: str | bytes, label: str) -> None:
    """Write `text` to `path` in place, never into a FIFO, a device or a shared inode.

    The file is opened without O_TRUNC and checked with fstat first, so one swapped in
    after check_writable is refused before a byte of it changes.
    """
    check_writable(path, label)
    path.parent.mkdir(parents=True, exist_ok=True)
    flags = os.O_WRONLY | os.O_CREAT | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        descriptor = os.open(path, flags, 0o666)
    except OSError as error:
        raise ToolError(f"{label} cannot be written: {error.strerror}") from None
    with os.fdopen(descriptor, "wb") as stream:
        check_regular(os.fstat(descriptor), label, "written")
        stream.truncate()
        stream.write(text.encode("utf-8") if isinstance(text, str) else text)


def unified_diff(before: str, after: str, name: str) -> str:
    lines = difflib.unified_diff(
        before.splitlines(keepends=True),
        after.splitlines(keepends=True),
        fromfile=f"a/{name}",
        tofile=f"b/{name}",
    )
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


# read_file reads files up to this size without leaving the event loop.
INLINE_READ_BYTES = 64 * 1024


def current_text(path: Path, label: str) -> str:
    """The file's text before a write ('' if it does not exist yet)."""
    if not os.path.lexists(path):
        return ""
    with open_regular(path, label, "written") as stream:
        return stream.read().decode("utf-8", errors="replace")


def write_with_journal(context: ToolContext, path: Path, text: str) -> str:
    """Write `text`, recording the pre-image for revert_turn; returns the diff."""
    label = relative_to_workspace(context.workspace, path)
    before = current_text(path, label)
    context.journal.before_write(path)
    write_regular(path, text, label)
    return unified_diff(before, text, label)


def _lines(stream: BufferedReader) -> Iterator[bytes]:
    """Each line with its ending, at most MAX_READ_BYTES of it: one huge line stays bounded."""
    while line := stream.readline(MAX_READ_BYTES):
        rest = line
        while rest and not rest.endswith(b"\n"):
            rest = stream.readline(MAX_READ_BYTES)  # the rest of an over-long line: skipped
        yield line


def _decode(line: bytes) -> str:
    """A line as text without its ending (\\n or \\r\\n)."""
    if line.endswith(b"\n"):
        line = line[:-2] if line.endswith(b"\r\n") else line[:-1]
    return line.decode("utf-8", errors="replace")


def read_range(path: Path, label: str, start: int, end: int | None, whole: bool) -> str:
    """Lines `start`..`end` with numbers, streamed: nothing past the range is kept.

    `whole` says no start line was given, which a large file does not allow.
    """
    with open_regular(path, label) as stream:
        size = os.fstat(stream.fileno()).st_size
        if whole and size > LARGE_FILE_BYTES:
            raise ToolError(
                f"{label} is {size} bytes; read it in ranges with start_line/end_line, "
                "or search it with grep_files"
            )
        if is_binary(stream.read(8192)):
            raise ToolError(f"{label} is a binary file ({size} bytes); not shown")
        stream.seek(0)
        lines = _lines(stream)
        passed = sum(1 for _ in zip(range(start - 1), lines, strict=False))
        last = start + MAX_READ_LINES - 1 if end is None else min(end, start + MAX_READ_LINES - 1)
        shown: list[tuple[int, str]] = []
        used = 0
        full = False
        for number, line in zip(range(start, last + 1), lines, strict=False):
            text = _decode(line)
            used += len(str(number)) + len(text) + 2
            if used > MAX_READ_BYTES:
                if shown:
                    full = True
                    break
                # A first line larger than a whole reply is shown cut rather than not at all.
                text = text[: MAX_READ_BYTES // 2] + " [… line cut]"
            shown.append((number, text))
        more = full or next(lines, None) is not None
        # One line past the range has been read; the rest is only counted when that is cheap.
        total = len(shown) + start + sum(1 for _ in lines) if size <= LARGE_FILE_BYTES else None
    if not shown:
        if passed == 0:
            return "(empty file)"
        raise ToolError(f"start_line {start} is past the end ({passed} lines)")
    width = len(str(shown[-1][0]))
    body = "\n".join(f"{number:>{width}}\t{text}" for number, text in shown)
    if not more:
        return body
    after = shown[-1][0]
    of = f"of {total}" if total is not None else f"of a {size}-byte file"
    return f"{body}\n[lines {start}-{after} {of}; continue with start_line={after + 1}]"


class ReadFile(Tool):
    name = "read_file"
    description = (
        "Read a text file in the workspace, with line numbers. Use start_line/end_line "
        f"(1-based, inclusive) for large files; at most {MAX_READ_LINES} lines per call."
    )
    parameters = {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "file path relative to the workspace"},
            "start_line": {"type": "integer", "description": "first line, 1-based"},
            "end_line": {"type": "integer", "description": "last line, inclusive"},
        },
        "required": ["path"],
    }

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolResult:
        path = context.path(arguments["path"])
        label = relative_to_workspace(context.workspace, path)
        start = max(int(arguments.get("start_line") or 1), 1)
        end = arguments.get("end_line") or None
        if end is not None and end < start:
            raise ToolError(f"end_line {end} is before start_line {start}")
        whole = "start_line" not in arguments
        if _small_regular_file(path):
            # A hop to a worker thread costs more than reading a few KB (≈0.25 ms a step).
            return ToolResult(read_range(path, label, start, end, whole))
        # In a thread: a range deep into a big file takes a while, and the dispatcher's
        # time limit can only end a call that gives the event loop back.
        return ToolResult(await asyncio.to_thread(read_range, path, label, start, end, whole))


def _small_regular_file(path: Path) -> bool:
    """Small enough to read on the event loop (anything else, FIFOs included, is not)."""
    try:
        info = path.lstat()
    except OSError:
        return False
    return stat.S_ISREG(info.st_mode) and info.st_size <= INLINE_READ_BYTES


class ListDir(Tool):
    name = "list_dir"
    description = "List a directory of the workspace: subdirectories end with '/', files show size."
    parameters = {
        "type": "object",
        "properties": {"path": {"type": "string", "description": "directory; default '.'"}},
    }

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolResult:
        path = context.path(arguments.get("path") or ".")
        if not path.is_dir():
            raise ToolError(f"{arguments.get('path')}: not a directory")
        entries = sorted(path.iterdir(), key=lambda p: (not p.is_dir(), p.name))
        entries = [entry for entry in entries if entry.name != ".git"]
        lines = []
        for entry in entries[:MAX_LIST_ENTRIES]:
            if entry.is_dir():
                lines.append(f"{entry.name}/")
            else:
                size = entry.lstat().st_size
                lines.append(f"{entry.name}  ({size} bytes)")
        if len(entries) > MAX_LIST_ENTRIES:
            lines.append(f"[{len(entries) - MAX_LIST_ENTRIES} more entries not shown]")
        return ToolResult("\n".join(lines) or "(empty directory)")


class PathWriter(Tool):
    """A tool that writes the one file its `path` argument names."""

    def written_paths(self, arguments: Mapping[str, Any], context: ToolContext) -> list[Path]:
        return [context.path(arguments["path"])]


class WriteFile(PathWriter):
    name = "write_file"
    description = (
        "Create or overwrite a file in the workspace with the given content. "
        "Prefer edit_file for changes to existing files."
    )
    parameters = {
        "type": "object",
        "properties": {
            "path": {"type": "string"},
            "content": {"type": "string", "description": "the complete new file content"},
        },
        "required": ["path", "content"],
    }
    approval = ApprovalClass.SUGGEST

    def approval_preview(self, arguments: Mapping[str, Any], context: ToolContext) -> str:
        """The file as it is against the new content: the diff run() would return."""
        path = context.path(arguments["path"])
        label = relative_to_workspace(context.workspace, path)
        return unified_diff(current_text(path, label), arguments["content"], label)

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolResult:
        path = context.path(arguments["path"])
        existed = os.path.lexists(path)
        diff = write_with_journal(context, path, arguments["content"])
        name = relative_to_workspace(context.workspace, path)
        verb = "Updated" if existed else "Created"
        lines = arguments["content"].count("\n") + 1
        return ToolResult(f"{verb} {name} ({lines} lines).", display=diff)
