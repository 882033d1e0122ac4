"""AGENTS.md and CLAUDE.md reach every agent's prompt: which files, in what order, how much."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from codewhale.engine.instructions import (
    MAX_FILE_CHARS,
    MAX_TOTAL_CHARS,
    instruction_files,
    load_instructions,
    project_instructions,
)
from codewhale.skills import SkillSet
from codewhale.subagents import launch
from codewhale.subagents.roles import Role
from codewhale.subagents.spawn import SpawnRequest


@pytest.fixture
def repo(tmp_path) -> Path:
    """A git repository with instructions at the root and in `pkg/`, plus a user home."""
    root = tmp_path / "repo"
    (root / "pkg" / "deep").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    (root / "AGENTS.md").write_text("root agents rules")
    (root / "CLAUDE.md").write_text("root claude rules")
    (root / "pkg" / "CLAUDE.md").write_text("pkg claude rules")
    (tmp_path / "outside.md").write_text("never read")
    return root


def home_env(tmp_path: Path, *, user_files: bool) -> dict[str, str]:
    home = tmp_path / "home"
    (home / ".claude").mkdir(parents=True, exist_ok=True)
    env = {"HOME": str(home), "CODEWHALE_HOME": str(home / "cw")}
    if user_files:
        (home / ".claude" / "CLAUDE.md").write_text("user claude rules")
        (home / "cw" / "config").mkdir(parents=True, exist_ok=True)
        (home / "cw" / "config" / "AGENTS.md").write_text("user agents rules")
    return env


def test_general_to_specific_from_the_user_to_the_working_directory(repo, tmp_path):
    env = home_env(tmp_path, user_files=True)
    files = instruction_files(repo / "pkg" / "deep", env)
    texts = [path.read_text() for path in files]
    assert texts == [
        "user agents rules",
        "user claude rules",
        "root agents rules",
        "root claude rules",
        "pkg claude rules",
    ]


def test_nothing_above_the_repository_root_and_links_count_once(repo, tmp_path):
    (repo.parent / "AGENTS.md").write_text("above the repository")
    (repo / "CLAUDE.md").unlink()
    (repo / "CLAUDE.md").symlink_to("AGENTS.md")
    env = home_env(tmp_path, user_files=False)
    text = project_instructions(repo, env)
    assert "above the repository" not in text
    assert text.count("root agents rules") == 1
    assert text.startswith("# Project instructions (AGENTS.md)")


def test_the_total_is_bounded_and_the_most_general_file_goes_first(repo, tmp_path):
    env = home_env(tmp_path, user_files=True)
    big = "x" * (MAX_TOTAL_CHARS // 2)
    (repo / "AGENTS.md").write_text(big)
    (repo / "pkg" / "CLAUDE.md").write_text(big.replace("x", "y"))
    text = project_instructions(repo / "pkg", env)
    assert len(text) < MAX_TOTAL_CHARS + 500
    assert "y" * 100 in text and "root claude rules" in text  # the closest files are kept
    assert "x" * 100 not in text  # over the budget: it and everything farther is dropped
    assert "user agents rules" not in text and "user claude rules" not in text


def test_a_child_working_in_a_subdirectory_gets_that_directorys_instructions(
    repo, tmp_path, monkeypatch
):
    for name, value in home_env(tmp_path, user_files=False).items():
        monkeypatch.setenv(name, value)
    request = SpawnRequest(
        prompt="look",
        description="",
        type_name="explore",
        role=Role.EXPLORE,
        definition=None,
        name=None,
        allowed_tools=(),
        model="m",
        fork_context=False,
        max_depth=0,
        workspace=repo / "pkg",
    )
    prompt = launch.system_prompt(request, memory=None, skills=SkillSet())
    assert "root agents rules" in prompt and "pkg claude rules" in prompt
    assert prompt.index("root claude rules") < prompt.index("pkg claude rules")


def test_a_file_over_the_limit_is_cut_at_a_line_end_with_a_marker(repo, tmp_path):
    env = home_env(tmp_path, user_files=False)
    # 20.7k characters of 68-character lines: the limit falls in the middle of one.
    line = "Keep every public function documented and tested before merging. ok\n"
    agents = (line * 305).rstrip("\n")
    assert len(agents) > 20_700 and MAX_FILE_CHARS % len(line) != 0
    (repo / "AGENTS.md").write_text(agents)
    (repo / "CLAUDE.md").unlink()
    text = project_instructions(repo, env)
    body, marker = text.rsplit("\n\n[", 1)
    kept = body.split("\n\n", 1)[1]
    assert kept.endswith("before merging. ok")  # a whole line, not cut mid-sentence
    left_out = len(agents) - len(kept)
    lines_left = agents[len(kept) :].strip("\n").count("\n") + 1
    assert marker == (
        f"AGENTS.md is cut here: {left_out:,} more characters ({lines_left:,} lines) are "
        f"left out, past the limit of {MAX_FILE_CHARS:,} per file]"
    )
    assert len(kept) <= MAX_FILE_CHARS


def test_a_file_without_line_ends_is_cut_at_the_limit(repo, tmp_path):
    env = home_env(tmp_path, user_files=False)
    (repo / "AGENTS.md").write_text("x" * (MAX_FILE_CHARS + 700))
    text = project_instructions(repo, env)
    assert (
        "x" * MAX_FILE_CHARS + "\n\n[AGENTS.md is cut here: 700 more characters (1 lines)" in text
    )


def test_files_left_out_for_the_budget_are_named_in_one_warning(repo, tmp_path):
    env = home_env(tmp_path, user_files=True)
    # Each within the per-file limit; together with the root CLAUDE.md, over the total.
    (repo / "pkg" / "CLAUDE.md").write_text("y" * 19_995)
    (repo / "AGENTS.md").write_text("x" * 19_995)
    loaded = load_instructions(repo / "pkg", env)
    assert "y" * 19_995 in loaded.text and "root claude rules" in loaded.text
    assert "x" * 100 not in loaded.text and "user agents rules" not in loaded.text
    home = tmp_path / "home"
    dropped = [
        str(home / "cw" / "config" / "AGENTS.md"),
        str(home / ".claude" / "CLAUDE.md"),
        str(repo / "AGENTS.md"),
    ]
    assert loaded.warnings == (
        f"instruction files left out to keep them within {MAX_TOTAL_CHARS:,} characters in "
        f"all (the closest files come first): {', '.join(dropped)}",
    )


def test_nothing_left_out_means_no_warning(repo, tmp_path):
    loaded = load_instructions(repo, home_env(tmp_path, user_files=True))
    assert loaded.warnings == () and "user agents rules" in loaded.text
