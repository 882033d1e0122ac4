"""apply_patch: a multi-file unified diff, applied completely or not at all.

Hunks are matched against a file's lines as read_file shows them; each file is written
back in its own encoding, and every line a hunk does not add keeps its own ending (a
context line stays exactly as the file has it), so bytes outside the change never move.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from codewhale.permissions import ApprovalClass
from codewhale.tools.base import Tool, ToolContext, ToolError, ToolResult
from codewhale.tools.files import check_writable, current_image, read_text_file, write_regular
from codewhale.tools.line_endings import Line, LineText
from codewhale.tools.text_encoding import UTF8
from codewhale.tools.workspace_fs import lstat_beneath, remove

_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


@dataclass
class Hunk:
    old_start: int
    lines: list[str] = field(default_factory=list)  # each begins with ' ', '-' or '+'

    def old_block(self) -> list[str]:
        return [line[1:] for line in self.lines if line[:1] in (" ", "-")]


@dataclass
class FilePatch:
    old_path: str | None
    new_path: str | None
    hunks: list[Hunk] = field(default_factory=list)


def _strip_prefix(raw: str) -> str | None:
    name = raw.split("\t", 1)[0].strip()
    if name == "/dev/null":
        return None
    return name[2:] if name.startswith(("a/", "b/")) else name


def parse_patch(text: str) -> list[FilePatch]:
    """Split a unified diff into per-file hunks; ToolError on anything malformed."""
    patches: list[FilePatch] = []
    # Split at line feeds only: splitlines() would also split a line at a form feed or
    # U+2028 that the file has inside a line.
    lines = [line.removesuffix("\r") for line in text.removesuffix("\n").split("\n")]
    index = 0
    while index < len(lines):
        line = lines[index]
        if (
            line.startswith("--- ")
            and index + 1 < len(lines)
            and lines[index + 1].startswith("+++ ")
        ):
            patches.append(FilePatch(_strip_prefix(line[4:]), _strip_prefix(lines[index + 1][4:])))
            index += 2
            continue
        if line.startswith("@@"):
            match = _HUNK.match(line)
            if not match or not patches:
                raise ToolError(f"malformed hunk header at patch line {index + 1}: {line!r}")
            hunk = Hunk(int(match.group(1)))
            patches[-1].hunks.append(hunk)
            index += 1
            while index < len(lines) and not lines[index].startswith(("@@", "--- ", "diff ")):
                body = lines[index]
                if body.startswith("\\"):  # "\ No newline at end of file"
                    index += 1
                    continue
                hunk.lines.append(body if body[:1] in (" ", "-", "+") else " " + body)
                index += 1
            continue
        index += 1
    if not patches:
        raise ToolError("no file headers found; expected a unified diff with ---/+++ lines")
    return patches


def _apply_hunks(original: list[Line], patch: FilePatch, label: str) -> list[Line]:
    result = list(original)
    offset = 0
    for number, hunk in enumerate(patch.hunks, start=1):
        old = hunk.old_block()
        expected = max(hunk.old_start - 1 + offset, 0)
        position = _locate([line.text for line in result], old, expected)
        if position is None:
            raise ToolError(
                f"{label}: hunk {number} (at line {hunk.old_start}) does not match the file; "
                "re-read the file and regenerate the patch"
            )
        new = _new_lines(hunk, result[position : position + len(old)])
        result[position : position + len(old)] = new
        offset += len(new) - len(old)
    return result


def _new_lines(hunk: Hunk, matched: list[Line]) -> list[Line]:
    """What the file lines `matched` by the hunk's old block become.

    A context line is the file's own line, ending and all. An added line takes the ending
    of the line removed in its place (a changed line keeps its ending), else None: the
    file's prevailing one.
    """
    new: list[Line] = []
    file_lines = iter(matched)
    removed: list[str | None] = []  # endings of the lines removed since the last context line
    for line in hunk.lines:
        if line[:1] == "+":
            new.append(Line(line[1:], removed.pop(0) if removed else None))
            continue
        kept = next(file_lines)
        if line[:1] == "-":
            removed.append(kept.ending)
        else:
            new.append(kept)
            removed.clear()
    return new


def _locate(lines: list[str], block: list[str], expected: int) -> int | None:
    """Where `block` occurs, preferring the position nearest the hunk header's line."""
    if not block:
        return min(expected, len(lines))
    size = len(block)
    candidates = [i for i in range(len(lines) - size + 1) if lines[i : i + size] == block]
    if not candidates:
        candidates = [
            i
            for i in range(len(lines) - size + 1)
            if [x.rstrip() for x in lines[i : i + size]] == [x.rstrip() for x in block]
        ]
    return min(candidates, key=lambda i: abs(i - expected)) if candidates else None


class ApplyPatch(Tool):
    name = "apply_patch"
    description = (
        "Apply a unified diff that may touch several files (create with --- /dev/null, "
        "delete with +++ /dev/null). Either every hunk applies or nothing is written."
    )
    parameters = {
        "type": "object",
        "properties": {"patch": {"type": "string", "description": "unified diff text"}},
        "required": ["patch"],
    }
    approval = ApprovalClass.SUGGEST

    def summary(self, arguments: Mapping[str, Any]) -> str:
        patch = arguments.get("patch")
        return f"{patch.count('+++ ')} file(s)" if isinstance(patch, str) else ""

    def written_paths(self, arguments: Mapping[str, Any], context: ToolContext) -> list[Path]:
        """Every file the patch creates, changes or deletes (a rename: both of its names)."""
        names = (
            name
            for patch in parse_patch(arguments["patch"])
            for name in (patch.old_path, patch.new_path)
        )
        return [context.path(name) for name in dict.fromkeys(names) if name is not None]

    def approval_preview(self, arguments: Mapping[str, Any], context: ToolContext) -> str:
        """The patch itself: it is the diff, and run() writes all of it or nothing."""
        return str(arguments["patch"])

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolResult:
        # (file, its new bytes or None to delete it, the label shown)
        planned: list[tuple[Path, bytes | None, str]] = []
        for patch in parse_patch(arguments["patch"]):
            target = patch.new_path or patch.old_path
            if target is None:
                raise ToolError("a file patch has /dev/null on both sides")
            path = context.path(target)
            if patch.old_path is None:
                if lstat_beneath(context.workspace, path, target) is not None:
                    raise ToolError(f"{target}: patch creates it, but it already exists")
                # An empty UTF-8 file; added lines all end with a newline.
                text, encoding = LineText(""), UTF8
            else:
                source = context.path(patch.old_path)
                content, encoding = read_text_file(
                    source, patch.old_path, "patched", workspace=context.workspace
                )
                text = LineText(content)
            if patch.new_path is None:
                planned.append((path, None, target))
                continue
            # Refused now, while nothing is written yet (write_regular checks again).
            check_writable(path, target, workspace=context.workspace)
            updated = text.join(_apply_hunks(text.lines(), patch, target))
            planned.append((path, encoding.encode(updated, target), target))
        # Every hunk matched: only now touch the disk.
        summary = []
        for path, data, label in planned:
            image = current_image(context.workspace, path, label)
            context.before_write(path, image)
            if data is None:
                remove(context.workspace, path, label)
                summary.append(f"deleted {label}")
            else:
                write_regular(path, data, label, workspace=context.workspace)
                summary.append(f"patched {label}")
            context.after_write(path, data)
        return ToolResult("Applied patch: " + ", ".join(summary) + ".", display=arguments["patch"])
