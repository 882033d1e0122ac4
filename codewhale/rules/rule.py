"""One permission rule in Claude Code's syntax: what it names and which calls it matches.

`Bash(npm test:*)` (prefix), `Bash(npm *)` (wildcard), `Bash(git status)` (exact),
`Read(./secrets/**)`, `Edit(src/**)`, `Write(…)` (gitignore-style paths),
`WebFetch(domain:example.com)`, `mcp__server__tool`, `mcp__server__*`, `Task(explore)`,
and bare tool names, Claude's or CodeWhale's own (`exec_shell`, `rlm_eval`).
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from urllib.parse import urlsplit

from codewhale.rules.path_patterns import anchored_pattern, path_matches


class Effect(StrEnum):
    ALLOW = "allow"
    ASK = "ask"
    DENY = "deny"


class Family(StrEnum):
    """How a rule's specifier is read."""

    SHELL = "shell"  # a command pattern
    READ = "read"  # a path pattern, tested on the paths a call reads
    WRITE = "write"  # a path pattern, tested on the paths a call writes
    WEB = "web"  # domain:HOST
    AGENT = "agent"  # a sub-agent type
    TOOL = "tool"  # no specifier: every call of the tools


SHELL_TOOLS = frozenset({"exec_shell"})
# Every tool that shows a file's content or name: a denied read is refused by all of them.
READ_TOOLS = frozenset({"read_file", "grep_files", "file_search", "list_dir", "rlm_open"})
WRITE_TOOLS = frozenset({"edit_file", "apply_patch", "write_file"})

# Claude Code's tool names, and CodeWhale's own, with the tools of ours each one covers.
TOOL_NAMES: dict[str, tuple[Family, frozenset[str]]] = {
    "Bash": (Family.SHELL, SHELL_TOOLS),
    "exec_shell": (Family.SHELL, SHELL_TOOLS),
    "Read": (Family.READ, READ_TOOLS),
    "read_file": (Family.READ, frozenset({"read_file"})),
    "Grep": (Family.READ, frozenset({"grep_files"})),
    "grep_files": (Family.READ, frozenset({"grep_files"})),
    "Glob": (Family.READ, frozenset({"file_search"})),
    "file_search": (Family.READ, frozenset({"file_search"})),
    "LS": (Family.READ, frozenset({"list_dir"})),
    "list_dir": (Family.READ, frozenset({"list_dir"})),
    "rlm_open": (Family.READ, frozenset({"rlm_open"})),
    # Claude's Edit rules cover every tool that edits files, Write included.
    "Edit": (Family.WRITE, WRITE_TOOLS),
    "MultiEdit": (Family.WRITE, WRITE_TOOLS),
    "Write": (Family.WRITE, WRITE_TOOLS),
    "edit_file": (Family.WRITE, frozenset({"edit_file"})),
    "apply_patch": (Family.WRITE, frozenset({"apply_patch"})),
    "write_file": (Family.WRITE, frozenset({"write_file"})),
    "WebFetch": (Family.WEB, frozenset({"fetch_url"})),
    "fetch_url": (Family.WEB, frozenset({"fetch_url"})),
    "Task": (Family.AGENT, frozenset({"agent_open"})),
    "Agent": (Family.AGENT, frozenset({"agent_open"})),
    "agent_open": (Family.AGENT, frozenset({"agent_open"})),
}
_RULE = re.compile(r"(?P<tool>[A-Za-z_][A-Za-z0-9_*.-]*)(?:\((?P<specifier>.*)\))?", re.DOTALL)
_MCP_PREFIX = "mcp__"


class RuleSyntaxError(ValueError):
    """A rule that cannot be read; the message says what was wrong."""


@dataclass(frozen=True)
class Rule:
    """One rule as written, where it came from, and what it covers."""

    text: str
    effect: Effect
    # The file it came from (shown by /permissions, edited when it is removed).
    source: Path
    family: Family
    # The tool name as written (`Bash`, `mcp__github__*`), and our tools it covers.
    tool: str
    tools: frozenset[str]
    specifier: str | None = None
    # The specifier of a path rule, made absolute where its project and home are.
    glob: str = ""

    def known(self, available: frozenset[str]) -> bool:
        """Whether it names a tool CodeWhale has (an unknown tool's rule matches nothing);
        an MCP rule counts as known, since its server may come up later."""
        if self.tool.startswith(_MCP_PREFIX):
            return True
        return bool(self.tools) and (self.tool in TOOL_NAMES or self.tools <= available)

    def covers_tool(self, tool: str) -> bool:
        if self.tool.startswith(_MCP_PREFIX):
            name = self.tool
            # `mcp__server` alone stands for every tool of the server.
            if "__" not in name[len(_MCP_PREFIX) :]:
                return tool.startswith(name + "__")
            return fnmatch.fnmatchcase(tool, name)
        return tool in self.tools

    def matches_command(self, part: str) -> bool:
        """Whether one simple shell command is covered (a bare `Bash` covers all)."""
        pattern = self.specifier
        if pattern is None or pattern.strip() in ("", "*"):
            return True
        pattern = " ".join(pattern.split())
        if pattern.endswith(":*"):
            prefix = pattern[:-2].rstrip()
            return part == prefix or part.startswith(prefix + " ")
        if "*" in pattern:
            regex = ".*".join(re.escape(piece) for piece in pattern.split("*"))
            if pattern.endswith(" *"):
                # `Bash(npm *)` also covers `npm` alone, as `Bash(npm:*)` does.
                regex = regex[: -len(re.escape(" ") + ".*")] + r"(?: .*)?"
            return re.fullmatch(regex, part, re.DOTALL) is not None
        return part == pattern

    def matches_path(self, path: Path) -> bool:
        return self.glob == "" or path_matches(self.glob, path)

    def matches_call(
        self, arguments: Mapping[str, object], reads: Sequence[Path], writes: Sequence[Path]
    ) -> bool:
        """For the families other than shell: whether a call of a covered tool matches."""
        if self.specifier is None or self.family is Family.TOOL:
            return True
        if self.family is Family.READ:
            return any(self.matches_path(path) for path in reads)
        if self.family is Family.WRITE:
            return any(self.matches_path(path) for path in writes)
        if self.family is Family.WEB:
            return self._matches_url(str(arguments.get("url") or ""))
        if self.family is Family.AGENT:
            kind = str(arguments.get("type") or arguments.get("role") or "general")
            return kind.casefold() == self.specifier.strip().casefold()
        return False

    def _matches_url(self, url: str) -> bool:
        assert self.specifier is not None
        wanted = self.specifier.strip()
        if not wanted.startswith("domain:"):
            return fnmatch.fnmatchcase(url, wanted)
        host = (urlsplit(url).hostname or "").casefold()
        return fnmatch.fnmatchcase(host, wanted.removeprefix("domain:").strip().casefold())


def parse_rule(text: str, effect: Effect, source: Path, root: Path, home: Path) -> Rule:
    """Read `text` (e.g. `Bash(npm test:*)`); a path pattern is anchored at `root`."""
    if not isinstance(text, str) or not text.strip():
        raise RuleSyntaxError("a rule must be a non-empty string such as 'Bash(npm test:*)'")
    written = text.strip()
    parsed = _RULE.fullmatch(written)
    if parsed is None:
        raise RuleSyntaxError(
            f"'{written}' is not a rule: write ToolName or ToolName(specifier), "
            "e.g. 'Bash(npm test:*)' or 'Read(./secrets/**)'"
        )
    tool, specifier = parsed["tool"], parsed["specifier"]
    family, tools = TOOL_NAMES.get(tool, (Family.TOOL, frozenset()))
    if tool not in TOOL_NAMES and not tool.startswith(_MCP_PREFIX) and tool.islower():
        tools = frozenset({tool})  # one of our other tools by its own name (rlm_eval)
    glob = ""
    if specifier is not None and family in (Family.READ, Family.WRITE):
        if not specifier.strip():
            raise RuleSyntaxError(f"'{written}': the path pattern is empty")
        glob = anchored_pattern(specifier, root, home)
    return Rule(written, effect, source, family, tool, tools, specifier, glob)
