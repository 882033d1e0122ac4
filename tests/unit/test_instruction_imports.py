"""Claude Code's `@path` imports in CLAUDE.md and AGENTS.md, on real files in temp dirs."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from codewhale.engine.instruction_imports import MAX_DEPTH, references
from codewhale.engine.instructions import MAX_TOTAL_CHARS, load_instructions


@pytest.fixture
def repo(tmp_path) -> Path:
    root = tmp_path / "repo"
    (root / "docs").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    return root


@pytest.fixture
def env(tmp_path) -> dict[str, str]:
    home = tmp_path / "home"
    (home / ".claude").mkdir(parents=True)
    return {"HOME": str(home), "CODEWHALE_HOME": str(tmp_path / "cw")}


def test_relative_nested_and_home_imports_follow_their_importer(repo, env, tmp_path):
    (repo / "CLAUDE.md").write_text("Rules. See @docs/git.md and @./style.md.\n")
    (repo / "docs" / "git.md").write_text("git rules; also @release.md")
    (repo / "docs" / "release.md").write_text("release rules, then @~/.claude/mine.md")
    (repo / "style.md").write_text("style rules")
    (tmp_path / "home" / ".claude" / "mine.md").write_text("my own rules")
    loaded = load_instructions(repo, env)
    assert loaded.warnings == ()
    text = loaded.text
    order = ["Rules. See @docs/git.md", "git rules", "release rules", "my own rules", "style rules"]
    assert [text.index(part) for part in order] == sorted(text.index(part) for part in order)
    assert "## Imported by CLAUDE.md: docs/release.md\n\nrelease rules" in text
    assert f"## Imported by CLAUDE.md: {tmp_path / 'home' / '.claude' / 'mine.md'}" in text


def test_a_cycle_is_read_once_and_stops(repo, env):
    (repo / "AGENTS.md").write_text("top @docs/a.md")
    (repo / "docs" / "a.md").write_text("a imports @b.md")
    (repo / "docs" / "b.md").write_text("b imports @a.md and @../AGENTS.md")
    loaded = load_instructions(repo, env)
    assert loaded.warnings == ()
    assert loaded.text.count("a imports") == 1 and loaded.text.count("b imports") == 1
    assert loaded.text.count("top @docs/a.md") == 1


def test_imports_outside_the_workspace_and_user_dirs_are_refused(repo, env, tmp_path):
    secret = tmp_path / "secret.md"
    secret.write_text("outside text")
    (tmp_path / "home" / "notes.md").write_text("home text")
    (repo / "docs" / "link.md").symlink_to(secret)
    (repo / "AGENTS.md").write_text(
        "See @../secret.md, @~/notes.md, @docs/link.md and @" + str(secret) + "\n"
    )
    loaded = load_instructions(repo, env)
    assert "outside text" not in loaded.text and "home text" not in loaded.text
    assert len(loaded.warnings) == 4  # one per reference
    assert loaded.warnings[0].startswith(
        f"AGENTS.md imports @../secret.md: {secret} is outside the workspace and your "
        "config directories ("
    )
    assert loaded.warnings[0].endswith("), so it is not read")
    assert str(tmp_path / "home" / ".claude") in loaded.warnings[0]
    assert "imports @~/notes.md" in loaded.warnings[1]
    assert "imports @docs/link.md" in loaded.warnings[2]
    assert f"imports @{secret}: {secret} is outside" in loaded.warnings[3]


def test_a_missing_import_is_left_as_written_with_a_warning(repo, env):
    (repo / "docs" / "loop.md").symlink_to("loop.md")
    (repo / "AGENTS.md").write_text("Read @docs/missing.md first. Ask @alice. @docs/loop.md")
    loaded = load_instructions(repo, env)
    assert "Read @docs/missing.md first. Ask @alice. @docs/loop.md" in loaded.text
    # `@alice` looks like no path: a mention, not an import.
    assert loaded.warnings == (
        "AGENTS.md imports @docs/missing.md, which is not a file; left as written",
        "AGENTS.md imports @docs/loop.md, which is not a file; left as written",
    )


def test_code_and_email_addresses_are_not_imports(repo, env):
    (repo / "docs" / "x.md").write_text("IMPORTED")
    (repo / "AGENTS.md").write_text(
        "Mail dev@docs/x.md or `@docs/x.md` or ``a @docs/x.md b``.\n"
        "```python\n@docs/x.md\n```\n"
        "~~~\n@docs/x.md\n~~~\n"
    )
    loaded = load_instructions(repo, env)
    assert "IMPORTED" not in loaded.text and loaded.warnings == ()
    assert references("x @docs/x.md\n```\n@y.md\n```\n(@z.md) `@w.md`") == ["docs/x.md", "z.md"]


def test_imports_nest_at_most_five_deep(repo, env):
    (repo / "AGENTS.md").write_text("start @docs/1.md")
    for level in range(1, MAX_DEPTH + 2):
        (repo / "docs" / f"{level}.md").write_text(f"level {level} @{level + 1}.md")
    (repo / "docs" / f"{MAX_DEPTH + 2}.md").write_text("too deep")
    loaded = load_instructions(repo, env)
    assert f"level {MAX_DEPTH}" in loaded.text and f"level {MAX_DEPTH + 1}" not in loaded.text
    assert loaded.warnings == (
        f"docs/{MAX_DEPTH}.md imports @{MAX_DEPTH + 1}.md: imports nest at most {MAX_DEPTH} "
        "files deep, so it is not read",
    )


def test_imported_text_counts_in_the_budget(repo, env):
    # Each file within the per-file limit, each with its import a little over half the total.
    (repo / "docs" / "big.md").write_text("b" * 19_990)
    (repo / "AGENTS.md").write_text("root @docs/big.md")
    (repo / "docs" / "more.md").write_text("m" * 19_990)
    (repo / "docs" / "CLAUDE.md").write_text("closer @more.md")
    loaded = load_instructions(repo / "docs", env)
    assert "m" * 19_990 in loaded.text and "b" * 100 not in loaded.text
    assert loaded.warnings == (
        f"instruction files left out to keep them within {MAX_TOTAL_CHARS:,} characters in "
        f"all (the closest files come first): {repo / 'AGENTS.md'}",
    )
