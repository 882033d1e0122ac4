"""read_file, list_dir and write_file."""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any

from codewhale.permissions import ApprovalClass, relative_to_workspace
from codewhale.tools.base import Tool, ToolContext, ToolError, ToolResult

MAX_READ_BYTES = 256 * 1024
MAX_READ_LINES = 2000
MAX_LIST_ENTRIES = 500


def is_binary(sample: bytes) -> bool:
    """NUL bytes in the first block mean binary, as git decides it."""
    return b"\x00" in sample[:8192]


def read_text(path: Path) -> str:
    """A workspace text file, or a ToolError explaining why it cannot be read as text."""
    if not path.exists():
        raise ToolError(f"{path.name}: no such file")
    if path.is_dir():
        raise ToolError(f"{path.name} is a directory; use list_dir")
    data = path.read_bytes()
    if is_binary(data):
        raise ToolError(f"{path.name} is a binary file ({len(data)} bytes); not shown")
    return data.decode("utf-8", errors="replace")


def unified_diff(before: str, after: str, name: str) -> str:
    lines = difflib.unified_diff(
        before.splitlines(keepends=True),
        after.splitlines(keepends=True),
        fromfile=f"a/{name}",
        tofile=f"b/{name}",
    )
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


def write_with_journal(context: ToolContext, path: Path, text: str) -> str:
    """Write `text`, recording the pre-image for revert_turn; returns the diff."""
    before = path.read_text(encoding="utf-8", errors="replace") if path.is_file() else ""
    context.journal.before_write(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return unified_diff(before, text, relative_to_workspace(context.workspace, path))


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
        if (
            path.is_file()
            and path.stat().st_size > 50 * MAX_READ_BYTES
            and ("start_line" not in arguments)
        ):
            raise ToolError(
                f"{arguments['path']} is {path.stat().st_size} bytes; read it in ranges "
                "with start_line/end_line, or search it with grep_files"
            )
        lines = read_text(path).splitlines()
        start = max(int(arguments.get("start_line") or 1), 1)
        end = int(arguments.get("end_line") or len(lines))
        end = min(end, len(lines), start + MAX_READ_LINES - 1)
        if lines and start > len(lines):
            raise ToolError(f"start_line {start} is past the end ({len(lines)} lines)")
        width = len(str(end))
        body, size = [], 0
        for number in range(start, end + 1):
            line = f"{number:>{width}}\t{lines[number - 1]}"
            size += len(line) + 1
            if size > MAX_READ_BYTES:
                end = number - 1
                break
            body.append(line)
        footer = ""
        if end < len(lines):
            footer = f"\n[lines {start}-{end} of {len(lines)}; continue with start_line={end + 1}]"
        return ToolResult("\n".join(body) + footer if body else "(empty file)")


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


class WriteFile(Tool):
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

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolResult:
        path = context.path(arguments["path"])
        if path.is_dir():
            raise ToolError(f"{arguments['path']} is a directory")
        existed = path.exists()
        diff = write_with_journal(context, path, arguments["content"])
        name = relative_to_workspace(context.workspace, path)
        verb = "Updated" if existed else "Created"
        lines = arguments["content"].count("\n") + 1
        return ToolResult(f"{verb} {name} ({lines} lines).", display=diff)
