"""skill: load one of the session's skills (codewhale/skills.py) into the conversation.

The tool's description lists the skills the model may load (name and description), so
a conversation costs one short list until a skill is needed; the call then returns the
skill's instructions and the names of its other files, and `file` reads one of them
(scripts, references) even when the skill lives in the user's folder, outside the
workspace the file tools are confined to.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from codewhale.permissions import ApprovalClass
from codewhale.skills import MAX_SKILL_BYTES, Skill, SkillSet, listing
from codewhale.tools.base import Tool, ToolContext, ToolError, ToolResult


def skill_tools(skills: SkillSet) -> list[Tool]:
    """The `skill` tool when the model has a skill to load, else nothing to offer."""
    return [SkillTool(skills)] if skills.for_model() else []


class SkillTool(Tool):
    name = "skill"
    description = (
        "Load a skill: a procedure written for tasks like the one at hand. Returns its "
        "instructions (follow them) and its other files; call again with `file` to read one."
    )
    parameters = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "description": "the skill's name, from the list"},
            "file": {"type": "string", "description": "one of the skill's other files"},
        },
        "required": ["name"],
    }
    approval = ApprovalClass.AUTO

    def __init__(self, skills: SkillSet) -> None:
        self.skills = skills

    def schema(self) -> dict[str, Any]:
        schema = super().schema()
        available = listing(self.skills.for_model())
        schema["function"]["description"] = f"{self.description}\nSkills:\n{available}"
        return schema

    def summary(self, arguments: Mapping[str, Any]) -> str:
        name, file = arguments.get("name"), arguments.get("file")
        return f"{name} {file}" if file else str(name or "")

    def read_paths(self, arguments: Mapping[str, Any], context: ToolContext) -> list[Path]:
        """A file of a skill inside the workspace, for the read rules to judge."""
        try:
            path = self._file(self._skill(arguments), arguments)
        except ToolError:
            return []
        workspace = context.workspace.resolve()
        if path is not None and path.is_relative_to(workspace):
            return [path]
        return []

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolResult:
        skill = self._skill(arguments)
        path = self._file(skill, arguments)
        if path is not None:
            if path.stat().st_size > MAX_SKILL_BYTES:
                raise ToolError(f"{arguments['file']} is larger than {MAX_SKILL_BYTES} bytes")
            return ToolResult(path.read_text("utf-8", "replace"))
        files = skill.other_files()
        listed = "\n".join(f"- {name.as_posix()}" for name in files) or "(none)"
        return ToolResult(
            f"Skill '{skill.name}' (from {skill.file}):\n\n{skill.instructions}\n\n"
            f"Its other files (read one with skill {{name, file}}):\n{listed}"
        )

    def _skill(self, arguments: Mapping[str, Any]) -> Skill:
        name = str(arguments.get("name") or "").strip()
        skill = self.skills.get(name)
        if skill is None or not skill.model_invocable:
            names = ", ".join(s.name for s in self.skills.for_model()) or "none"
            raise ToolError(f"no skill named '{name}' to load; the skills are: {names}")
        return skill

    def _file(self, skill: Skill, arguments: Mapping[str, Any]) -> Path | None:
        """The skill's file `file` names (resolved inside its folder), None without one."""
        raw = arguments.get("file")
        if not raw:
            return None
        folder = skill.folder.resolve()
        path = (folder / str(raw)).resolve()
        if not path.is_relative_to(folder) or not path.is_file():
            raise ToolError(
                f"'{raw}' is not a file of skill '{skill.name}'; its files are listed when "
                "the skill is loaded"
            )
        return path
