"""What users and the model are told about agent definitions with problems, briefly.

A real collection (hundreds of Claude Code agent files) gives hundreds of warnings:
at start they are one summary line, and the full list stays in `codewhale agents
types`. Asking for a type that does not exist names the file when it is one that
failed to parse, and otherwise only the few closest definition names.
"""

from __future__ import annotations

import difflib
import re
from pathlib import Path

from codewhale.skills import SkillSet
from codewhale.subagents.definitions import DefinitionError, DefinitionSet
from codewhale.subagents.roles import RoleError, role_help

MAX_CLOSE_NAMES = 5
_NAME_LINE = re.compile(r"^name:\s*['\"]?([^'\"\s#]+)", re.M)


def startup_notices(definitions: DefinitionSet) -> list[str]:
    """The lines a session shows as it opens: one summary, then each held definition.

    A held definition stays a line of its own: it asks the user to decide about trust.
    """
    warned = sum(1 for definition in definitions.definitions.values() if definition.warnings)
    failed = len(definitions.errors)
    parts = []
    if warned:
        parts.append(_definitions(warned, "has warnings", "have warnings"))
    if failed:
        parts.append(
            f"{failed} failed to load" if warned else _definitions(failed, "failed to load")
        )
    lines = [f"{' and '.join(parts)}: see `codewhale agents types`"] if parts else []
    return lines + [
        f"agent '{h.definition.name}' ({h.definition.source}): {h.note}" for h in definitions.held
    ]


def missing_skills(definitions: DefinitionSet, skills: SkillSet) -> list[str]:
    """One line per agent definition that preloads a skill nobody installed."""
    lines = []
    for definition in definitions.definitions.values():
        if missing := [name for name in definition.skills if skills.get(name) is None]:
            lines.append(
                f"agent '{definition.name}' ({definition.source}) preloads skills that are not "
                f"installed: {', '.join(missing)} (see `codewhale skills list`)"
            )
    return lines


def unknown_type_error(name: str, definitions: DefinitionSet) -> RoleError:
    """Why `name` is no agent type: its file failed to parse, or what is close to it."""
    key = name.strip().lower()
    if (error := failed_definition(key, definitions)) is not None:
        return RoleError(
            f"Agent type '{name}' is defined in {error.path}, but that file failed to parse "
            f"(line {error.line}: {error.reason}). Fix the file, or use another type."
        )
    names = definitions.names()
    if len(names) <= MAX_CLOSE_NAMES:
        return RoleError(f"Invalid sub-agent type '{name}'. Use: {role_help(names)}")
    close = difflib.get_close_matches(key, names, n=MAX_CLOSE_NAMES)
    offered = f"; the closest definitions: {', '.join(close)}" if close else ""
    return RoleError(
        f"Invalid sub-agent type '{name}'. Use a role: {role_help()}{offered} "
        f"({len(names)} definitions in all: agent_types lists them)"
    )


def failed_definition(name: str, definitions: DefinitionSet) -> DefinitionError | None:
    """The parse failure of the file meant to define `name` (by its file name or `name:`)."""
    for error in definitions.errors:
        if name in (Path(error.path).stem.lower(), _declared_name(error.path)):
            return error
    return None


def _declared_name(path: str) -> str | None:
    """The `name:` line of a file that did not parse, read plainly; None if unreadable."""
    try:
        text = Path(path).read_text("utf-8", "replace")
    except OSError:
        return None
    match = _NAME_LINE.search(text)
    return match.group(1).lower() if match else None


def _definitions(count: int, verb: str, verb_plural: str | None = None) -> str:
    if count == 1:
        return f"1 agent definition {verb}"
    return f"{count} agent definitions {verb_plural or verb}"
