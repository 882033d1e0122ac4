"""The `tools` of an agent file in our tool names: Claude Code's and Owlen's names map over.

A name we cannot serve (WebSearch, NotebookEdit, an MCP tool of a server this session
does not run, a typo) is dropped and reported, and the file still loads: an agent
with fewer tools is more useful than no agent. A Claude permission pattern such as
`Bash(git:*)` is dropped too rather than widened to the whole tool.
"""

from __future__ import annotations

import re
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Any

from codewhale.subagents.roles import AGENT_TOOLS

# Lower-cased foreign names -> ours. Claude Code (Read, MultiEdit, Task, …) and Owlen.
TOOL_ALIASES: dict[str, tuple[str, ...]] = {
    "read": ("read_file",),
    "notebookread": ("read_file",),
    "write": ("write_file",),
    "edit": ("edit_file",),
    "multiedit": ("edit_file",),
    "patch": ("apply_patch",),
    "bash": ("exec_shell",),
    "shell": ("exec_shell",),
    "grep": ("grep_files",),
    "glob": ("file_search",),
    "ls": ("list_dir",),
    "fetch": ("fetch_url",),
    "webfetch": ("fetch_url",),
    "todowrite": ("checklist_write",),
    "todoread": ("checklist_write",),
    "task": tuple(sorted(AGENT_TOOLS)),
    "skill": ("skill",),
}
# `tools: "*"` (or `[*]`) means what leaving the field out means.
EVERY_TOOL = "*"


@dataclass(frozen=True)
class ToolSelection:
    # None: the base role's tools decide; () : no tools at all.
    names: tuple[str, ...] | None
    dropped: tuple[str, ...] = ()


class ToolListError(ValueError):
    """The field is not a list of names at all."""


def tool_names(raw: Any) -> list[str] | None:
    """The entries of a `tools`-like field: a YAML list or a comma/space separated string."""
    if raw is None:
        return None
    if isinstance(raw, str):
        # Split on commas and spaces, but not inside a pattern's parentheses.
        return [part for part in re.findall(r"[^,\s(]+(?:\([^)]*\))?", raw) if part]
    if isinstance(raw, list) and all(isinstance(item, str) for item in raw):
        return [item.strip() for item in raw if item.strip()]
    raise ToolListError("must be a list of tool names or a comma-separated string")


def map_tools(entries: list[str], known: AbstractSet[str]) -> tuple[list[str], list[str]]:
    """(our names in first-seen order, the entries we cannot serve)."""
    names: list[str] = []
    dropped: list[str] = []
    for entry in entries:
        mapped = (entry,) if entry in known else TOOL_ALIASES.get(entry.lower(), ())
        served = [name for name in mapped if name in known]
        if not served:
            dropped.append(entry)
        names += [name for name in served if name not in names]
    return names, dropped


def select_tools(tools: Any, disallowed: Any, known: AbstractSet[str]) -> ToolSelection:
    """The definition's tool list from its `tools` and `disallowedTools` fields."""
    entries = tool_names(tools)
    if entries is not None and EVERY_TOOL in entries:
        entries = None
    if entries is None:
        names: list[str] | None = None
        dropped: list[str] = []
    else:
        names, dropped = map_tools(entries, known)
    denied_entries = tool_names(disallowed)
    if denied_entries:
        # Denying a tool we do not have changes nothing, so unknown names there are moot.
        denied, _ = map_tools(denied_entries, known)
        # A deny list needs an explicit list to subtract from: every tool we serve.
        base = names if names is not None else sorted(known)
        names = [name for name in base if name not in denied]
    return ToolSelection(tuple(names) if names is not None else None, tuple(dropped))
