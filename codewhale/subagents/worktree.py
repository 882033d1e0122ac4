"""Git worktrees for isolated children: made, summarised, applied back and removed.

A child opened with `isolation: worktree` works in a checkout of its own, inside the
repository's git directory (`<git common dir>/codewhale-worktrees/`), so it never shows
among the user's files. It starts from its opener's tree as it is: HEAD plus every
uncommitted change (tracked edits and untracked files git does not ignore), written
as one commit, the *base*, through a temporary index, so the user's own index is never
touched. What the child did is the difference between the base and its worktree's
files. `apply` merges that difference into the source tree with git's 3-way apply on a
temporary index first, and writes the user's files only once that merge is clean: a
conflict changes nothing.

Every function here blocks on git; callers on the event loop run them in a thread.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import shutil
import tempfile
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from enum import StrEnum
from pathlib import Path
from typing import Any

from codewhale.gitrun import (
    GitError,
    GitMissing,
    GitResult,
    first_error,
    run_git,
    subcommand,
    work_tree_root,
)

WORKTREES_DIR = "codewhale-worktrees"
BRANCH_PREFIX = "codewhale/"
# Sub-agent state lives in the work tree (`.codewhale/state`); it is never part of a snapshot.
NOT_STATE = ":(exclude,glob)**/.codewhale/state/**"
BASE_MESSAGE = "codewhale: the work tree an isolated sub-agent started from"
# How many changed files a summary lists (its totals count them all).
LISTED_FILES = 200
# Checking out a very large repository can take a while; a hung git should not hang us.
GIT_TIMEOUT_SECS = 600
# The base commit needs an author even where the user never configured one.
_IDENTITY = {
    "GIT_AUTHOR_NAME": "CodeWhale",
    "GIT_AUTHOR_EMAIL": "codewhale@localhost",
    "GIT_COMMITTER_NAME": "CodeWhale",
    "GIT_COMMITTER_EMAIL": "codewhale@localhost",
}
# Patches git apply can read whatever the user's diff settings are (the git runner
# turns external diffs and textconv off).
_PATCH_FLAGS = (
    "--binary",
    "--full-index",
    "--no-renames",
    "--no-relative",
    "--no-color",
    "--src-prefix=a/",
    "--dst-prefix=b/",
)
_CONFLICT_LINES = (
    re.compile(r"^error: patch failed: (.+):\d+$"),
    re.compile(
        r"^error: (.+?): (?:already exists|does not exist|does not match|patch does not apply)"
    ),
    re.compile(r"^U (.+)$"),
)


class Isolation(StrEnum):
    """Where a child works: in its opener's files, or in a git worktree of its own."""

    NONE = "none"
    WORKTREE = "worktree"

    @classmethod
    def parse(cls, raw: Any) -> Isolation:
        """From a tool argument or a definition's field; ValueError naming the choices."""
        try:
            return cls(str(raw).strip().lower())
        except ValueError:
            raise ValueError(f'isolation must be "worktree" or "none", not {raw!r}') from None


class WorktreeError(Exception):
    """git refused or failed; the message says what happened and, where there is one, the fix."""


def in_a_worktree(path: Path) -> bool:
    """Whether `path` lies in an isolated child's worktree (`<git dir>/codewhale-worktrees/`)."""
    return WORKTREES_DIR in path.parts


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclass(frozen=True)
class FileChange:
    path: str
    # None for a binary file, where git counts no lines.
    added: int | None
    deleted: int | None

    def text(self) -> str:
        if self.added is None:
            return f"{self.path} (binary)"
        return f"{self.path} (+{self.added} −{self.deleted})"


@dataclass(frozen=True)
class DiffSummary:
    """Files changed with their line counts; totals count every file, `files` lists the first."""

    files: tuple[FileChange, ...]
    files_changed: int
    added: int
    deleted: int

    @classmethod
    def of(cls, changes: list[FileChange]) -> DiffSummary:
        return cls(
            files=tuple(changes[:LISTED_FILES]),
            files_changed=len(changes),
            added=sum(change.added or 0 for change in changes),
            deleted=sum(change.deleted or 0 for change in changes),
        )

    def line(self) -> str:
        if not self.files_changed:
            return "no changes"
        noun = "file" if self.files_changed == 1 else "files"
        return f"{self.files_changed} {noun} changed, +{self.added} −{self.deleted}"

    def to_json(self) -> dict[str, Any]:
        return {
            "files_changed": self.files_changed,
            "added": self.added,
            "deleted": self.deleted,
            "files": [{"path": f.path, "added": f.added, "deleted": f.deleted} for f in self.files],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> DiffSummary:
        files = tuple(
            FileChange(str(f.get("path")), f.get("added"), f.get("deleted"))
            for f in data.get("files", ())
            if isinstance(f, Mapping)
        )
        return cls(
            files=files,
            files_changed=int(data.get("files_changed", len(files))),
            added=int(data.get("added", 0)),
            deleted=int(data.get("deleted", 0)),
        )


@dataclass(frozen=True)
class Worktree:
    """One isolated child's worktree, as its record keeps it (persisted across restarts)."""

    path: str
    # The top of the work tree it was made from: where `apply` writes.
    source: str
    # The repository's common git directory, shared by every worktree of it.
    git_dir: str
    # HEAD plus the uncommitted changes when it was made: what its diff is taken against.
    base_commit: str
    # HEAD when it was made (None in a repository without commits yet).
    head_commit: str | None
    created_at_ms: int
    # The child's own directory in it (its cwd, relative, "." for the top): only changes
    # there count and are applied, as the child may change nothing else.
    scope: str = "."
    branch: str | None = None
    # What the child changed, as of its last end.
    diff: DiffSummary | None = None
    applied_at_ms: int | None = None
    # True: kept until deleted by hand; None: deleted once finished for the configured hours.
    keep: bool | None = None
    removed_at_ms: int | None = None

    def to_json(self) -> dict[str, Any]:
        data = {key: getattr(self, key) for key in self.__dataclass_fields__}
        data["diff"] = self.diff.to_json() if self.diff is not None else None
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Worktree:
        values: dict[str, Any] = {k: data[k] for k in cls.__dataclass_fields__ if k in data}
        diff = values.get("diff")
        values["diff"] = DiffSummary.from_json(diff) if isinstance(diff, Mapping) else None
        return cls(**values)


@dataclass(frozen=True)
class Prepared:
    """A worktree made for a child about to open, and the child's directory in it."""

    tree: Worktree
    workspace: Path


@dataclass(frozen=True)
class ApplyOutcome:
    applied: bool
    # What the child changed against its base (on success: what was written).
    changes: DiffSummary
    conflicts: tuple[str, ...] = ()
    detail: str = ""


@dataclass(frozen=True)
class Repository:
    root: Path  # the work tree's top level
    git_dir: Path  # the common git directory
    index: Path  # this work tree's own index

    def enclosing_folder(self) -> Path:
        """The folder holding both the work tree and the git directory (usually `root`)."""
        return Path(os.path.commonpath([self.root, self.git_dir]))


# -- running git ---------------------------------------------------------------------------


def _run(
    args: list[str],
    cwd: Path,
    *,
    writes: Path | None = None,
    index: Path | None = None,
    stdin: bytes = b"",
    check: bool = True,
) -> GitResult:
    """git through the app's runner (no repository hooks, filters or drivers, no key),
    writing only under `writes`, with `index` as its index if given."""
    env = dict(_IDENTITY)
    if index is not None:
        env["GIT_INDEX_FILE"] = str(index)
    try:
        done = run_git(args, cwd, timeout=GIT_TIMEOUT_SECS, writes=writes, env=env, stdin=stdin)
    except GitMissing as error:
        raise WorktreeError(
            f"{error}; isolation needs it. Install git, or open the sub-agent without isolation."
        ) from None
    except GitError as error:
        raise WorktreeError(str(error)) from None
    if check and done.returncode != 0:
        raise WorktreeError(f"git {subcommand(args)} failed: {first_error(done.stderr)}")
    return done


def _out(
    args: list[str],
    cwd: Path,
    *,
    writes: Path | None = None,
    index: Path | None = None,
    check: bool = True,
) -> str:
    done = _run(args, cwd, writes=writes, index=index, check=check)
    return done.stdout.decode("utf-8", "replace").strip()


def repository_of(directory: Path) -> Repository:
    """The work tree holding `directory`; WorktreeError saying how to get one if none does."""
    done = _run(
        ["rev-parse", "--show-toplevel", "--git-common-dir", "--git-path", "index"],
        directory,
        check=False,
    )
    lines = done.stdout.decode("utf-8", "replace").splitlines()
    if done.returncode != 0 or len(lines) != 3:
        raise WorktreeError(
            f'isolation "worktree" needs a git repository, and {directory} is not inside one '
            f"({first_error(done.stderr)}). Run `git init` there (no commit is needed), or "
            "open the sub-agent without isolation."
        )
    root, common, index = Path(lines[0]), lines[1], lines[2]
    # The runner sandboxes git to write the work tree: it must be the folder holding .git,
    # never where a core.worktree in the repository's config points (`/`, say).
    if root != (holding := work_tree_root(directory)):
        raise WorktreeError(
            f"git takes {root} as the work tree of {directory}, not {holding}, which holds "
            "its .git: the repository's core.worktree moves it, and isolation works only in "
            "the folder holding .git. Remove the setting (`git config --unset core.worktree`), "
            "or open the sub-agent without isolation."
        )
    return Repository(root, (directory / common).resolve(), (directory / index).resolve())


def snapshot(repo: Repository) -> str:
    """The tree of the work tree's files as they are (untracked included, ignored not).

    Built in a copy of the work tree's index: its stat data spares git re-reading the
    files that did not change, and the real index is left exactly as it was.
    """
    with _scratch_index(repo) as index:
        return _tree_of_files(repo, index)


@contextlib.contextmanager
def _scratch_index(repo: Repository) -> Iterator[Path]:
    """A copy of the work tree's index, in the git directory: git writes nothing else there."""
    with tempfile.TemporaryDirectory(prefix="codewhale-index-", dir=repo.git_dir) as folder:
        index = Path(folder) / "index"
        if repo.index.is_file():
            # With its timestamp: git re-reads a file changed in the second the index was
            # written (same size, same stat otherwise) only if the index says it was then.
            shutil.copy2(repo.index, index)
        yield index


def _tree_of_files(repo: Repository, index: Path) -> str:
    """Stage every file into `index` and write its tree (the work tree itself is only read)."""
    _run(["add", "--all", "--", ".", NOT_STATE], repo.root, writes=repo.git_dir, index=index)
    return _out(["write-tree"], repo.root, writes=repo.git_dir, index=index)


def diff_between(root: Path, old: str, new: str, scope: str = ".") -> DiffSummary:
    """Files changed from tree-ish `old` to `new` below `scope`, with lines added and deleted."""
    command = ["diff", "--numstat", "-z", "--no-renames", "--no-relative", old, new, "--", scope]
    raw = _run(command, root).stdout
    changes = []
    for entry in raw.decode("utf-8", "surrogateescape").split("\0"):
        if not entry:
            continue
        added, deleted, path = entry.split("\t", 2)
        binary = added == "-"
        changes.append(
            FileChange(path, None if binary else int(added), None if binary else int(deleted))
        )
    return DiffSummary.of(changes)


# -- a child's worktree ----------------------------------------------------------------------


def create(directory: Path) -> Prepared:
    """A detached worktree of `directory`'s repository at its current state (the base)."""
    repo = repository_of(directory)
    head = _out(["rev-parse", "--verify", "--quiet", "HEAD^{commit}"], repo.root, check=False)
    tree = snapshot(repo)
    parents = ["-p", head] if head else []
    base = _out(["commit-tree", tree, *parents, "-m", BASE_MESSAGE], repo.root, writes=repo.git_dir)
    path = repo.git_dir / WORKTREES_DIR / secrets.token_hex(4)
    checkout = ["worktree", "add", "--detach", "--quiet", str(path), base]
    _run(checkout, repo.root, writes=repo.git_dir)
    scope = directory.resolve().relative_to(repo.root)
    workspace = path / scope
    # A directory git ignores is not in the checkout: the child still gets to start there.
    workspace.mkdir(parents=True, exist_ok=True)
    made = Worktree(
        path=str(path),
        source=str(repo.root),
        git_dir=str(repo.git_dir),
        base_commit=base,
        head_commit=head or None,
        created_at_ms=now_ms(),
        scope=scope.as_posix(),
    )
    return Prepared(made, workspace)


def branch_slug(nickname: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", nickname.lower()).strip("-") or "agent"


def name_branch(tree: Worktree, nickname: str) -> Worktree:
    """Put the worktree on a new branch `codewhale/<nickname>` (`-2`, `-3`… when taken)."""
    slug, path, git_dir = branch_slug(nickname), Path(tree.path), Path(tree.git_dir)
    problem = ""
    for attempt in range(1, 51):
        branch = BRANCH_PREFIX + (slug if attempt == 1 else f"{slug}-{attempt}")
        # An empty old value: create the branch only if no branch has that name.
        new_ref = ["update-ref", f"refs/heads/{branch}", tree.base_commit, ""]
        made = _run(new_ref, path, writes=git_dir, check=False)
        if made.returncode == 0:
            _run(["symbolic-ref", "HEAD", f"refs/heads/{branch}"], path, writes=git_dir)
            return replace(tree, branch=branch)
        problem = first_error(made.stderr)
    raise WorktreeError(f"no free branch name {BRANCH_PREFIX}{slug}-N: {problem}")


def summarize(tree: Worktree) -> DiffSummary:
    """What the child changed in its worktree, against its base."""
    path = Path(tree.path)
    return diff_between(path, tree.base_commit, snapshot(repository_of(path)), tree.scope)


def changed_files(tree: Worktree) -> list[Path]:
    """Every file of the source work tree that applying the child's changes would write."""
    worktree = repository_of(Path(tree.path))
    command = ["diff", "--name-only", "-z", "--no-renames", "--no-relative", tree.base_commit]
    command += [snapshot(worktree), "--", tree.scope]
    names = _run(command, worktree.root).stdout.decode("utf-8", "surrogateescape").split("\0")
    return [Path(tree.source) / name for name in names if name]


def apply(tree: Worktree) -> ApplyOutcome:
    """Merge the child's changes into the source work tree, or change nothing and say why."""
    worktree = repository_of(Path(tree.path))
    theirs = snapshot(worktree)
    changes = diff_between(worktree.root, tree.base_commit, theirs, tree.scope)
    if not changes.files_changed:
        return ApplyOutcome(False, changes, detail="the sub-agent changed nothing")
    source = repository_of(Path(tree.source))
    patch = _run(
        ["diff", *_PATCH_FLAGS, tree.base_commit, theirs, "--", tree.scope], source.root
    ).stdout
    with _scratch_index(source) as index:
        ours = _tree_of_files(source, index)
        # A path whose merge driver the repository names gets none (the runner empties
        # it): where a 3-way merge is needed there, git reports a conflict. Getting there,
        # git writes the driver's temporary files into the work tree.
        merged = _run(
            ["apply", "--3way", "--cached", "--whitespace=nowarn", "-"],
            source.root,
            writes=source.enclosing_folder(),
            index=index,
            stdin=patch,
            check=False,
        )
        if merged.returncode != 0:
            return _conflict(changes, merged.stderr, source.root, index)
        result = _out(["write-tree"], source.root, writes=source.git_dir, index=index)
    # The merge is clean: the user's files get exactly what it added to them. git apply
    # checks every hunk before writing any, so an edit made meanwhile still changes nothing.
    update = _run(["diff", *_PATCH_FLAGS, ours, result], source.root).stdout
    written = _run(
        ["apply", "--whitespace=nowarn", "-"],
        source.root,
        writes=source.root,
        stdin=update,
        check=False,
    )
    if written.returncode != 0:
        return ApplyOutcome(
            False,
            changes,
            detail="the work tree changed while the merge was being worked out, so nothing "
            f"was written; apply again ({first_error(written.stderr)})",
        )
    return ApplyOutcome(True, changes)


def _conflict(changes: DiffSummary, stderr: bytes, root: Path, index: Path) -> ApplyOutcome:
    unmerged = _run(["ls-files", "--unmerged", "-z"], root, index=index).stdout
    paths = {
        entry.split("\t", 1)[1]
        for entry in unmerged.decode("utf-8", "surrogateescape").split("\0")
        if "\t" in entry
    }
    lines = stderr.decode("utf-8", "replace").splitlines()
    for line in lines:
        for pattern in _CONFLICT_LINES:
            if match := pattern.match(line):
                paths.add(match.group(1))
    errors = [line for line in lines if line.startswith(("error:", "fatal:"))]
    return ApplyOutcome(False, changes, tuple(sorted(paths)), "; ".join(errors[:5]))


def remove(tree: Worktree) -> None:
    """Delete the worktree and its branch (whatever of them is still there)."""
    git_dir = Path(tree.git_dir)
    if not git_dir.is_dir():
        shutil.rmtree(tree.path, ignore_errors=True)
        return
    at = [f"--git-dir={git_dir}"]
    if Path(tree.path).exists():
        command = [*at, "worktree", "remove", "--force", tree.path]
        removed = _run(command, git_dir, writes=git_dir, check=False)
        if removed.returncode != 0:
            shutil.rmtree(tree.path, ignore_errors=True)
    _run([*at, "worktree", "prune"], git_dir, writes=git_dir, check=False)
    if tree.branch:
        _run([*at, "branch", "-D", tree.branch], git_dir, writes=git_dir, check=False)
