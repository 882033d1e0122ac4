"""The set of tools a model is offered, looked up by name with helpful misses."""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from codewhale.tools.base import Tool, ToolError

if TYPE_CHECKING:
    from codewhale.config_models import SandboxConfig


class ToolRegistry:
    def __init__(self, tools: Iterable[Tool]) -> None:
        self._tools = {tool.name: tool for tool in tools}

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def names(self) -> list[str]:
        return list(self._tools)

    def get(self, name: str) -> Tool:
        """The tool called `name`; a ToolError that suggests the nearest names otherwise."""
        tool = self._tools.get(name)
        if tool is not None:
            return tool
        close = difflib.get_close_matches(str(name), self._tools, n=3, cutoff=0.5)
        hint = f" Did you mean: {', '.join(close)}?" if close else ""
        raise ToolError(f"Unknown tool '{name}'.{hint} Available: {', '.join(self._tools)}")

    def schemas(self) -> list[dict[str, Any]]:
        return [tool.schema() for tool in self._tools.values()]

    def restricted(self, allowed: Iterable[str]) -> ToolRegistry:
        """A registry offering only `allowed` (unknown names are the caller's to reject)."""
        keep = set(allowed)
        return ToolRegistry(tool for name, tool in self._tools.items() if name in keep)


def default_tools(sandbox: SandboxConfig | None = None) -> list[Tool]:
    """Every built-in tool of the parent agent, in the order the model sees them.

    `sandbox` is the user's `[sandbox]` section, for the shell tool (defaults otherwise).
    """
    from codewhale.tools.background_tools import ShellKill, ShellOutput
    from codewhale.tools.edit import EditFile
    from codewhale.tools.files import ListDir, ReadFile, WriteFile
    from codewhale.tools.patch import ApplyPatch
    from codewhale.tools.search import FileSearch, GrepFiles
    from codewhale.tools.shell import ExecShell
    from codewhale.tools.web import FetchUrl
    from codewhale.tools.work import (
        ChecklistWrite,
        HandleRead,
        Remember,
        RevertTurn,
        UpdatePlan,
    )

    return [
        ReadFile(),
        ListDir(),
        FileSearch(),
        GrepFiles(),
        WriteFile(),
        EditFile(),
        ApplyPatch(),
        ExecShell(sandbox),
        ShellOutput(),
        ShellKill(),
        FetchUrl(),
        UpdatePlan(),
        ChecklistWrite(),
        Remember(),
        RevertTurn(),
        HandleRead(),
    ]
