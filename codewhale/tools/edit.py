"""edit_file: replace one block of text, tolerating the whitespace slips models make.

Matching tiers, tried in order until one finds something:
1. exact: the old text appears verbatim;
2. whitespace-normalized: lines equal once runs of spaces/tabs collapse and
   trailing whitespace is dropped;
3. indentation-flexible: lines equal ignoring leading indentation; the new text
   is re-indented by the difference.
More than one match in the first tier that matches is an error listing where.

Matching works on the file's text with "\\n" line breaks, as read_file shows it; the
file is written back in its own encoding with its own line endings (text_encoding,
line_endings), so bytes outside the edit never change.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from codewhale.permissions import ApprovalClass, relative_to_workspace
from codewhale.tools.base import ToolContext, ToolError, ToolResult
from codewhale.tools.files import PathWriter, read_text_file, unified_diff, write_with_journal
from codewhale.tools.line_endings import LineText, splice


@dataclass(frozen=True)
class Match:
    """Characters [start, end) of the text, the line they start on (0-based), and what
    replaces them."""

    start: int
    end: int
    line: int
    replacement: str


def _collapse(line: str) -> str:
    """Same indentation, but runs of inner spaces/tabs and trailing whitespace don't matter."""
    if not line.strip():
        return ""
    return _indent(line) + re.sub(r"[ \t]+", " ", line.strip())


def _stripped(line: str) -> str:
    """Ignore indentation as well (and inner whitespace runs, like the tier before)."""
    return re.sub(r"[ \t]+", " ", line.strip())


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip(" \t"))]


def _block_matches(
    lines: list[str], old_lines: list[str], normalise: Callable[[str], str]
) -> list[int]:
    wanted = [normalise(line) for line in old_lines]
    size = len(wanted)
    have = [normalise(line) for line in lines]
    return [i for i in range(len(lines) - size + 1) if have[i : i + size] == wanted]


def _reindent(new_text: str, old_first: str, file_first: str) -> str:
    """Shift every line of `new_text` by the indentation the match differed by."""
    old_indent, file_indent = _indent(old_first), _indent(file_first)
    out = []
    for line in new_text.split("\n"):
        if line.startswith(old_indent) and line.strip():
            line = file_indent + line[len(old_indent) :]
        elif line.strip():
            line = file_indent + line.lstrip(" \t")
        out.append(line)
    return "\n".join(out)


def find_matches(content: str, old: str, new: str) -> tuple[str, list[Match]]:
    """The first tier that matches, and every match it found, in order and not overlapping."""
    if old in content:
        matches, start = [], 0
        while (found := content.find(old, start)) >= 0:
            matches.append(Match(found, found + len(old), content.count("\n", 0, found), new))
            start = found + len(old)
        return "exact", matches
    lines = content.split("\n")
    # Where each line starts, and one past the end: a block of lines is a span of characters.
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line) + 1)
    old_lines = old.strip("\n").split("\n")
    size = len(old_lines)
    new_block = new.strip("\n")
    for tier, normalise in (("whitespace", _collapse), ("indentation", _stripped)):
        matches = []
        for s in _block_matches(lines, old_lines, normalise):
            if matches and s < matches[-1].line + size:
                continue  # overlaps the match before, as str.replace would skip it
            replacement = (
                _reindent(new_block, old_lines[0], lines[s]) if tier == "indentation" else new_block
            )
            matches.append(Match(offsets[s], offsets[s + size] - 1, s, replacement))
        if matches:
            return tier, matches
    return "none", []


def apply_edit(content: str, old: str, new: str, replace_all: bool = False) -> tuple[str, str]:
    """The edited content and the tier that matched; ToolError when none or ambiguous."""
    matches, tier = plan_edit(content, old, new, replace_all)
    return splice(content, [(m.start, m.end, m.replacement) for m in matches]), tier


def plan_edit(
    content: str, old: str, new: str, replace_all: bool = False
) -> tuple[list[Match], str]:
    """The matches to replace (one, or all with `replace_all`) and the tier that found them."""
    if not old:
        raise ToolError("old_string must not be empty; use write_file to create a file")
    if old == new:
        raise ToolError("old_string and new_string are identical; nothing to change")
    tier, matches = find_matches(content, old, new)
    if not matches:
        raise ToolError(
            "old_string was not found (also tried ignoring whitespace and indentation). "
            "Re-read the file and copy the exact text."
        )
    if len(matches) > 1 and not replace_all:
        where = ", ".join(str(m.line + 1) for m in matches[:20])
        raise ToolError(
            f"old_string matches {len(matches)} places (starting at lines {where}); "
            "include more surrounding lines to make it unique, or set replace_all: true"
        )
    return matches, tier


class EditFile(PathWriter):
    name = "edit_file"
    description = (
        "Replace old_string with new_string in a file. old_string must identify one place "
        "(add surrounding lines if needed) unless replace_all is true. Small whitespace or "
        "indentation differences are tolerated. Returns a unified diff."
    )
    parameters = {
        "type": "object",
        "properties": {
            "path": {"type": "string"},
            "old_string": {"type": "string", "description": "text to replace"},
            "new_string": {"type": "string", "description": "replacement text"},
            "replace_all": {"type": "boolean", "description": "replace every match"},
        },
        "required": ["path", "old_string", "new_string"],
    }
    approval = ApprovalClass.SUGGEST

    def approval_preview(self, arguments: Mapping[str, Any], context: ToolContext) -> str:
        """The edit applied in memory, with run()'s matching: the diff it would write."""
        return _planned_edit(arguments, context).diff

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolResult:
        plan = _planned_edit(arguments, context)
        write_with_journal(context, plan.path, plan.name, plan.data)
        note = "" if plan.tier == "exact" else f" (matched after normalising {plan.tier})"
        return ToolResult(f"Edited {plan.name}{note}.\n{plan.diff}", display=plan.diff)


@dataclass(frozen=True)
class PlannedEdit:
    """An edit worked out in memory: the bytes to write, the diff they make, the match tier."""

    path: Path
    name: str
    data: bytes
    diff: str
    tier: str


def _planned_edit(arguments: Mapping[str, Any], context: ToolContext) -> PlannedEdit:
    path = context.path(arguments["path"])
    name = relative_to_workspace(context.workspace, path)
    content, encoding = read_text_file(path, name, "edited", workspace=context.workspace)
    text = LineText(content)
    matches, tier = plan_edit(
        text.text,
        # The model's line breaks may be either kind; the file's own are kept.
        arguments["old_string"].replace("\r\n", "\n"),
        arguments["new_string"].replace("\r\n", "\n"),
        bool(arguments.get("replace_all")),
    )
    updated = text.replace([(m.start, m.end, m.replacement) for m in matches])
    data = encoding.encode(updated, name)
    return PlannedEdit(path, name, data, unified_diff(content, updated, name), tier)
