"""Skills: procedures in `<name>/SKILL.md` folders, loaded into a conversation on demand.

Found in the workspace's `.codewhale/skills/` and `.claude/skills/`, then the user's
`<config dir>/skills/` and `~/.claude/skills/` (`paths.skill_dirs`); a name in a stronger
folder shadows the same name in a weaker one. The frontmatter is read as published
skills write it: `name`, `description`, `allowed-tools` (a string or a list),
`disable-model-invocation`, `user-invocable`, `argument-hint`; other keys are ignored.
A missing name, or one with spaces, falls back to the folder's name; a file without
frontmatter takes its first paragraph as its description. The model sees each skill's
name and description and loads one with the `skill` tool (codewhale/tools/skill.py).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from codewhale.frontmatter import FrontmatterError, read_frontmatter
from codewhale.paths import skill_dirs

SKILL_FILE = "SKILL.md"
FIELDS = frozenset(
    {
        "name",
        "description",
        "allowed-tools",
        "disable-model-invocation",
        "user-invocable",
        "argument-hint",
    }
)
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
# A skill's other files listed for the model (scripts, references, templates).
MAX_LISTED_FILES = 50
# A skill file larger than this is not read (a skill is instructions, not data).
MAX_SKILL_BYTES = 256 * 1024
# What the model is shown of each description (the list is in a tool's description).
DESCRIPTION_CHARS = 300


@dataclass(frozen=True)
class Skill:
    name: str
    description: str
    instructions: str
    folder: Path
    # Claude Code's tool names as written (`Read, Grep`): what the skill expects to use.
    allowed_tools: tuple[str, ...] = ()
    # False for `disable-model-invocation: true`: only the user can run it (`/name`).
    model_invocable: bool = True
    user_invocable: bool = True
    argument_hint: str = ""

    @property
    def file(self) -> Path:
        return self.folder / SKILL_FILE

    def other_files(self) -> list[Path]:
        """The folder's other files (relative paths), at most MAX_LISTED_FILES, sorted."""
        found = []
        for path in sorted(self.folder.rglob("*")):
            if path.is_file() and path.name != SKILL_FILE and not _hidden(path, self.folder):
                found.append(path.relative_to(self.folder))
                if len(found) == MAX_LISTED_FILES:
                    break
        return found


@dataclass
class SkillSet:
    skills: dict[str, Skill] = field(default_factory=dict)
    # One line per file that could not be read, naming it and why.
    warnings: list[str] = field(default_factory=list)

    def for_model(self) -> list[Skill]:
        return [skill for skill in self.skills.values() if skill.model_invocable]

    def for_user(self) -> list[Skill]:
        return [skill for skill in self.skills.values() if skill.user_invocable]

    def get(self, name: str) -> Skill | None:
        return self.skills.get(name)


def load_skills(workspace: Path, env: Mapping[str, str] | None = None) -> SkillSet:
    """Every skill of this workspace and user, strongest folder first."""
    return load_skill_folders(skill_dirs(workspace, env))


def load_skill_folders(folders: Iterable[Path]) -> SkillSet:
    loaded = SkillSet()
    for folder in folders:
        if not folder.is_dir():
            continue
        for skill_file in sorted(folder.glob(f"*/{SKILL_FILE}")):
            try:
                skill = parse_skill(skill_file)
            except (OSError, FrontmatterError, ValueError) as error:
                reason = getattr(error, "reason", None) or getattr(error, "strerror", None)
                loaded.warnings.append(f"{skill_file}: not loaded ({reason or error})")
                continue
            loaded.skills.setdefault(skill.name, skill)  # a stronger folder's stays
    return loaded


def parse_skill(skill_file: Path) -> Skill:
    """One SKILL.md; FrontmatterError or ValueError when it cannot be a skill."""
    if skill_file.stat().st_size > MAX_SKILL_BYTES:
        raise ValueError(f"larger than {MAX_SKILL_BYTES // 1024} KB")
    text = skill_file.read_text("utf-8", "replace")
    folder = skill_file.parent
    if not text.lstrip("\ufeff").startswith("---"):
        body = text.strip()
        return Skill(folder.name, _first_paragraph(body), body, folder)
    front = read_frontmatter(text, FIELDS)
    meta, body = front.fields, front.body.strip()
    name = meta.get("name")
    if not isinstance(name, str) or not NAME.fullmatch(name.strip()):
        name = folder.name
    description = meta.get("description")
    if not isinstance(description, str) or not description.strip():
        description = _first_paragraph(body)
    return Skill(
        name=name.strip(),
        description=" ".join(description.split()),
        instructions=body,
        folder=folder,
        allowed_tools=_tool_names(meta.get("allowed-tools")),
        model_invocable=not _flag(meta.get("disable-model-invocation"), False),
        user_invocable=_flag(meta.get("user-invocable"), True),
        argument_hint=str(meta.get("argument-hint") or ""),
    )


def listing(skills: Iterable[Skill]) -> str:
    """`- name: description` lines, each description cut to DESCRIPTION_CHARS."""
    lines = []
    for skill in skills:
        text = skill.description
        if len(text) > DESCRIPTION_CHARS:
            text = text[: DESCRIPTION_CHARS - 1].rstrip() + "…"
        lines.append(f"- {skill.name}: {text}")
    return "\n".join(lines)


def _first_paragraph(body: str) -> str:
    """The first paragraph of prose, a heading's `#` marks dropped."""
    for block in re.split(r"\n\s*\n", body):
        text = " ".join(line.strip().lstrip("#").strip() for line in block.splitlines())
        if text:
            return text
    return ""


def _tool_names(raw: Any) -> tuple[str, ...]:
    if isinstance(raw, str):
        # Split on commas and spaces, but not inside a pattern: `Bash(git add:*)`.
        return tuple(re.findall(r"[^,\s(]+(?:\([^)]*\))?", raw))
    if isinstance(raw, list):
        return tuple(str(item).strip() for item in raw if str(item).strip())
    return ()


def _flag(raw: Any, default: bool) -> bool:
    if isinstance(raw, bool):
        return raw
    if isinstance(raw, str) and raw.strip().lower() in ("true", "false"):
        return raw.strip().lower() == "true"
    return default


def _hidden(path: Path, folder: Path) -> bool:
    return any(part.startswith(".") for part in path.relative_to(folder).parts)
