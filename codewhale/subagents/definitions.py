"""Agent definitions from Markdown files with YAML frontmatter (body = system prompt).

Scopes, strongest first: project `.codewhale/agents/`, user `<config dir>/agents/`,
then the built-ins shipped in `codewhale/data/agents/`. A broken file is reported
with its path and line; the other files still load.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from codewhale.subagents.roles import Role, lookup_role

NAME_PATTERN = re.compile(r"^[a-z0-9-]+$")
COLORS = frozenset(
    ["red", "blue", "green", "yellow", "magenta", "cyan", "white", "orange", "purple"]
)
# Names used by other agent tools (Claude Code, Owlen) mapped to ours.
TOOL_ALIASES = {
    "read": "read_file",
    "grep": "grep_files",
    "glob": "file_search",
    "ls": "list_dir",
    "write": "write_file",
    "edit": "edit_file",
    "patch": "apply_patch",
    "bash": "exec_shell",
    "shell": "exec_shell",
    "fetch": "fetch_url",
    "webfetch": "fetch_url",
}


@dataclass(frozen=True)
class AgentDefinition:
    name: str
    description: str
    prompt: str
    base_role: Role
    tools: tuple[str, ...] | None  # None = the base role's posture decides
    model: str | None
    color: str | None
    max_steps: int | None
    source: str


@dataclass(frozen=True)
class DefinitionError:
    path: str
    line: int
    reason: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.reason}"


def _split_frontmatter(text: str) -> tuple[str, str, int]:
    """(frontmatter, body, line where the body starts); ValueError without frontmatter."""
    lines = text.split("\n")
    if not lines or lines[0].strip() != "---":
        raise ValueError("missing YAML frontmatter (the file must start with a '---' line)")
    for index, line in enumerate(lines[1:], start=1):
        if line.strip() == "---":
            return "\n".join(lines[1:index]), "\n".join(lines[index + 1 :]), index + 2
    raise ValueError("the frontmatter is not closed with a '---' line")


def parse_definition(text: str, source: str, known_tools: set[str]) -> AgentDefinition:
    """One definition; raises DefinitionParseError with a line number."""
    import yaml

    try:
        front, body, _ = _split_frontmatter(text)
    except ValueError as error:
        raise DefinitionParseError(1, str(error)) from None
    try:
        meta = yaml.safe_load(front) or {}
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        line = mark.line + 2 if mark is not None else 1
        problem = getattr(error, "problem", error)
        raise DefinitionParseError(line, f"invalid YAML: {problem}") from None
    if not isinstance(meta, dict):
        raise DefinitionParseError(2, "the frontmatter must be a mapping of fields")
    line_of = _field_lines(front)
    name = meta.get("name")
    if not isinstance(name, str) or not NAME_PATTERN.match(name):
        raise DefinitionParseError(
            line_of.get("name", 2), "'name' is required and must match [a-z0-9-]+"
        )
    description = meta.get("description")
    if not isinstance(description, str) or not description.strip():
        raise DefinitionParseError(line_of.get("description", 2), "'description' is required")
    base_role = lookup_role(str(meta.get("base_role", "general")))
    if base_role is None or base_role is Role.CUSTOM:
        raise DefinitionParseError(
            line_of.get("base_role", 2),
            f"base_role must be one of general, explore, plan, review, implementer, verifier; "
            f"got {meta.get('base_role')!r}",
        )
    tools = _tools(meta.get("tools"), known_tools, line_of.get("tools", 2))
    color = meta.get("color")
    if color is not None and (not isinstance(color, str) or color.lower() not in COLORS):
        raise DefinitionParseError(line_of.get("color", 2), f"unknown color {color!r}")
    max_steps = meta.get("max_steps")
    if max_steps is not None and (not isinstance(max_steps, int) or max_steps < 1):
        raise DefinitionParseError(line_of.get("max_steps", 2), "max_steps must be >= 1")
    model = meta.get("model")
    if model in ("inherit", ""):
        model = None
    if not body.strip():
        raise DefinitionParseError(1, "the body (the agent's system prompt) is empty")
    return AgentDefinition(
        name=name,
        description=description.strip(),
        prompt=body.strip(),
        base_role=base_role,
        tools=tools,
        model=str(model) if model is not None else None,
        color=color.lower() if isinstance(color, str) else None,
        max_steps=max_steps,
        source=source,
    )


class DefinitionParseError(ValueError):
    def __init__(self, line: int, reason: str) -> None:
        super().__init__(reason)
        self.line = line
        self.reason = reason


def _field_lines(front: str) -> dict[str, int]:
    lines: dict[str, int] = {}
    for number, line in enumerate(front.split("\n"), start=2):
        if match := re.match(r"^([A-Za-z_]+)\s*:", line):
            lines.setdefault(match.group(1), number)
    return lines


def _tools(raw: Any, known: set[str], line: int) -> tuple[str, ...] | None:
    if raw is None:
        return None
    if isinstance(raw, str):
        raw = [part for part in re.split(r"[,\s]+", raw) if part]
    if not isinstance(raw, list) or not all(isinstance(item, str) for item in raw):
        raise DefinitionParseError(line, "tools must be a list or a comma-separated string")
    names = []
    for item in raw:
        name = TOOL_ALIASES.get(item.strip().lower(), item.strip())
        if name not in known:
            raise DefinitionParseError(line, f"unknown tool '{item}'")
        if name not in names:
            names.append(name)
    return tuple(names)


@dataclass
class DefinitionSet:
    definitions: dict[str, AgentDefinition]
    errors: list[DefinitionError]

    def names(self) -> list[str]:
        return sorted(self.definitions)


def load_definitions(
    project_dir: Path | None, user_dir: Path | None, known_tools: set[str]
) -> DefinitionSet:
    """All definitions; a name in a stronger scope replaces the same name in a weaker one."""
    definitions: dict[str, AgentDefinition] = {}
    errors: list[DefinitionError] = []
    scopes: list[list[tuple[str, str]]] = [_builtin_files()]
    for directory in (user_dir, project_dir):
        if directory is not None and directory.is_dir():
            scopes.append(
                [(str(p), p.read_text("utf-8", "replace")) for p in sorted(directory.rglob("*.md"))]
            )
    for files in scopes:  # weakest first, so stronger scopes overwrite
        seen: dict[str, str] = {}
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
                        _field_lines(_split_frontmatter(text)[0]).get("name", 2),
                        f"duplicate agent name '{definition.name}' "
                        f"(also in {seen[definition.name]})",
                    )
                )
                continue
            seen[definition.name] = source
            definitions[definition.name] = definition
    return DefinitionSet(definitions, errors)


def _builtin_files() -> list[tuple[str, str]]:
    folder = resources.files("codewhale.data").joinpath("agents")
    return sorted(
        (f"builtin:{entry.name}", entry.read_text("utf-8"))
        for entry in folder.iterdir()
        if entry.name.endswith(".md")
    )
