"""Which project agent definitions wait for the user's trust, and remembering that trust.

A cloned repository's `.codewhale/agents/` or `.claude/agents/` could turn the read-only
`explore` into a writer with a shell, or send the user's requests (and key) to a model
of its choosing. So a project definition that shadows a built-in role, alias or
definition (or one of the user's own), or that names a model, takes effect only once
the user has trusted it in this workspace; until then the name keeps its built-in
meaning, or the definition runs on the model configured for its role. The user's own
directories are trusted as they are. What is remembered is the file's digest, so a file
the repository changes later is held again.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from pathlib import Path

from codewhale.digest_trust import DigestTrustStore
from codewhale.paths import (
    UserDirs,
    agent_definition_dirs,
    claude_home,
    user_agents_dir,
    user_dirs,
)
from codewhale.subagents.definitions import (
    BUILTIN,
    CLAUDE_MODEL_ALIAS,
    AgentDefinition,
    DefinitionSet,
    HeldDefinition,
    load_definitions,
)
from codewhale.subagents.roles import lookup_role


def trust_file(dirs: UserDirs) -> Path:
    return dirs.state_dir / "agent-trust.json"


def trust_store(env: Mapping[str, str] | None = None) -> DigestTrustStore:
    return DigestTrustStore(trust_file(user_dirs(env)))


def project_dirs(workspace: Path, env: Mapping[str, str] | None = None) -> list[Path]:
    """The workspace's agent directories; one that is also a user directory (a session
    opened in the home directory) stays the user's."""
    own = {user_agents_dir(user_dirs(env)).resolve(), (claude_home(env) / "agents").resolve()}
    return [path for path in agent_definition_dirs(workspace, env) if path.resolve() not in own]


def load_workspace_definitions(
    workspace: Path, known_tools: AbstractSet[str], env: Mapping[str, str] | None = None
) -> DefinitionSet:
    """The definitions a session in `workspace` uses, untrusted project ones held back."""
    loaded = load_definitions(agent_definition_dirs(workspace, env), known_tools)
    trusted = trust_store(env).remembered(workspace)
    loaded.choose(holds(loaded, project_dirs(workspace, env), trusted))
    return loaded


def holds(
    loaded: DefinitionSet, project: Sequence[Path], trusted: Mapping[str, str]
) -> dict[str, HeldDefinition]:
    """By source: each project definition that needs a trust it has not been given."""
    found = {}
    for index, definition in enumerate(loaded.loaded):
        if not _inside(definition.source, project):
            continue
        if trusted.get(definition.name) == definition.digest:
            continue
        weaker = loaded.loaded[index + 1 :]
        if (hold := _hold(definition, weaker, project)) is not None:
            found[definition.source] = hold
    return found


def _hold(
    definition: AgentDefinition, weaker: Sequence[AgentDefinition], project: Sequence[Path]
) -> HeldDefinition | None:
    name = definition.name
    reasons: list[str] = []
    instead = ""
    role = lookup_role(name)
    if role is not None:
        alias = "" if name == role.value else f"'{name}', an alias of "
        reasons.append(f"it shadows {alias}the built-in {role.value} role")
        instead = f"the built-in {role.value} role is used"
    # The next definition of the name outside the project is what the name means without it.
    base = next((d for d in weaker if d.name == name and not _inside(d.source, project)), None)
    if base is not None:
        whose = "the built-in definition" if base.source == BUILTIN else "your definition"
        where = "" if base.source == BUILTIN else f" in {base.source}"
        reasons.append(f"it shadows {whose} '{name}'{where}")
        instead = f"{whose} is used"
    shadows = bool(reasons)
    # Claude Code's aliases never pick a model (AgentDefinition.model_for).
    model = definition.model
    if model is not None and not CLAUDE_MODEL_ALIAS.fullmatch(model):
        reasons.append(f"it names the model '{model}'")
        instead = instead or "the model configured for its role is used"
    if not reasons:
        return None
    return HeldDefinition(definition, tuple(reasons), shadows, instead)


def _inside(source: str, directories: Iterable[Path]) -> bool:
    return source != BUILTIN and any(Path(source).is_relative_to(d) for d in directories)


def pick_held(loaded: DefinitionSet, names: Iterable[str]) -> list[HeldDefinition]:
    """The held definitions with these names; an unknown name raises LookupError."""
    by_name: dict[str, HeldDefinition] = {}
    for hold in loaded.held:  # strongest first: the one that would take effect
        by_name.setdefault(hold.definition.name, hold)
    wanted = list(dict.fromkeys(name.strip().lower() for name in names))
    if unknown := [name for name in wanted if name not in by_name]:
        waiting = ", ".join(by_name) or "none here"
        raise LookupError(
            f"no agent definition waiting for trust named {', '.join(unknown)} (waiting: {waiting})"
        )
    return [by_name[name] for name in wanted]


def trust_held(
    loaded: DefinitionSet,
    workspace: Path,
    chosen: Sequence[HeldDefinition],
    env: Mapping[str, str] | None = None,
) -> None:
    """Remember these definitions as trusted here and use them in `loaded` from now on."""
    trust_store(env).trust(
        workspace, {hold.definition.name: hold.definition.digest for hold in chosen}
    )
    sources = {hold.definition.source for hold in chosen}
    loaded.choose(
        {h.definition.source: h for h in loaded.held if h.definition.source not in sources}
    )
