"""Which files a workspace holds, as git sees them.

Inside a git work tree the answer is git's own: `git ls-files -co --exclude-standard`,
that is tracked files plus untracked files no ignore rule excludes. Elsewhere a Python
walk applies the .gitignore files (nested ones too) by git's rules. Hidden files are
listed either way; `.git` never is. docs/TOOLS.md ("Which files are listed") says more.
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pathspec

from codewhale.gitrun import GitError, run_git
from codewhale.tools.base import ToolError
from codewhale.tools.files import open_regular

# Version-control metadata, never part of the tree (git itself never lists `.git`).
ALWAYS_SKIPPED = frozenset({".git", ".hg", ".svn"})

# How long a git listing is reused: completion asks on every keystroke, and a file
# created since shows up at most this late.
LISTING_TTL_SECS = 2.0
# Past this git is given up on and the Python walk answers: git blocks reading a
# .gitignore that is a FIFO. Listing even a very large repository takes far less.
GIT_TIMEOUT_SECS = 10.0
# Listings of other directories (a fallback grep's paths) are dropped past this many.
MAX_CACHED_LISTINGS = 32


def iter_files(root: Path, start: Path | None = None) -> Iterator[Path]:
    """Every listed regular file under `start` (default `root`), in a stable order.

    A file named as `start` is listed as it is, ignored or not, as ripgrep searches a
    path it is given. Symlinks, FIFOs, devices and sockets are never listed.
    """
    root = root.resolve()
    start = (start or root).resolve()
    if not start.is_dir():
        if _is_regular(start):
            yield start
        return
    listed = git_files(start)
    if listed is None:
        yield from walk_files(root, start)
        return
    for relative in listed:
        path = start / relative
        if _is_regular(path):
            yield path


def _is_regular(path: Path) -> bool:
    try:
        return stat.S_ISREG(path.lstat().st_mode)
    except OSError:
        return False  # a tracked file deleted from disk, or one gone since


# -- inside a git work tree: git's own listing --------------------------------------------


@dataclass(frozen=True)
class _GitListing:
    files: tuple[str, ...] | None  # None: not a git work tree, or git failed
    expires: float
    index: Path | None = None
    index_state: tuple[int, int, int] | None = None

    def is_fresh(self) -> bool:
        # add, commit, checkout, reset... all replace the index file, so a changed index
        # means the listing may be stale before its TTL ends.
        unchanged = self.index is None or _file_state(self.index) == self.index_state
        return time.monotonic() < self.expires and unchanged


_listings: dict[Path, _GitListing] = {}


def git_files(directory: Path) -> tuple[str, ...] | None:
    """What git lists under `directory` (paths relative to it, sorted); None outside a
    git work tree or when git is missing or fails. Cached: see LISTING_TTL_SECS."""
    cached = _listings.get(directory)
    if cached is not None and cached.is_fresh():
        return cached.files
    listing = _list_with_git(directory)
    if len(_listings) >= MAX_CACHED_LISTINGS:
        _listings.clear()
    _listings[directory] = listing
    return listing.files


def _list_with_git(directory: Path) -> _GitListing:
    expires = time.monotonic() + LISTING_TTL_SECS
    where = _git(directory, "rev-parse", "--is-inside-work-tree", "--git-path", "index")
    # "false" inside .git itself, where ls-files would list the work tree instead.
    if where is None or not where.startswith(b"true\n"):
        return _GitListing(None, expires)
    index = directory / os.fsdecode(where.split(b"\n")[1])
    # The index is looked at before listing, so a change made meanwhile is seen next time.
    index_state = _file_state(index)
    listed = _git(directory, "ls-files", "-z", "--cached", "--others", "--exclude-standard")
    if listed is None:
        return _GitListing(None, expires)
    # A file with a merge conflict is listed once per stage.
    files = tuple(sorted({os.fsdecode(name) for name in listed.split(b"\0") if name}))
    return _GitListing(files, expires, index, index_state)


def _git(directory: Path, *arguments: str) -> bytes | None:
    # The app's git runner: a repository's config runs nothing (core.fsmonitor would run
    # on reading the index, even for ls-files), and GIT_DIR and the like are not passed.
    try:
        done = run_git(arguments, directory, timeout=GIT_TIMEOUT_SECS)
    except GitError:
        return None
    return done.stdout if done.returncode == 0 else None


def _file_state(path: Path) -> tuple[int, int, int] | None:
    try:
        found = path.stat()
    except OSError:
        return None  # a repository with nothing added yet has no index
    return (found.st_mtime_ns, found.st_size, found.st_ino)


# -- elsewhere: a walk applying .gitignore files as git does --------------------------------


@dataclass(frozen=True)
class _Rule:
    """One .gitignore pattern.

    git matches a pattern against one path (relative to the .gitignore's directory),
    never against the directories above it: those were checked on the way down, and
    an excluded one was not entered. pathspec's GitIgnoreSpec matches whole paths
    instead (`foo/` matches `foo/x`) and settles re-includes by heuristics, which were
    measured wrong (the allow-list `*`, `!*/`, `!*.py` hid `src/a.py`; `keep/**/` hid
    `keep/top.txt`). So git's path logic is here, and pathspec matches the glob of each
    path segment (`*`, `?`, `[a-z]`, escapes), where whole paths never come into play.
    """

    negated: bool
    directories_only: bool
    # No slash but a trailing one: the pattern matches a name at any depth.
    name_only: bool
    # One glob per path segment; None for a `**` segment (any number of directories).
    segments: tuple[pathspec.GitIgnoreSpec | None, ...]

    def matches(self, parts: Sequence[str], is_dir: bool) -> bool:
        if self.directories_only and not is_dir:
            return False
        # A name-only rule is one segment, set against the last part of the path.
        return _segments_match(self.segments, parts[-1:] if self.name_only else parts)


# The .gitignore files in force: (depth of their directory below the walk's root, rules),
# shallowest first.
_IgnoreStack = tuple[tuple[int, tuple[_Rule, ...]], ...]


def walk_files(root: Path, start: Path) -> Iterator[Path]:
    """Regular files under `start` that git would list, were `root` a repository."""
    stack: _IgnoreStack = ()
    parts: tuple[str, ...] = ()
    directory = root
    # The .gitignore files between the root and `start` apply too, and under an excluded
    # directory nothing is listed.
    for name in start.relative_to(root).parts:
        stack = _with_ignore_file(directory, len(parts), stack)
        parts = (*parts, name)
        directory = directory / name
        if _excluded(parts, True, stack):
            return
    yield from _walk(directory, parts, stack)


def _walk(directory: Path, parts: tuple[str, ...], stack: _IgnoreStack) -> Iterator[Path]:
    stack = _with_ignore_file(directory, len(parts), stack)
    try:
        entries = sorted(os.scandir(directory), key=lambda entry: entry.name)
    except OSError:
        return
    for entry in entries:
        if entry.name in ALWAYS_SKIPPED:
            continue
        entry_parts = (*parts, entry.name)
        is_dir = entry.is_dir(follow_symlinks=False)
        if _excluded(entry_parts, is_dir, stack):
            continue
        if is_dir:
            yield from _walk(Path(entry.path), entry_parts, stack)
        elif entry.is_file(follow_symlinks=False):
            # Regular files only: FIFOs, devices, sockets and symlinks are part of the
            # tree, not something the model asked for, so they are skipped without a word.
            yield Path(entry.path)


def _excluded(parts: tuple[str, ...], is_dir: bool, stack: _IgnoreStack) -> bool:
    # git's precedence: the deepest .gitignore with a matching pattern decides, and in
    # it the last matching pattern; a `!` pattern re-includes.
    for depth, rules in reversed(stack):
        relative = parts[depth:]
        for rule in reversed(rules):
            if rule.matches(relative, is_dir):
                return not rule.negated
    return False


def _with_ignore_file(directory: Path, depth: int, stack: _IgnoreStack) -> _IgnoreStack:
    rules = _load_rules(directory / ".gitignore")
    return (*stack, (depth, rules)) if rules else stack


def _load_rules(path: Path) -> tuple[_Rule, ...]:
    # A .gitignore that is a FIFO would hang every walk, so it is opened as files.py opens
    # any file: a symlinked one is not followed (nor is it by git since 2.32); hard links
    # are allowed, since its content only steers the walk and is never shown. The walk
    # itself goes by name, so the file is opened from the directory the walk is in.
    try:
        with open_regular(path, ".gitignore", workspace=path.parent, single_link=False) as stream:
            content = os.fsdecode(stream.read()).removeprefix("\ufeff")
    except (ToolError, OSError):
        return ()
    # Lines end at "\n" only (a "\r" before it is dropped), as git reads them.
    lines = (line.removesuffix("\r") for line in content.split("\n"))
    return tuple(rule for line in lines if (rule := _parse_rule(line)) is not None)


def _parse_rule(line: str) -> _Rule | None:
    if line.startswith("#"):
        return None
    pattern = _trim_trailing_spaces(line)
    negated = pattern.startswith("!")
    pattern = pattern.removeprefix("!")
    directories_only = pattern.endswith("/")
    pattern = pattern.removesuffix("/")
    if not pattern:
        return None
    name_only = "/" not in pattern
    globs = [pattern] if name_only else pattern.removeprefix("/").split("/")
    try:
        segments = tuple(
            None if glob == "**" and not name_only else _compile_glob(glob) for glob in globs
        )
    except ValueError:
        return None  # a dangling backslash: git's wildmatch matches nothing with it
    return _Rule(negated, directories_only, name_only, segments)


def _trim_trailing_spaces(line: str) -> str:
    # Trailing spaces are dropped unless the last is escaped with a backslash ("a\ ").
    trimmed = line.rstrip(" ")
    escapes = len(trimmed) - len(trimmed.rstrip("\\"))
    return trimmed + " " if trimmed != line and escapes % 2 else trimmed


def _compile_glob(glob: str) -> pathspec.GitIgnoreSpec:
    # pathspec reads the glob as a whole .gitignore line: a leading "!" or "#" must stay
    # a literal character of the name here. The spec only ever sees one name, which holds
    # no "/", so its whole-path logic never comes into play.
    return pathspec.GitIgnoreSpec.from_lines(["\\" + glob if glob.startswith(("!", "#")) else glob])


def _segments_match(
    segments: Sequence[pathspec.GitIgnoreSpec | None], parts: Sequence[str]
) -> bool:
    if not segments:
        return not parts
    first, rest = segments[0], segments[1:]
    if first is None:
        if not rest:
            return bool(parts)  # a trailing "/**" matches everything inside
        return any(_segments_match(rest, parts[skip:]) for skip in range(len(parts) + 1))
    return bool(parts) and first.match_file(parts[0]) and _segments_match(rest, parts[1:])
