"""Agent definitions: Markdown files with YAML frontmatter whose body is the system prompt.

Locations, strongest first (spec §1.1): the project's `.codewhale/agents/` and
`.claude/agents/`, the user's `<config dir>/agents/` and `~/.claude/agents/`, then
the built-ins shipped in `codewhale/data/agents/`. A name in a stronger location
shadows the same name in a weaker one. Claude Code files load unchanged: their
tool names map to ours, model aliases defer to the configured model, and what we
cannot honour is reported as a warning on the definition. A broken file is an
error naming its path and line; the other files still load. A project definition
that shadows a built-in or names a model waits for the user's trust
(definition_trust decides which; `DefinitionSet.choose` applies it).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path
from typing import Any

from codewhale.frontmatter import Frontmatter, FrontmatterError, read_frontmatter
from codewhale.subagents.budget import FIELDS as BUDGET_FIELDS
from codewhale.subagents.budget import Budget, BudgetError, budget_value
from codewhale.subagents.definition_tools import ToolListError, select_tools
from codewhale.subagents.roles import Role, lookup_role
from codewhale.subagents.worktree import Isolation

# The spec's [a-z0-9-]+, plus the dots and underscores of names in public collections
# (`dotnet-framework-4.8-expert`); still lower case, so a name has one spelling.
NAME_PATTERN = re.compile(r"^[a-z0-9][a-z0-9._-]*$")
BUILTIN = "built-in"
FIELDS = frozenset(
    {
        "name",
        "description",
        "tools",
        "disallowedTools",
        "disallowed_tools",
        "base_role",
        "model",
        "color",
        "max_steps",
        "isolation",
        "skills",
        *BUDGET_FIELDS,
    }
)
# Colour names agent files use (Claude Code's palette among them) -> Rich colours.
COLORS = {
    "red": "red",
    "blue": "blue",
    "green": "green",
    "yellow": "yellow",
    "magenta": "magenta",
    "cyan": "cyan",
    "white": "white",
    "purple": "purple",
    "orange": "dark_orange",
    "pink": "hot_pink",
    "gray": "grey50",
    "grey": "grey50",
}
# Claude Code's model aliases, with or without the `[1m]` (long context) suffix: they
# name Anthropic models, so here they mean "the model configured for this role", as
# does any `claude-*` id off Anthropic's endpoint.
CLAUDE_MODEL_ALIAS = re.compile(r"(default|sonnet|opus|haiku|opusplan|best)(\[1m\])?", re.I)
INHERIT = frozenset({"", "inherit"})


@dataclass(frozen=True)
class AgentDefinition:
    name: str
    description: str
    prompt: str
    base_role: Role
    tools: tuple[str, ...] | None  # None = the base role's posture decides; () = no tools
    model: str | None  # as written; None = inherit
    color: str | None  # a Rich colour name
    max_steps: int | None
    source: str  # the file's path, or "built-in"
    warnings: tuple[str, ...] = ()
    # `isolation: worktree`: opened in a git worktree of its own unless agent_open says otherwise.
    isolation: Isolation = Isolation.NONE
    # Skills whose instructions are put in the child's prompt from its start (`skills:`).
    skills: tuple[str, ...] = ()
    # `max_runtime_secs`, `max_tokens`, `max_cost_usd`: what agent_open leaves out.
    budget: Budget = field(default_factory=Budget)
    # sha256 of the file as read: what trusting a project definition pins.
    digest: str = ""

    @property
    def from_claude_code(self) -> bool:
        """Read from a `.claude/agents/` folder: written for Claude Code, whose models
        are Anthropic's."""
        return ".claude" in Path(self.source).parts

    def model_for(self, base_url: str) -> str | None:
        """The model this definition asks for on that endpoint; None defers to the config.

        Claude Code files name only Anthropic models (an alias, a `claude-*` id, or one
        Claude Code would reject): off Anthropic's endpoint each means the configured one.
        """
        model = self.model
        if model is None or CLAUDE_MODEL_ALIAS.fullmatch(model):
            return None
        if "anthropic.com" not in base_url and (
            model.lower().startswith("claude-") or self.from_claude_code
        ):
            return None
        return model


@dataclass(frozen=True)
class DefinitionError:
    path: str
    line: int
    reason: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.reason}"


class DefinitionParseError(ValueError):
    def __init__(self, line: int, reason: str) -> None:
        super().__init__(reason)
        self.line = line
        self.reason = reason


def parse_definition(text: str, source: str, known_tools: AbstractSet[str]) -> AgentDefinition:
    """One definition; raises DefinitionParseError with a line number."""
    try:
        front = read_frontmatter(text, FIELDS)
    except FrontmatterError as error:
        raise DefinitionParseError(error.line, error.reason) from None
    try:
        definition = _definition(front, source, known_tools)
    except DefinitionParseError:
        if front.yaml_error is not None:  # the line-by-line reading guessed wrong
            raise DefinitionParseError(front.yaml_error.line, front.yaml_error.reason) from None
        raise
    return replace(definition, digest=hashlib.sha256(text.encode("utf-8")).hexdigest())


def _definition(front: Frontmatter, source: str, known_tools: AbstractSet[str]) -> AgentDefinition:
    meta, warnings = front.fields, list(front.warnings)
    name = meta.get("name")
    if not isinstance(name, str) or not NAME_PATTERN.match(name):
        raise DefinitionParseError(
            front.line_of("name"), "'name' is required: lower-case letters, digits, '-', '.' or '_'"
        )
    description = meta.get("description")
    if not isinstance(description, str) or not description.strip():
        raise DefinitionParseError(front.line_of("description"), "'description' is required")
    base_role = lookup_role(str(meta.get("base_role", "general")))
    if base_role is None or base_role is Role.CUSTOM:
        raise DefinitionParseError(
            front.line_of("base_role"),
            f"base_role must be one of general, explore, plan, review, implementer, verifier; "
            f"got {meta.get('base_role')!r}",
        )
    max_steps = meta.get("max_steps")
    if max_steps is not None and (
        not isinstance(max_steps, int) or isinstance(max_steps, bool) or max_steps < 1
    ):
        raise DefinitionParseError(front.line_of("max_steps"), "max_steps must be >= 1")
    if not front.body.strip():
        raise DefinitionParseError(1, "the body (the agent's system prompt) is empty")
    try:
        isolation = Isolation.parse(meta.get("isolation", Isolation.NONE))
    except ValueError as error:
        raise DefinitionParseError(front.line_of("isolation"), str(error)) from None
    try:
        selection = select_tools(
            meta.get("tools"),
            meta.get("disallowedTools", meta.get("disallowed_tools")),
            known_tools,
        )
    except ToolListError as error:
        raise DefinitionParseError(front.line_of("tools"), f"tools {error}") from None
    if selection.dropped:
        left = "" if selection.names else "; it has no tools left"
        warnings.append(f"tools not available here, dropped: {', '.join(selection.dropped)}{left}")
    model = _model(meta.get("model"), warnings, claude_file=".claude" in Path(source).parts)
    color = _color(meta.get("color"), warnings)
    if unknown := sorted(str(key) for key in meta if key not in FIELDS):
        warnings.append(f"fields CodeWhale does not use, ignored: {', '.join(unknown)}")
    return AgentDefinition(
        name=name,
        description=description.strip(),
        prompt=front.body.strip(),
        base_role=base_role,
        tools=selection.names,
        model=model,
        color=color,
        max_steps=max_steps,
        source=source,
        warnings=tuple(warnings),
        isolation=isolation,
        skills=_skill_names(meta.get("skills")),
        budget=_budget(front),
    )


def _budget(front: Frontmatter) -> Budget:
    """The frontmatter's budget; a part that is not a positive number fails the file."""
    values: dict[str, Any] = {}
    for name in BUDGET_FIELDS:
        try:
            values[name] = budget_value(name, _number(front.fields.get(name)))
        except BudgetError as error:
            raise DefinitionParseError(front.line_of(name), str(error)) from None
    return Budget(**values)


def _number(raw: object) -> object:
    """`raw`, or the number it spells: a file strict YAML refused is read line by line,
    which keeps `0.5` as text."""
    if isinstance(raw, str):
        try:
            return float(raw)
        except ValueError:
            return raw
    return raw


def _skill_names(raw: object) -> tuple[str, ...]:
    """`skills:` as a YAML list or a comma-separated string."""
    items = raw.split(",") if isinstance(raw, str) else raw if isinstance(raw, list) else []
    return tuple(name for item in items if (name := str(item).strip()))


def _model(raw: object, warnings: list[str], *, claude_file: bool) -> str | None:
    if raw is None or str(raw).strip().lower() in INHERIT:
        return None
    model = str(raw).strip()
    if CLAUDE_MODEL_ALIAS.fullmatch(model):
        warnings.append(
            f"model '{model}' is a Claude Code alias: the model configured for its role is used"
        )
    elif model.lower().startswith("claude-"):
        warnings.append(
            f"model '{model}' is used only on Anthropic's endpoint; elsewhere the model "
            "configured for its role"
        )
    elif claude_file:
        warnings.append(
            f"model '{model}' is not one Claude Code knows (a Claude Code file names "
            "Anthropic models): the model configured for its role is used"
        )
    return model


def _color(raw: object, warnings: list[str]) -> str | None:
    if raw is None:
        return None
    color = COLORS.get(str(raw).strip().lower())
    if color is None:
        warnings.append(f"unknown color {raw!r} (use one of {', '.join(COLORS)}); role colour used")
    return color


@dataclass(frozen=True)
class HeldDefinition:
    """A project definition held back until the user trusts it (definition_trust)."""

    definition: AgentDefinition
    reasons: tuple[str, ...]  # "it shadows the built-in explore role", ...
    # True: the name keeps meaning what it meant without the file; False: the
    # definition is used, but not the model it names.
    shadows: bool
    instead: str  # what is used meanwhile, in words

    @property
    def note(self) -> str:
        """Why it is held, what is used instead and how to trust it, in one line."""
        name = self.definition.name
        return (
            f"not trusted: {'; '.join(self.reasons)}; {self.instead} until you run "
            f"`codewhale agents trust {name}` or `/agent trust {name}`"
        )


@dataclass
class DefinitionSet:
    definitions: dict[str, AgentDefinition]
    errors: list[DefinitionError] = field(default_factory=list)
    # Definitions a same-named one in a stronger location replaced: listed, never used.
    shadowed: list[AgentDefinition] = field(default_factory=list)
    # Project definitions waiting for the user's trust; see `choose`.
    held: list[HeldDefinition] = field(default_factory=list)
    # Every definition read, strongest location first: what `choose` picks from.
    loaded: list[AgentDefinition] = field(default_factory=list)

    def names(self) -> list[str]:
        return sorted(self.definitions)

    def choose(self, holds: Mapping[str, HeldDefinition]) -> None:
        """Which definition each name means, strongest first, given the holds by source.

        A held definition that shadows yields its name to the next one (or the built-in
        role); one held for its model alone is used without it.
        """
        self.definitions, self.shadowed, self.held = {}, [], []
        for definition in self.loaded:
            if definition.name in self.definitions:
                self.shadowed.append(definition)
                continue
            hold = holds.get(definition.source)
            if hold is not None:
                self.held.append(hold)
                if hold.shadows:
                    continue
                definition = replace(definition, model=None)
            self.definitions[definition.name] = _with_clash_note(definition)


def load_definitions(
    directories: list[Path], known_tools: AbstractSet[str], *, builtins: bool = True
) -> DefinitionSet:
    """Every definition in `directories` (strongest first) and the built-ins after them."""
    loaded = DefinitionSet({})
    scopes = [_read_scope(directory, loaded.errors) for directory in directories]
    if builtins:
        scopes.append(_builtin_files())
    for files in scopes:
        loaded.loaded += _load_scope(files, known_tools, loaded.errors)
    loaded.choose({})
    return loaded


def _read_scope(directory: Path, errors: list[DefinitionError]) -> list[tuple[str, str]]:
    """(path, text) of every `*.md` file below `directory`; unreadable ones become errors."""
    if not directory.is_dir():
        return []
    files = []
    for path in sorted(directory.rglob("*.md")):
        try:
            if path.is_file():
                files.append((str(path), path.read_text("utf-8", "replace")))
        except OSError as error:
            errors.append(DefinitionError(str(path), 1, f"cannot read it: {error.strerror}"))
    return files


def _load_scope(
    files: list[tuple[str, str]], known_tools: AbstractSet[str], errors: list[DefinitionError]
) -> list[AgentDefinition]:
    seen: dict[str, AgentDefinition] = {}
    for source, text in files:
        try:
            definition = parse_definition(text, source, known_tools)
        except DefinitionParseError as error:
            errors.append(DefinitionError(source, error.line, error.reason))
            continue
        if definition.name in seen:
            errors.append(
                DefinitionError(
                    source,
                    read_frontmatter(text, FIELDS).line_of("name"),
                    f"duplicate agent name '{definition.name}' "
                    f"(also in {seen[definition.name].source})",
                )
            )
            continue
        seen[definition.name] = definition
    return list(seen.values())


def _with_clash_note(definition: AgentDefinition) -> AgentDefinition:
    """A user's definition named like a role: say once which one each parameter means."""
    role = lookup_role(definition.name)
    if role is None or definition.source == BUILTIN:
        return definition
    note = (
        f"the name '{definition.name}' is also a role name: type '{definition.name}' opens "
        f"this definition, role '{definition.name}' the built-in {role.value} role"
    )
    return replace(definition, warnings=(*definition.warnings, note))


def _builtin_files() -> list[tuple[str, str]]:
    folder = resources.files("codewhale.data").joinpath("agents")
    entries = sorted(folder.iterdir(), key=lambda entry: entry.name)
    return [(BUILTIN, entry.read_text("utf-8")) for entry in entries if entry.name.endswith(".md")]
