"""read_file, list_dir and write_file, and the rule every file tool reads and writes by.

Only regular files with a single hard link are read, searched or written: opening a FIFO
blocks, opening a device can have side effects, and a second hard link makes a workspace
path an alias of a file that may lie outside the workspace. Every file is reached through
the workspace opener (workspace_fs), never by name, so a symlink swapped into its path
after confine() checked it cannot redirect the read or write.
"""

from __future__ import annotations

import asyncio
import difflib
import io
import os
import re
import stat
from collections.abc import Iterator, Mapping
from contextlib import suppress
from io import BufferedReader
from pathlib import Path
from typing import Any, TextIO

from codewhale.permissions import ApprovalClass, relative_to_workspace
from codewhale.tools.base import Tool, ToolContext, ToolError, ToolResult
from codewhale.tools.journal import PreImage
from codewhale.tools.line_endings import LineText
from codewhale.tools.text_encoding import (
    BINARY_SNIFF_BYTES,
    UTF8,
    BinaryFile,
    TextEncoding,
    decode_text,
    detect,
    read_chunks,
)
from codewhale.tools.workspace_fs import (
    NoSuchPath,
    lstat_beneath,
    lstat_in,
    open_directory,
    open_in,
    parent_directory,
)

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
    path: Path, label: str, verb: str = "read", *, workspace: Path, single_link: bool = True
) -> BufferedReader:
    """Open a file `check_regular` accepts for reading, never blocking on a FIFO (see
    open_regular_descriptor)."""
    descriptor, _ = open_regular_descriptor(
        path, label, verb, workspace=workspace, single_link=single_link
    )
    return os.fdopen(descriptor, "rb")


def open_regular_descriptor(
    path: Path, label: str, verb: str = "read", *, workspace: Path, single_link: bool = True
) -> tuple[int, os.stat_result]:
    """A descriptor of a file `check_regular` accepts, opened for reading, and its status.

    The file is reached through the workspace opener, so no symlink swapped into its path
    can redirect the read. lstat comes first so a device is never opened; the open itself
    is non-blocking, and fstat re-checks what was opened, so a FIFO or link swapped in
    between the two is refused too.
    """
    with parent_directory(workspace, path, label) as (directory, name):
        before = lstat_in(directory, name, label)
        check_regular(before, label, verb, single_link=single_link)
        descriptor = open_in(directory, name, os.O_RDONLY | os.O_NONBLOCK, label, verb)
    try:
        after = os.fstat(descriptor)
        if (after.st_dev, after.st_ino) != (before.st_dev, before.st_ino):
            raise ToolError(f"{label} was replaced while being opened; try again")
        check_regular(after, label, verb, single_link=single_link)
    except ToolError:
        os.close(descriptor)
        raise
    return descriptor, after


def is_binary(sample: bytes) -> bool:
    """NUL bytes in the first block mean binary, as git decides it."""
    return b"\x00" in sample[:8192]


def read_text(path: Path, label: str | None = None, verb: str = "read", *, workspace: Path) -> str:
    """A whole text file, or a ToolError naming it `label` (default: its name) saying why not."""
    label = label or path.name
    return read_text_file(path, label, verb, workspace=workspace)[0]


def read_text_file(
    path: Path, label: str, verb: str, *, workspace: Path
) -> tuple[str, TextEncoding]:
    """A whole text file as text, with the encoding its bytes were found in (see text_encoding)."""
    with open_regular(path, label, verb, workspace=workspace) as stream:
        data = stream.read()
    return decode_text(data, label)


def check_writable(path: Path, label: str, *, workspace: Path) -> None:
    """Refuse before any change to write over anything but a regular, singly linked file."""
    info = lstat_beneath(workspace, path, label)
    if info is not None:
        check_regular(info, label, "written")


def write_regular(
    path: Path, text: str | bytes, label: str, *, workspace: Path, mode: int | None = None
) -> None:
    """Write `text` to `path` in place, never into a FIFO, a device or a shared inode.

    Missing parents are made, and the file opened, through the workspace opener, so no
    symlink swapped into the path can carry the write outside. The file is opened without
    O_TRUNC and checked with fstat first, so one swapped in after the lstat check is
    refused before a byte of it changes. Written in place, an existing file keeps its
    mode; `mode` sets the permission bits (a restore puts back those the file had).
    """
    with parent_directory(workspace, path, label, create=True) as (directory, name):
        with suppress(NoSuchPath):
            check_regular(lstat_in(directory, name, label), label, "written")
        flags = os.O_WRONLY | os.O_CREAT | os.O_NONBLOCK
        descriptor = open_in(directory, name, flags, label, "written")
    with os.fdopen(descriptor, "wb") as stream:
        info = os.fstat(descriptor)
        check_regular(info, label, "written")
        if mode is not None and stat.S_IMODE(info.st_mode) != mode:
            os.fchmod(descriptor, mode)
        stream.truncate()
        stream.write(text.encode("utf-8") if isinstance(text, str) else text)


def unified_diff(before: str, after: str, name: str) -> str:
    """The change from `before` to `after`, with lines numbered as the file tools count them."""
    lines = difflib.unified_diff(
        _with_ends(before),
        _with_ends(after),
        fromfile=f"a/{name}",
        tofile=f"b/{name}",
    )
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


_LINE = re.compile(r"[^\n]*\n|[^\n]+\Z")


def _with_ends(text: str) -> list[str]:
    """`text`'s lines with their endings, split at "\\n" only (splitlines() would also split
    at a form feed or U+2028 inside a line, and number lines unlike read_file)."""
    return _LINE.findall(text)


# read_file reads files up to this size without leaving the event loop.
INLINE_READ_BYTES = 64 * 1024


def current_image(workspace: Path, path: Path, label: str) -> PreImage | None:
    """The file's bytes and mode before a write (None if it does not exist yet)."""
    try:
        with open_regular(path, label, "written", workspace=workspace) as stream:
            return PreImage(stream.read(), stat.S_IMODE(os.fstat(stream.fileno()).st_mode))
    except NoSuchPath:
        return None


def write_with_journal(context: ToolContext, path: Path, label: str, data: bytes) -> bool:
    """Write `data`, recording the pre-image (revert_turn, /diff); whether it was created."""
    image = current_image(context.workspace, path, label)
    context.before_write(path, image)
    write_regular(path, data, label, workspace=context.workspace)
    context.after_write(path, data)
    return image is None


def planned_write(
    context: ToolContext, path: Path, label: str, content: str
) -> tuple[str, str, bytes]:
    """The file's text now ("" when absent), its text after, and the bytes write_file stores.

    A new file is UTF-8. An existing text file keeps its encoding (byte-order mark too)
    and, when `content` has only "\\n" breaks, its prevailing line ending; a character the
    encoding cannot hold is refused. A binary file is replaced by UTF-8 text.
    """
    image = current_image(context.workspace, path, label)
    if image is None:
        return "", content, UTF8.encode(content, label)
    try:
        before, encoding = decode_text(image.data, label)
    except BinaryFile:
        shown = image.data.decode("utf-8", errors="replace")
        return shown, content, UTF8.encode(content, label)
    if "\r\n" not in content:
        content = content.replace("\n", LineText(before).newline)
    return before, content, encoding.encode(content, label)


def _lines(stream: TextIO) -> Iterator[str]:
    """Each line with its ending, at most MAX_READ_BYTES of it: one huge line stays bounded."""
    while line := stream.readline(MAX_READ_BYTES):
        rest = line
        while rest and not rest.endswith("\n"):
            rest = stream.readline(MAX_READ_BYTES)  # the rest of an over-long line: skipped
        yield line


def _without_ending(line: str) -> str:
    """A line without its ending (\\n or \\r\\n)."""
    if line.endswith("\n"):
        return line[:-2] if line.endswith("\r\n") else line[:-1]
    return line


def read_range(
    descriptor: int, size: int, label: str, start: int, end: int | None, whole: bool
) -> str:
    """Lines `start`..`end` of the file open as `descriptor` (closed here), `size` bytes
    long, with numbers; nothing past the range is kept.

    `whole` says no start line was given, which a large file does not allow.
    """
    # Read from the descriptor itself: a buffered stream around it costs three system
    # calls (fstat, isatty, lseek) and a second read before the first byte.
    with os.fdopen(descriptor, "rb", buffering=0, closefd=True) as raw:
        if whole and size > LARGE_FILE_BYTES:
            raise ToolError(
                f"{label} is {size} bytes; read it in ranges with start_line/end_line, "
                "or search it with grep_files"
            )
        # A file that fits one reply is read, judged and split in one go (most do); a
        # larger one is judged by its start and streamed. One byte more than the file
        # holds is asked for, so a short read is its end (a fixed MAX_READ_BYTES + 1
        # would allocate a buffer that costs more than reading a small file).
        wanted = min(size, MAX_READ_BYTES) + 1
        head = _read_up_to(descriptor, wanted, size)
        if len(head) < wanted:
            encoding, lines = _lines_in(head, label, size)
            return _numbered(lines, label, start, end, size, encoding)
        raw.seek(0)
        encoding, lines = _lines_streamed(BufferedReader(raw), label, size)
        return _numbered(lines, label, start, end, size, encoding)


def _read_up_to(descriptor: int, wanted: int, size: int) -> bytes:
    """At most `wanted` bytes from the start of the file, all it has if fewer. A read that
    returns the `size` fstat gave, and asked for more, is at the end: no second read."""
    data = os.read(descriptor, wanted)
    if len(data) == size or not data:
        return data
    parts = [data]
    got = len(data)
    while got < wanted and (more := os.read(descriptor, wanted - got)):
        parts.append(more)
        got += len(more)
    return b"".join(parts)


def _lines_in(data: bytes, label: str, size: int) -> tuple[TextEncoding, Iterator[str]]:
    """The encoding of a whole small file's bytes, and its lines with their endings."""
    encoding = detect([data])
    if encoding.looks_binary(data):
        raise ToolError(f"{label} is a binary file ({size} bytes); not shown")
    # Only "\n" ends a line, as in the edit tools. _lines cuts a line at MAX_READ_BYTES
    # characters; no line of a file of at most that many bytes is longer.
    text = data[len(encoding.bom) :].decode(encoding.codec, errors="replace")
    return encoding, iter(_LINE.findall(text))


def _lines_streamed(
    stream: BufferedReader, label: str, size: int
) -> tuple[TextEncoding, Iterator[str]]:
    """The encoding of a large file (judged by its start), and its lines read as needed."""
    # The whole file when it can be read whole; a larger one is judged by its start.
    encoding = detect(read_chunks(stream, LARGE_FILE_BYTES))
    stream.seek(0)
    if encoding.looks_binary(stream.read(len(encoding.bom) + BINARY_SNIFF_BYTES)):
        raise ToolError(f"{label} is a binary file ({size} bytes); not shown")
    stream.seek(len(encoding.bom))
    # Only "\n" ends a line, as in the edit tools; "replace" can only act past the part
    # detect() read, since that part decodes cleanly.
    text = io.TextIOWrapper(stream, encoding.codec, errors="replace", newline="\n")
    return encoding, _lines(text)


def _numbered(
    lines: Iterator[str],
    label: str,
    start: int,
    end: int | None,
    size: int,
    encoding: TextEncoding,
) -> str:
    """read_file's reply: lines `start`..`end` of `lines`, numbered, and what follows them."""
    passed = sum(1 for _ in zip(range(start - 1), lines, strict=False))
    last = start + MAX_READ_LINES - 1 if end is None else min(end, start + MAX_READ_LINES - 1)
    shown: list[tuple[int, str]] = []
    used = 0
    full = False
    for number, line in zip(range(start, last + 1), lines, strict=False):
        content = _without_ending(line)
        used += len(str(number)) + len(content) + 2
        if used > MAX_READ_BYTES:
            if shown:
                full = True
                break
            # A first line larger than a whole reply is shown cut rather than not at all.
            content = content[: MAX_READ_BYTES // 2] + " [… line cut]"
        shown.append((number, content))
    more = full or next(lines, None) is not None
    # One line past the range has been read; the rest is only counted when that is cheap.
    total = len(shown) + start + sum(1 for _ in lines) if size <= LARGE_FILE_BYTES else None
    if not shown:
        if passed == 0:
            return "(empty file)"
        raise ToolError(f"start_line {start} is past the end ({passed} lines)")
    width = len(str(shown[-1][0]))
    body = [f"{number:>{width}}\t{content}" for number, content in shown]
    if more:
        after = shown[-1][0]
        of = f"of {total}" if total is not None else f"of a {size}-byte file"
        body.append(f"[lines {start}-{after} {of}; continue with start_line={after + 1}]")
    if note := encoding.note():
        body.append(note)
    return "\n".join(body)


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

    def read_paths(self, arguments: Mapping[str, Any], context: ToolContext) -> list[Path]:
        return [context.path(arguments.get("path"))]

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolResult:
        path = context.path(arguments["path"])
        label = relative_to_workspace(context.workspace, path)
        start = max(int(arguments.get("start_line") or 1), 1)
        end = arguments.get("end_line") or None
        if end is not None and end < start:
            raise ToolError(f"end_line {end} is before start_line {start}")
        whole = "start_line" not in arguments
        # Opened here, once: a FIFO or device is refused before any open, and none blocks.
        descriptor, status = open_regular_descriptor(path, label, workspace=context.workspace)
        size = status.st_size
        read = (descriptor, size, label, start, end, whole)
        if size <= INLINE_READ_BYTES:
            # A hop to a worker thread costs more than reading a few KB (≈0.25 ms a step).
            return ToolResult(read_range(*read))
        # In a thread: a range deep into a big file takes a while, and the dispatcher's
        # time limit can only end a call that gives the event loop back.
        return ToolResult(await asyncio.to_thread(read_range, *read))


class ListDir(Tool):
    name = "list_dir"
    description = "List a directory of the workspace: subdirectories end with '/', files show size."
    parameters = {
        "type": "object",
        "properties": {"path": {"type": "string", "description": "directory; default '.'"}},
    }

    def read_paths(self, arguments: Mapping[str, Any], context: ToolContext) -> list[Path]:
        return [context.path(arguments.get("path") or ".")]

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolResult:
        path = context.path(arguments.get("path") or ".")
        label = relative_to_workspace(context.workspace, path)
        descriptor = open_directory(context.workspace, path, label)
        try:
            lines = _listing(descriptor)
        finally:
            os.close(descriptor)
        return ToolResult("\n".join(lines) or "(empty directory)")


def _listing(descriptor: int) -> list[str]:
    """list_dir's lines for the directory open as `descriptor`: directories first, then files."""
    with os.scandir(descriptor) as scan:
        entries = [entry for entry in scan if entry.name != ".git"]
    # Each entry is looked up in this directory's descriptor, so nothing swapped in above
    # it is listed; is_dir() follows a symlink, as listing always did, to say "dir/".
    entries.sort(key=lambda entry: (not entry.is_dir(), entry.name))
    lines = [
        f"{entry.name}/"
        if entry.is_dir()
        else f"{entry.name}  ({entry.stat(follow_symlinks=False).st_size} bytes)"
        for entry in entries[:MAX_LIST_ENTRIES]
    ]
    if len(entries) > MAX_LIST_ENTRIES:
        lines.append(f"[{len(entries) - MAX_LIST_ENTRIES} more entries not shown]")
    return lines


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
        """The file as it is against what would be written: the diff run() would return."""
        return _write_plan(arguments, context)[3]

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolResult:
        path, name, data, diff = _write_plan(arguments, context)
        created = write_with_journal(context, path, name, data)
        verb = "Created" if created else "Updated"
        lines = arguments["content"].count("\n") + 1
        return ToolResult(f"{verb} {name} ({lines} lines).", display=diff)


def _write_plan(arguments: Mapping[str, Any], context: ToolContext) -> tuple[Path, str, bytes, str]:
    """(path, its workspace name, the bytes to write, the diff they make)."""
    path = context.path(arguments["path"])
    name = relative_to_workspace(context.workspace, path)
    before, after, data = planned_write(context, path, name, arguments["content"])
    return path, name, data, unified_diff(before, after, name)
