"""Authority as a value: what one conversation in the delegation tree may do.

The parent holds full authority. A child's authority is computed once, when it
is opened, as the intersection of its opener's authority with its own role's
posture and `allowed_tools`; so delegation can only narrow, never widen. Its `cwd`
is confined by its tool context's workspace, which must lie inside its opener's.
The session's *current* mode is applied on top at every call (`check`), which is
how `/mode plan` narrows every running descendant at its next tool call and
switching back restores at most each child's ceiling.

The check runs in the tool dispatcher before any approval prompt: a call the
authority forbids is refused without asking the user. An authority that may not write
may not call an MCP server's tools either, unless the user marked that server read-only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Any

from codewhale.mcp import names as mcp_names
from codewhale.permissions import ApprovalClass, CommandClass, classify_command

SHELL_TOOL = "exec_shell"
FULL_LABEL = "this session"
# Shell scopes from narrowest to widest; None (no shell at all) is narrower than any.
_SHELL_ORDER = (CommandClass.READ_ONLY, CommandClass.TEST, CommandClass.OTHER)


def narrower_shell(a: CommandClass | None, b: CommandClass | None) -> CommandClass | None:
    if a is None or b is None:
        return None
    return a if _SHELL_ORDER.index(a) <= _SHELL_ORDER.index(b) else b


@dataclass(frozen=True)
class Authority:
    """A ceiling on tool use; `label` names who imposed it, for refusal messages."""

    writes: bool = True
    plan_artifacts: bool = True
    # None: no shell; READ_ONLY / TEST: commands the classifier proves to be such; OTHER: any.
    shell: CommandClass | None = CommandClass.OTHER
    # None: every tool; otherwise only these names.
    tools: frozenset[str] | None = None
    label: str = FULL_LABEL

    @classmethod
    def full(cls) -> Authority:
        return cls()

    def narrowed(self, other: Authority) -> Authority:
        """The intersection of two authorities, labelled with both."""
        tools: frozenset[str] | None
        if self.tools is None:
            tools = other.tools
        elif other.tools is None:
            tools = self.tools
        else:
            # What both allow: `mcp__<server>` on one side keeps the other's tools of it.
            tools = frozenset(t for t in self.tools if tool_listed(other.tools, t)) | frozenset(
                t for t in other.tools if tool_listed(self.tools, t)
            )
        return Authority(
            writes=self.writes and other.writes,
            plan_artifacts=(self.writes or self.plan_artifacts)
            and (other.writes or other.plan_artifacts),
            shell=narrower_shell(self.shell, other.shell),
            tools=tools,
            label=_join_labels(self.label, other.label),
        )

    def check(
        self,
        tool: str,
        approval: ApprovalClass,
        *,
        plan_artifact: bool = False,
        arguments: Mapping[str, Any] | None = None,
    ) -> str | None:
        """Why this call is refused, or None if the authority allows it."""
        if self.tools is not None and not tool_listed(self.tools, tool):
            allowed = ", ".join(sorted(self.tools)) or "none"
            return f"{tool} is not available to {self.label} (allowed tools: {allowed})."
        if tool == SHELL_TOOL:
            return self._check_shell((arguments or {}).get("command"))
        if (
            mcp_names.server_of(tool) is not None
            and approval is not ApprovalClass.AUTO
            and not self.writes
        ):
            # Only a server the user marked read-only is known to change nothing.
            return (
                f"{tool} is not available to {self.label}: its MCP server is not marked "
                'read-only (trust = "read_only" in the config), so it may change things.'
            )
        if approval is ApprovalClass.SUGGEST:
            if plan_artifact and (self.writes or self.plan_artifacts):
                return None
            if not self.writes:
                return (
                    f"{tool} is not available to {self.label}: it may not modify files. "
                    "Report the change you would make instead."
                )
        return None

    def _check_shell(self, command: Any) -> str | None:
        if self.shell is None:
            return f"{SHELL_TOOL} is not available to {self.label} (no shell)."
        if self.shell is CommandClass.OTHER or not isinstance(command, str):
            return None
        kind = classify_command(command)
        if kind is CommandClass.READ_ONLY or (
            kind is CommandClass.TEST and self.shell is CommandClass.TEST
        ):
            return None
        allowed = "read-only" if self.shell is CommandClass.READ_ONLY else "test"
        return (
            f"Only {allowed} commands are allowed for {self.label}, and this one could not "
            f"be proven {allowed}: {command!r}"
        )

    def offers(self, tool: str, approval: ApprovalClass, *, plan_artifact: bool = False) -> bool:
        """Whether a tool is worth offering at all (a shell scope still offers exec_shell)."""
        if tool == SHELL_TOOL:
            return (self.tools is None or tool in self.tools) and self.shell is not None
        return self.check(tool, approval, plan_artifact=plan_artifact) is None

    def to_json(self) -> dict[str, Any]:
        return {
            "writes": self.writes,
            "plan_artifacts": self.plan_artifacts,
            "shell": self.shell.value if self.shell is not None else None,
            "tools": sorted(self.tools) if self.tools is not None else None,
            "label": self.label,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> Authority:
        """Read a persisted authority; anything missing or unreadable reads as read-only."""
        if not isinstance(data, Mapping):
            return READ_ONLY
        shell = data.get("shell")
        tools = data.get("tools")
        return cls(
            writes=data.get("writes") is True,
            plan_artifacts=data.get("plan_artifacts") is True,
            shell=CommandClass(shell) if shell in {c.value for c in CommandClass} else None,
            tools=frozenset(str(t) for t in tools) if isinstance(tools, list) else None,
            label=str(data.get("label") or "restored"),
        )


def tool_listed(tools: AbstractSet[str] | Sequence[str], tool: str) -> bool:
    """Whether a tool list allows `tool`: by name, or `mcp__<server>` for a server's tools."""
    if tool in tools:
        return True
    server = mcp_names.server_of(tool)
    return server is not None and mcp_names.server_entry(server) in tools


READ_ONLY = Authority(
    writes=False, plan_artifacts=False, shell=CommandClass.READ_ONLY, label="a read-only agent"
)


def _join_labels(outer: str, inner: str) -> str:
    if outer in (FULL_LABEL, inner):
        return inner
    if inner == FULL_LABEL:
        return outer
    return f"{inner} opened by {outer}"
