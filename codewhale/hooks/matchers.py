"""A hook's `matcher`: which tool calls (or which kind of start, compaction, …) it runs for.

Claude Code's rules: empty or `*` matches everything; a word or words joined by `|`
(`Bash`, `Edit|Write`) match those names exactly; anything else is a regular expression
searched in the name (`mcp__github__.*`, `Notebook.*`). A tool matcher also accepts
Claude Code's names for our tools: `Bash` matches `exec_shell`, `Edit` matches
`edit_file` and `apply_patch`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Claude Code's tool names -> ours. Edit and Write cover apply_patch too: a hook guarding
# file changes must see every way a file changes here.
CLAUDE_TOOLS: dict[str, tuple[str, ...]] = {
    "Bash": ("exec_shell",),
    "BashOutput": ("shell_output",),
    "KillShell": ("shell_kill",),
    "Write": ("write_file", "apply_patch"),
    "Edit": ("edit_file", "apply_patch"),
    "MultiEdit": ("edit_file", "apply_patch"),
    "Read": ("read_file",),
    "Grep": ("grep_files",),
    "Glob": ("file_search",),
    "LS": ("list_dir",),
    "WebFetch": ("fetch_url",),
    "Task": ("agent_open",),
    "Agent": ("agent_open",),
    "TodoWrite": ("checklist_write",),
    "Skill": ("skill",),
}
_SIMPLE = re.compile(r"[A-Za-z0-9_]+(\|[A-Za-z0-9_]+)*")


class MatcherError(ValueError):
    """A matcher that is not a valid regular expression."""


@dataclass(frozen=True)
class Matcher:
    """A compiled matcher; `text` is what the settings file said."""

    text: str
    names: frozenset[str] | None = None  # exact names (aliases expanded); None: see pattern
    pattern: re.Pattern[str] | None = None  # None with names None: matches everything

    @classmethod
    def parse(cls, text: str, *, tools: bool) -> Matcher:
        """`tools`: the event is about a tool call, so Claude Code's tool names map over."""
        stripped = text.strip()
        if stripped in ("", "*"):
            return cls(text)
        if _SIMPLE.fullmatch(stripped):
            names = set(stripped.split("|"))
            if tools:
                for name in list(names):
                    names.update(CLAUDE_TOOLS.get(name, ()))
            return cls(text, names=frozenset(names))
        try:
            return cls(text, pattern=re.compile(stripped))
        except re.error as error:
            raise MatcherError(f"'{text}' is not a valid regular expression ({error})") from None

    def matches(self, value: str | None) -> bool:
        """Whether a hook with this matcher runs for `value` (a tool name, `startup`, …);
        an event without a value to match runs every hook."""
        if value is None or (self.names is None and self.pattern is None):
            return True
        if self.names is not None:
            return value in self.names
        assert self.pattern is not None
        return any(self.pattern.search(name) for name in (value, *claude_names(value)))


def claude_names(tool: str) -> tuple[str, ...]:
    """Claude Code's names for our tool `tool` (a regex written for theirs matches ours)."""
    return tuple(claude for claude, ours in CLAUDE_TOOLS.items() if tool in ours)
