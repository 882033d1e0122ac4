"""The agent types a session offers, as the user lists them and as the model routes by them.

Users read every type with its source, posture, model and problems (`codewhale agents
types`, `/agent types`). The model reads a bounded routing list in `agent_open`'s
description (a real collection's full descriptions run to 60-70k characters) and
the full text through the `agent_types` tool.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from codewhale.config_models import SubagentsConfig
from codewhale.mcp import names as mcp_names
from codewhale.subagents.budget import Budget
from codewhale.subagents.definition_problems import unknown_type_error
from codewhale.subagents.definitions import (
    BUILTIN,
    AgentDefinition,
    DefinitionSet,
    HeldDefinition,
)
from codewhale.subagents.roles import (
    AGENT_TOOLS,
    Role,
    posture_description,
    role_authority,
)
from codewhale.subagents.spawn import configured_model
from codewhale.tools.base import Tool

MAX_ROUTED = 40
MAX_ROUTING_CHARS = 4000
MAX_SENTENCE_CHARS = 160
MAX_LISTED_DESCRIPTION = 400


@dataclass(frozen=True)
class TypeEntry:
    """One line of the listing: a role, a definition, or a file that failed to load."""

    name: str
    source: str
    base_role: str | None
    model: str | None  # as it resolves now; None = the parent's model
    tools: list[str] | None  # our names; None = chosen when opened (custom)
    description: str
    color: str | None = None
    warnings: tuple[str, ...] = ()
    error: str | None = None
    # A same-named definition in a stronger location is used instead of this one.
    shadowed_by: str | None = None
    # A project definition waiting for the user's trust: why, and what is used meanwhile.
    not_trusted: str | None = None
    # Waiting whole (it shadows a built-in): listed, not used until trusted.
    held: bool = False
    # A definition's frontmatter budget: what its children get unless agent_open says.
    budget: Budget = field(default_factory=Budget)

    @property
    def usable(self) -> bool:
        return self.error is None and self.shadowed_by is None and not self.held

    def to_json(self) -> dict[str, Any]:
        budget = {"budget": limits} if (limits := self.budget.to_json()) else {}
        return {
            "name": self.name,
            "source": self.source,
            "base_role": self.base_role,
            "model": self.model,
            "tools": self.tools,
            "description": self.description,
            "color": self.color,
            "warnings": list(self.warnings),
            "error": self.error,
            "shadowed_by": self.shadowed_by,
            "not_trusted": self.not_trusted,
            **budget,
        }


class AgentCatalog:
    def __init__(
        self,
        definitions: DefinitionSet,
        tools: Sequence[Tool],
        config: SubagentsConfig,
        base_url: str,
    ) -> None:
        self.definitions = definitions
        self.tools = list(tools)
        self.config = config
        self.base_url = base_url

    # -- for users ----------------------------------------------------------------------

    def entries(self) -> list[TypeEntry]:
        """Roles, definitions strongest first, held ones, shadowed ones, broken files."""
        held = {hold.definition.source: hold for hold in self.definitions.held}
        entries = [self._role_entry(role) for role in Role]
        entries += [
            self._definition_entry(d, hold=held.get(d.source))
            for d in self.definitions.definitions.values()
        ]
        entries += [
            self._definition_entry(hold.definition, hold=hold)
            for hold in self.definitions.held
            if hold.shadows
        ]
        for shadowed in self.definitions.shadowed:
            winner = self.definitions.definitions[shadowed.name].source
            entries.append(self._definition_entry(shadowed, shadowed_by=winner))
        entries += [
            TypeEntry(
                name=_file_stem(error.path),
                source=error.path,
                base_role=None,
                model=None,
                tools=None,
                description="",
                error=f"line {error.line}: {error.reason}",
            )
            for error in self.definitions.errors
        ]
        return entries

    def _role_entry(self, role: Role) -> TypeEntry:
        return TypeEntry(
            name=role.value,
            source=BUILTIN,
            base_role=role.value,
            model=configured_model(role, role.value, None, self.config, self.base_url),
            tools=None if role is Role.CUSTOM else self._posture_tools(role, None),
            description=f"the {role.value} role ({posture_description(role)})",
        )

    def _definition_entry(
        self,
        definition: AgentDefinition,
        shadowed_by: str | None = None,
        hold: HeldDefinition | None = None,
    ) -> TypeEntry:
        role = definition.base_role
        return TypeEntry(
            name=definition.name,
            source=definition.source,
            base_role=role.value,
            model=configured_model(role, definition.name, definition, self.config, self.base_url),
            tools=self._posture_tools(role, definition.tools),
            description=definition.description,
            color=definition.color,
            warnings=definition.warnings,
            shadowed_by=shadowed_by,
            not_trusted=hold.note if hold is not None else None,
            held=hold is not None and hold.shadows,
            budget=definition.budget,
        )

    def _posture_tools(self, role: Role, listed: tuple[str, ...] | None) -> list[str]:
        """What a child of this role and tool list is offered (agent tools need max_depth)."""
        authority = role_authority(role, role.value, listed)
        names = [
            tool.name
            for tool in self.tools
            if authority.offers(tool.name, tool.approval, plan_artifact=tool.plan_artifact)
        ]
        # MCP tools are known only once their server is up; the listing names them as written.
        extra = [n for n in listed or () if n in AGENT_TOOLS or mcp_names.server_of(n)]
        return names + extra

    # -- for the model ------------------------------------------------------------------

    def routing_text(self) -> str:
        """At most MAX_ROUTED definitions by name and first sentence, within a few KB."""
        definitions = list(self.definitions.definitions.values())
        lines: list[str] = []
        size = 0
        for definition in definitions[:MAX_ROUTED]:
            line = f"\n- {definition.name}: {first_sentence(definition.description)}"
            if size + len(line) > MAX_ROUTING_CHARS:
                break
            lines.append(line)
            size += len(line)
        if not lines:
            return ""
        left = len(definitions) - len(lines)
        more = f"\n- … and {left} more." if left else ""
        return (
            " Agent definitions (pass the name as type; agent_types shows their full "
            f"descriptions{' and the rest' if left else ''}):" + "".join(lines) + more
        )

    def listing(self, name: str | None = None) -> dict[str, Any]:
        """The `agent_types` tool's reply: every type briefly, or one in full."""
        entries = [entry for entry in self.entries() if entry.usable]
        if name:
            key = name.strip().lower()
            match = [entry for entry in entries if entry.name == key]
            if not match:
                raise LookupError(str(unknown_type_error(name, self.definitions)))
            # Trusting is the user's decision: the model is not handed the command for it.
            return {k: v for k, v in match[0].to_json().items() if k != "not_trusted"}
        return {
            "types": [
                {
                    "name": entry.name,
                    "base_role": entry.base_role,
                    "description": _clip(entry.description, MAX_LISTED_DESCRIPTION),
                }
                for entry in entries
            ]
        }


def first_sentence(description: str) -> str:
    """The description's opening sentence, without Claude Code's `<example>` blocks."""
    text = re.sub(r"<example>.*?(</example>|$)", " ", description, flags=re.S | re.I)
    text = " ".join(text.replace("\\n", " ").split())
    match = re.search(r"(?<=[.!?])\s", text)
    return _clip(text[: match.start()] if match else text, MAX_SENTENCE_CHARS)


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _file_stem(path: str) -> str:
    return path.rsplit("/", 1)[-1].removesuffix(".md")


def format_entries(entries: Sequence[TypeEntry]) -> str:
    """The listing as text: one block per type, problems indented under it."""
    blocks = []
    for entry in entries:
        if entry.error is not None:
            blocks.append(f"{entry.name}  ({entry.source})\n  error: {entry.error}")
            continue
        model = entry.model or "the parent's model"
        tools = ", ".join(entry.tools) if entry.tools is not None else "listed when opened"
        block = (
            f"{entry.name}  ({entry.source})\n"
            f"  base role: {entry.base_role} · model: {model} · tools: {tools or 'none'}"
        )
        if limits := entry.budget.to_json():
            block += "\n  budget: " + " · ".join(f"{k}={v:,}" for k, v in limits.items())
        if entry.shadowed_by:
            block += f"\n  not used: {entry.shadowed_by} defines '{entry.name}' too and comes first"
        if entry.not_trusted:
            block += f"\n  {entry.not_trusted}"
        block += "".join(f"\n  warning: {warning}" for warning in entry.warnings)
        blocks.append(block)
    return "\n".join(blocks)
