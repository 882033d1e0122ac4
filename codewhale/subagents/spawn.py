"""Turn raw `agent_open` arguments into a validated SpawnRequest, with the spec's messages."""

from __future__ import annotations

import re
from collections.abc import Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from codewhale.authority import tool_listed
from codewhale.config_models import SubagentsConfig
from codewhale.permissions import confine
from codewhale.providers.presets import PRESETS
from codewhale.providers.settings import ProviderSettings
from codewhale.subagents.budget import Budget, BudgetError, parse_budget
from codewhale.subagents.definition_problems import unknown_type_error
from codewhale.subagents.definitions import AgentDefinition, DefinitionSet
from codewhale.subagents.roles import Role, RoleError, lookup_role
from codewhale.subagents.worktree import Isolation

NAME_PATTERN = re.compile(r"^[A-Za-z0-9._-]+$")
ROLE_MODEL_KEYS = {
    Role.GENERAL: "worker_model",
    Role.EXPLORE: "explorer_model",
    Role.PLAN: "awaiter_model",
    Role.REVIEW: "review_model",
    Role.CUSTOM: "custom_model",
}


class SpawnError(ValueError):
    """agent_open arguments the runtime refuses; the message is returned to the model."""


class FanOutLimitError(SpawnError):
    """One turn has opened as many children as `[subagents] max_children_per_turn` allows."""


@dataclass(frozen=True)
class SpawnRequest:
    prompt: str
    description: str
    type_name: str
    role: Role
    definition: AgentDefinition | None
    name: str | None
    # None: the role's posture decides; () : no tools at all (a definition's `tools: []`).
    allowed_tools: tuple[str, ...] | None
    model: str
    fork_context: bool
    max_depth: int
    # Where it starts; with isolation: worktree, the same place in its worktree once made.
    workspace: Path
    isolation: Isolation = Isolation.NONE
    budget: Budget = field(default_factory=Budget)


def _budget(
    arguments: Mapping[str, Any], config: SubagentsConfig, definition: AgentDefinition | None
) -> Budget:
    try:
        return parse_budget(arguments, config, definition.budget if definition else None)
    except BudgetError as error:
        raise SpawnError(str(error)) from None


def first_of(arguments: Mapping[str, Any], *keys: str) -> Any:
    for key in keys:
        if arguments.get(key) is not None:
            return arguments[key]
    return None


def resolve_type(
    arguments: Mapping[str, Any], definitions: DefinitionSet
) -> tuple[str, Role, AgentDefinition | None]:
    """(type name, role, definition) from `type`/`role` and their aliases.

    `type` names a definition first and a role otherwise, so a user's definition called
    like a role is reachable; `role` always means the built-in role, so the role stays
    reachable too. Given both, the definition's base role must be that role.
    """
    type_raw = first_of(arguments, "type", "agent_type", "subagent_type", "subagent_name")
    role_raw = first_of(arguments, "role", "agent_role")

    def role_of(raw: Any) -> Role:
        role = lookup_role(str(raw))
        if role is None:
            raise unknown_type_error(str(raw), definitions)
        return role

    def type_of(raw: Any) -> tuple[str, Role, AgentDefinition | None]:
        definition = definitions.definitions.get(str(raw).strip().lower())
        if definition is not None:
            return definition.name, definition.base_role, definition
        role = role_of(raw)
        return role.value, role, None

    try:
        if type_raw is None and role_raw is None:
            return Role.GENERAL.value, Role.GENERAL, None
        if type_raw is None:
            role = role_of(role_raw)
            return role.value, role, None
        resolved = type_of(type_raw)
        if role_raw is not None and role_of(role_raw) != resolved[1]:
            raise SpawnError("Conflicting type/agent_type and role/agent_role values")
        return resolved
    except RoleError as error:
        raise SpawnError(str(error)) from None


def clean_tool_list(raw: Any, known: AbstractSet[str]) -> tuple[str, ...]:
    if raw is None:
        return ()
    if isinstance(raw, str):
        raw = [part for part in raw.split(",")]
    if not isinstance(raw, list) or not all(isinstance(item, str) for item in raw):
        raise SpawnError("allowed_tools must be a list of tool names")
    names: list[str] = []
    for item in raw:
        name = item.strip()
        if name and name not in names:
            names.append(name)
    unknown = [name for name in names if name not in known]
    if unknown:
        raise SpawnError(f"Sub-agent requested unavailable tools: {', '.join(unknown)}")
    return tuple(names)


def configured_model(
    role: Role,
    type_name: str,
    definition: AgentDefinition | None,
    config: SubagentsConfig,
    base_url: str = "",
) -> str | None:
    """The definition's own model, else the config's choice for the role; None = the parent's.

    A Claude model alias in a definition defers to the config (AgentDefinition.model_for).
    """
    if definition is not None and (own := definition.model_for(base_url)):
        return own
    by_map = {lookup_role(key) or key: value for key, value in config.models.items()}
    candidates = [
        by_map.get(role),
        getattr(config, ROLE_MODEL_KEYS[role]) if role in ROLE_MODEL_KEYS else None,
        by_map.get(type_name.lower()),
        config.default_model,
    ]
    return next((model for model in candidates if model), None)


def tool_limit(
    allowed: tuple[str, ...], definition: AgentDefinition | None
) -> tuple[str, ...] | None:
    """The child's tool list: the model's `allowed_tools` within the definition's `tools`."""
    if definition is None or definition.tools is None:
        return allowed or None
    if not allowed:
        return definition.tools
    # `mcp__<server>` in the definition covers each of that server's tools.
    outside = [name for name in allowed if not tool_listed(definition.tools, name)]
    if outside:
        raise SpawnError(
            f"allowed_tools may only narrow the '{definition.name}' agent's tools "
            f"({', '.join(definition.tools) or 'none'}); not in it: {', '.join(outside)}"
        )
    return allowed


def resolve_model(
    explicit: str | None,
    role: Role,
    type_name: str,
    definition: AgentDefinition | None,
    config: SubagentsConfig,
    parent_model: str,
    base_url: str = "",
) -> str:
    """explicit > definition > role key > type key > default_model > parent (spec §11)."""
    return (
        explicit or configured_model(role, type_name, definition, config, base_url) or parent_model
    )


def validate_model(model: str, settings: ProviderSettings) -> None:
    """The official DeepSeek endpoint accepts only its own ids; others pass through."""
    preset = PRESETS.get(settings.provider)
    if preset is None or settings.base_url.rstrip("/") != preset.base_url:
        return
    if preset.accepted_models and model not in preset.accepted_models:
        raise SpawnError(
            f"Invalid model '{model}' for provider {preset.label} "
            f"(accepted: {', '.join(preset.accepted_models)})"
        )


def parse_spawn(
    arguments: Mapping[str, Any],
    *,
    workspace: Path,
    definitions: DefinitionSet,
    known_tools: AbstractSet[str],
    config: SubagentsConfig,
    settings: ProviderSettings,
) -> SpawnRequest:
    prompt = first_of(arguments, "prompt", "message", "objective")
    if not isinstance(prompt, str) or not prompt.strip():
        raise SpawnError("agent_open needs a non-empty 'prompt' (aliases: message, objective)")
    type_name, role, definition = resolve_type(arguments, definitions)
    allowed = clean_tool_list(arguments.get("allowed_tools"), known_tools)
    if role is Role.CUSTOM and not allowed:
        raise SpawnError("Custom sub-agent requires a non-empty allowed_tools list")
    tools = tool_limit(allowed, definition)
    max_depth = arguments.get("max_depth", 0)
    if not isinstance(max_depth, int) or isinstance(max_depth, bool) or not 0 <= max_depth <= 3:
        raise SpawnError("max_depth must be between 0 and 3")
    name = first_of(arguments, "name", "session_name")
    if name is not None and (not isinstance(name, str) or not NAME_PATTERN.match(name)):
        raise SpawnError("name must match [A-Za-z0-9._-]+")
    fork = first_of(arguments, "fork_context", "forkContext", "inherit_context")
    cwd = arguments.get("cwd")
    child_root = workspace
    if cwd is not None:
        try:
            child_root = confine(workspace, str(cwd))
        except ValueError as error:
            raise SpawnError(f"cwd: {error}") from None
        if not child_root.is_dir():
            raise SpawnError(f"cwd '{cwd}' is not a directory inside the workspace")
    explicit = arguments.get("model")
    model = resolve_model(
        explicit if isinstance(explicit, str) else None,
        role,
        type_name,
        definition,
        config,
        settings.model,
        settings.base_url,
    )
    validate_model(model, settings)
    description = arguments.get("description")
    isolation = _isolation(arguments.get("isolation"), definition)
    return SpawnRequest(
        prompt=prompt,
        description=str(description).strip() if description else _title(prompt),
        type_name=type_name,
        role=role,
        definition=definition,
        name=name,
        allowed_tools=tools,
        model=model,
        fork_context=bool(fork),
        max_depth=max_depth,
        workspace=child_root,
        isolation=isolation,
        budget=_budget(arguments, config, definition),
    )


def _isolation(raw: Any, definition: AgentDefinition | None) -> Isolation:
    """The argument, else the definition's `isolation`, else none."""
    if raw is None:
        return definition.isolation if definition is not None else Isolation.NONE
    try:
        return Isolation.parse(raw)
    except ValueError as error:
        raise SpawnError(str(error)) from None


def _title(prompt: str) -> str:
    words = prompt.split()
    return " ".join(words[:5]) + ("…" if len(words) > 5 else "")


def assignment_message(request: SpawnRequest) -> str:
    objective = " ".join(request.prompt.split())[:200]
    isolation = (
        "- isolation: you work in a git worktree of your own; your changes reach the "
        "parent's files only when it applies them\n"
        if request.isolation is Isolation.WORKTREE
        else ""
    )
    return (
        "Assignment metadata:\n"
        f"- objective: {objective}\n"
        f"- role: {request.role.value}\n"
        f"- type: {request.type_name}\n{isolation}\n"
        f"Task:\n{request.prompt}"
    )
