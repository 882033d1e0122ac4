"""The `@` completion index: git's view, never CodeWhale's state, fresh after changes, ranked."""

from __future__ import annotations

import subprocess
import threading
from pathlib import Path

from codewhale.tools.search import fuzzy_score
from codewhale.tui.file_index import FileIndex, listed_paths


def write(root: Path, *names: str) -> None:
    for name in names:
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(name + "\n")


def git(root: Path, *arguments: str) -> None:
    subprocess.run(["git", "-C", str(root), *arguments], check=True, capture_output=True)


def test_nothing_is_offered_before_the_first_listing(tmp_path):
    write(tmp_path, "app.py")
    index = FileIndex(tmp_path)
    assert not index.ready
    assert index.matches("app", 5) == []
    index.build()
    assert index.ready
    assert index.matches("app", 5) == ["app.py"]


def test_gits_view_without_codewhale_state_or_ignored_files(tmp_path):
    git(tmp_path, "init", "-q")
    write(
        tmp_path,
        "src/app.py",
        "notes/app.md",
        ".codewhale/app_session.json",
        "sub/.codewhale/app_state.json",
        "build/app.js",
        ".github/app.yml",
    )
    (tmp_path / ".gitignore").write_text("build/\n")
    git(tmp_path, "add", "src")
    index = FileIndex(tmp_path)
    index.build()
    offered = set(index.matches("app", 50))
    # Tracked and untracked-but-not-ignored files, hidden ones included; never state or .git.
    assert offered == {"src/app.py", "notes/app.md", ".github/app.yml"}
    # .git/HEAD, .git/config and the hooks exist, and are never offered.
    assert index.matches("head", 50) == []
    assert index.matches(".git/", 50) == [".github/app.yml"]
    assert index.matches("session", 50) == []


def test_outside_git_the_gitignore_aware_walk_answers(tmp_path):
    write(tmp_path, "keep.py", "skip/me.py", ".codewhale/keep_state.json")
    (tmp_path / ".gitignore").write_text("skip/\n")
    assert sorted(listed_paths(tmp_path)) == [".codewhale/keep_state.json", ".gitignore", "keep.py"]
    index = FileIndex(tmp_path)
    index.build()
    assert index.matches("keep", 10) == ["keep.py"]


def test_a_stale_listing_is_remade_in_the_background_and_says_when(tmp_path):
    write(tmp_path, "first.py")
    index = FileIndex(tmp_path, refresh_after=0.0)
    done = threading.Event()
    index.refresh(on_done=done.set)
    assert done.wait(10)
    assert index.matches("py", 10) == ["first.py"]
    write(tmp_path, "second.py")
    done.clear()
    index.refresh(on_done=done.set)
    assert done.wait(10)
    assert set(index.matches("py", 10)) == {"first.py", "second.py"}


def test_a_fresh_listing_is_not_remade(tmp_path):
    calls = []

    def lister(root: Path) -> list[str]:
        calls.append(root)
        return ["a.py"]

    index = FileIndex(tmp_path, lister=lister, refresh_after=60.0)
    index.build()
    index.refresh(on_done=lambda: calls.append(tmp_path))
    assert calls == [tmp_path]


def test_a_git_add_is_seen_at_the_next_refresh(tmp_path):
    git(tmp_path, "init", "-q")
    (tmp_path / ".gitignore").write_text("*.log\n")
    write(tmp_path, "tracked.py", "kept.log")
    git(tmp_path, "add", "tracked.py", ".gitignore")
    index = FileIndex(tmp_path, refresh_after=0.0)
    index.build()
    assert index.matches("kept", 5) == []
    # An ignored file that is added becomes tracked: git's index changes, and so does the view.
    git(tmp_path, "add", "-f", "kept.log")
    index.build()
    assert index.matches("kept", 5) == ["kept.log"]


def test_ranking_is_fuzzy_scores_best_first_ties_in_path_order(tmp_path):
    paths = [
        "docs/config-guide.md",
        "src/cfg/loader.py",
        "src/config.py",
        "src/configure.py",
        "tests/test_config.py",
        "CONFIG.md",
        "zzz/c/o/n/f/i/g.txt",
        "unrelated.txt",
    ]
    index = FileIndex(tmp_path, lister=lambda root: sorted(paths))
    index.build()
    expected = sorted(
        (-score, path) for path in paths if (score := fuzzy_score("config", path)) is not None
    )
    assert index.matches("config", 20) == [path for _, path in expected]
    assert index.matches("Config", 3) == [path for _, path in expected[:3]]
    assert "unrelated.txt" not in index.matches("config", 20)
    assert index.matches("cfgldr", 5) == ["src/cfg/loader.py"]


def test_queries_with_regex_characters_match_literally(tmp_path):
    paths = ["a+b/[x].py", "a/b/x.py", "c.d(e).txt", "weird\\name.txt", "new\nline.txt"]
    index = FileIndex(tmp_path, lister=lambda root: paths)
    index.build()
    assert index.matches("[x]", 5) == ["a+b/[x].py"]
    assert index.matches("+b", 5) == ["a+b/[x].py"]
    assert index.matches("(e)", 5) == ["c.d(e).txt"]
    assert index.matches("\\n", 5) == ["weird\\name.txt"]
    # A name with a newline in it is left out rather than read as two paths.
    assert index.matches("line", 5) == []
    # A bare `@` offers the first paths listed.
    assert index.matches("", 2) == ["a+b/[x].py", "a/b/x.py"]
