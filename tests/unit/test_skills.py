"""Skills as published ones are written, found where Claude Code and CodeWhale keep them,
and loaded by the `skill` tool (issue 30, item 2)."""

from __future__ import annotations

from pathlib import Path

import pytest

from codewhale.skills import load_skill_folders, load_skills, parse_skill
from codewhale.tools.base import ToolContext, ToolError
from codewhale.tools.skill import SkillTool


@pytest.fixture
def context(tmp_path) -> ToolContext:
    root = tmp_path / "ws"
    root.mkdir()
    return ToolContext(workspace=root, session_id="s1")


def skill(folder: Path, name: str, text: str, files: dict[str, str] | None = None) -> Path:
    home = folder / name
    home.mkdir(parents=True)
    (home / "SKILL.md").write_text(text)
    for relative, content in (files or {}).items():
        path = home / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)
    return home / "SKILL.md"


PUBLISHED = """---
name: pdf-forms
description: Fill PDF forms from a JSON answer sheet. Use when the user mentions PDF forms.
allowed-tools: Read, Bash(python3 scripts/fill.py:*)
license: Apache-2.0
metadata:
  version: 1.2
---

# Filling PDF forms

1. Read `reference.md`.
2. Run `scripts/fill.py`.
"""


def test_a_published_skill_reads_with_its_fields_and_ignores_the_rest(tmp_path):
    loaded = parse_skill(skill(tmp_path, "pdf", PUBLISHED))
    assert loaded.name == "pdf-forms"
    assert loaded.description.startswith("Fill PDF forms from a JSON answer sheet.")
    assert loaded.allowed_tools == ("Read", "Bash(python3 scripts/fill.py:*)")
    assert loaded.model_invocable and loaded.user_invocable
    assert loaded.instructions.startswith("# Filling PDF forms")


@pytest.mark.parametrize(
    ("text", "name", "description"),
    [
        # No frontmatter: the folder names it, its first paragraph describes it.
        ("# Release checklist\n\nBump the version.\n", "release", "Release checklist"),
        ("---\ndescription: d\n---\nbody", "release", "d"),  # no name
        ("---\nname: Release Steps\ndescription: d\n---\nbody", "release", "d"),  # spaces
        ("---\nname: ship\n---\nShip it carefully.\n\nMore.", "ship", "Ship it carefully."),
    ],
)
def test_names_and_descriptions_fall_back_as_claude_code_does(tmp_path, text, name, description):
    loaded = parse_skill(skill(tmp_path, "release", text))
    assert (loaded.name, loaded.description) == (name, description)


def test_invocation_flags_and_list_forms(tmp_path):
    text = (
        "---\nname: deploy\ndescription: d\ndisable-model-invocation: true\n"
        "user-invocable: true\nargument-hint: '[environment]'\nallowed-tools:\n  - Bash\n"
        "  - Read\n---\nbody"
    )
    loaded = parse_skill(skill(tmp_path, "deploy", text))
    assert not loaded.model_invocable and loaded.user_invocable
    assert loaded.argument_hint == "[environment]" and loaded.allowed_tools == ("Bash", "Read")


def test_folders_are_searched_strongest_first_and_broken_files_are_named(tmp_path):
    project, user = tmp_path / "project", tmp_path / "user"
    skill(project, "review", "---\nname: review\ndescription: the project's\n---\nx")
    skill(user, "review", "---\nname: review\ndescription: the user's\n---\ny")
    skill(user, "notes", "---\nname: notes\ndescription: the frontmatter never closes\n")
    loaded = load_skill_folders([project, tmp_path / "missing", user])
    assert (
        loaded.get("review") is not None and loaded.skills["review"].description == "the project's"
    )
    assert "notes" not in loaded.skills
    assert len(loaded.warnings) == 1 and "notes/SKILL.md: not loaded" in loaded.warnings[0]


def test_the_workspace_and_user_folders_claude_code_uses(tmp_path):
    workspace, claude = tmp_path / "repo", tmp_path / "claude-home"
    skill(workspace / ".claude" / "skills", "a", "---\nname: a\ndescription: A\n---\nx")
    skill(workspace / ".codewhale" / "skills", "b", "---\nname: b\ndescription: B\n---\nx")
    skill(claude / "skills", "c", "---\nname: c\ndescription: C\n---\nx")
    env = {"HOME": str(tmp_path), "CLAUDE_CONFIG_DIR": str(claude)}
    assert sorted(load_skills(workspace, env).skills) == ["a", "b", "c"]


async def test_the_skill_tool_lists_loads_and_reads_a_file(tmp_path, context):
    folder = tmp_path / "skills"
    skill(folder, "pdf", PUBLISHED, {"reference.md": "the fields", "scripts/fill.py": "print(1)"})
    skill(
        folder,
        "deploy",
        "---\nname: deploy\ndescription: d\ndisable-model-invocation: true\n---\nx",
    )
    tool = SkillTool(load_skill_folders([folder]))
    offered = tool.schema()["function"]["description"]
    assert "- pdf-forms: Fill PDF forms" in offered and "deploy" not in offered

    loaded = (await tool.run({"name": "pdf-forms"}, context)).output
    assert "# Filling PDF forms" in loaded
    assert "- reference.md" in loaded and "- scripts/fill.py" in loaded
    read = await tool.run({"name": "pdf-forms", "file": "scripts/fill.py"}, context)
    assert read.output == "print(1)"

    with pytest.raises(ToolError, match="no skill named 'deploy'"):
        await tool.run({"name": "deploy"}, context)  # the user's to run, not the model's
    with pytest.raises(ToolError, match="is not a file of skill"):
        await tool.run({"name": "pdf-forms", "file": "../../etc/passwd"}, context)
