"""The canonical sub-agent roles: names, aliases, postures and system prompts."""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum

from codewhale.authority import Authority
from codewhale.mcp import names as mcp_names
from codewhale.permissions import CommandClass


class Role(StrEnum):
    GENERAL = "general"
    EXPLORE = "explore"
    PLAN = "plan"
    REVIEW = "review"
    IMPLEMENTER = "implementer"
    VERIFIER = "verifier"
    CUSTOM = "custom"


ALIASES: dict[Role, tuple[str, ...]] = {
    Role.GENERAL: ("worker", "default", "general-purpose", "general_purpose"),
    Role.EXPLORE: ("explorer", "exploration"),
    Role.PLAN: ("planning", "planner", "awaiter"),
    Role.REVIEW: ("reviewer", "code-review", "code_review", "code-reviewer"),
    Role.IMPLEMENTER: ("implement", "implementation", "builder"),
    Role.VERIFIER: ("verify", "verification", "validator", "tester"),
    Role.CUSTOM: (),
}

AGENT_TOOLS = frozenset(
    {"agent_open", "agent_eval", "agent_close", "agent_types", "agent_wait", "agent_apply"}
)


class ServedTools(frozenset[str]):
    """Tool names a child may be given. An MCP name counts when its server is one of the
    session's: servers list their tools only once they start, after definitions are read,
    so `mcp__<server>__<tool>` is taken on trust and `mcp__<server>` (all of a server's
    tools) is a member, which a `disallowedTools` list can subtract."""

    mcp_servers: frozenset[str]

    def __new__(cls, names: Iterable[str], mcp_servers: Iterable[str] = ()) -> ServedTools:
        servers = frozenset(mcp_servers)
        served = super().__new__(cls, [*names, *(mcp_names.server_entry(s) for s in servers)])
        served.mcp_servers = servers
        return served

    def __contains__(self, name: object) -> bool:
        if frozenset.__contains__(self, name):
            return True
        return isinstance(name, str) and mcp_names.server_of(name) in self.mcp_servers


def served_tools(tool_names: Iterable[str], mcp_servers: Iterable[str] = ()) -> ServedTools:
    """Every tool name a child could be given: these tools, the agent tools and the tools
    of these MCP servers."""
    return ServedTools([*tool_names, *AGENT_TOOLS], mcp_servers)


# (writes, plan artifacts, shell scope, description) per role; spec §1's table.
_POSTURES: dict[Role, tuple[bool, bool, CommandClass | None, str]] = {
    Role.GENERAL: (True, True, CommandClass.OTHER, "full access"),
    Role.EXPLORE: (False, False, CommandClass.READ_ONLY, "read-only"),
    Role.PLAN: (False, True, CommandClass.READ_ONLY, "read-only plus plan artifacts"),
    Role.REVIEW: (False, False, None, "read-only, no shell"),
    Role.IMPLEMENTER: (True, True, CommandClass.OTHER, "full access"),
    Role.VERIFIER: (False, False, CommandClass.TEST, "read-only plus test commands"),
    Role.CUSTOM: (True, True, CommandClass.OTHER, "explicit tool list"),
}


def role_authority(role: Role, type_name: str, tools: Iterable[str] | None = None) -> Authority:
    """The ceiling a role imposes by itself (before its opener's authority narrows it).

    `tools` None leaves the choice to the posture; an empty list allows no tool at all.
    """
    writes, plan_artifacts, shell, description = _POSTURES[role]
    return Authority(
        writes=writes,
        plan_artifacts=plan_artifacts,
        shell=shell,
        tools=frozenset(tools) if tools is not None else None,
        label=f"the {type_name} role ({description})",
    )


def posture_description(role: Role) -> str:
    """What the role may do, in a few words ("read-only, no shell")."""
    return _POSTURES[role][3]


UI_COLORS = {
    Role.GENERAL: "white",
    Role.EXPLORE: "blue",
    Role.PLAN: "green",
    Role.REVIEW: "yellow",
    Role.IMPLEMENTER: "cyan",
    Role.VERIFIER: "magenta",
    Role.CUSTOM: "white",
}


class RoleError(ValueError):
    """A role or type the runtime cannot use; the message is what the model reads."""


def role_help(definition_names: list[str] | tuple[str, ...] = ()) -> str:
    parts = []
    for role in Role:
        aliases = ALIASES[role]
        parts.append(f"{role.value} (aliases: {', '.join(aliases)})" if aliases else role.value)
    text = ", ".join(parts)
    if definition_names:
        text += ", " + ", ".join(definition_names)
    return text


def lookup_role(name: str) -> Role | None:
    """The canonical role for a name or alias (case-insensitive, trimmed), else None."""
    key = name.strip().lower()
    for role in Role:
        if key == role.value or key in ALIASES[role]:
            return role
    return None


OUTPUT_CONTRACT = """\
When you finish, end your final message with these five sections, in this order:

SUMMARY: one paragraph on what you did and what happened.
CHANGES: the files you modified, one per line; "None." if you changed nothing.
EVIDENCE: one bullet per finding, citing path:line-range where it applies.
RISKS: what could go wrong, or what the parent should double-check.
BLOCKERS: what stopped you; "None." if you finished cleanly."""

_INTROS: dict[Role, str] = {
    Role.GENERAL: (
        "You are a sub-agent carrying out one assignment from a parent agent. Work "
        "independently with the tools you have, finish the whole assignment, and verify "
        "what you claim. The parent sees only your final message."
    ),
    Role.EXPLORE: (
        "You are an exploration sub-agent. Map the code relevant to the assignment quickly "
        "and read-only: search, open files, follow references. Do not modify anything. "
        "Every claim you report cites path:line evidence the parent can open."
    ),
    Role.PLAN: (
        "You are a planning sub-agent. Study the code and produce a concrete, ordered "
        "strategy the parent can execute. You may record it with update_plan and "
        "checklist_write, but you do not carry it out and do not modify source files."
    ),
    Role.REVIEW: (
        "You are a review sub-agent. Read the change or code you were given and grade it: "
        "list findings with a severity (critical, major, minor, nit), where they are, and "
        "how to fix them. Describe fixes; never apply them."
    ),
    Role.IMPLEMENTER: (
        "You are an implementer sub-agent. Land exactly the change specified, with the "
        "smallest edit that does it: no drive-by refactoring. Run a quick check that the "
        "change works before you report."
    ),
    Role.VERIFIER: (
        "You are a verification sub-agent. Run the tests or checks you were asked to run "
        "and report pass or fail with the exact failing assertions and output. Do not fix "
        "anything; put likely fixes under RISKS."
    ),
    Role.CUSTOM: (
        "You are a sub-agent with a deliberately narrow tool set. Do the assignment with "
        "the tools you were given; if they are not enough, say so under BLOCKERS."
    ),
}


def role_prompt(role: Role, intro: str | None = None, role_name: str | None = None) -> str:
    """Intro + the output contract (once) + the role line."""
    name = role_name or role.value
    return (
        f"{(intro or _INTROS[role]).strip()}\n\n{OUTPUT_CONTRACT}\n\n"
        f"You are operating in the role of `{name}`."
    )
