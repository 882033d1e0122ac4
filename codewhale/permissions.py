"""What a tool call may do: modes, approval classes, workspace confinement, shell classes.

Enforced where tools execute, so the parent, children, `exec` and tests share
one set of rules.
"""

from __future__ import annotations

import fnmatch
import itertools
import os
import re
import shlex
import stat
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path


class Mode(StrEnum):
    """Plan: read-only. Agent: file changes, shell and network ask. YOLO: everything auto."""

    PLAN = "plan"
    AGENT = "agent"
    YOLO = "yolo"

    def toggled(self) -> Mode:
        """Plan ↔ Agent, the switch Tab makes; YOLO steps down to Agent, never up into YOLO."""
        # YOLO is entered only on purpose (`/mode yolo` after a confirmation, or `--mode yolo`).
        return Mode.AGENT if self is Mode.PLAN or self is Mode.YOLO else Mode.PLAN


class ModeSwitch:
    """The session's current mode, shared by the parent and every descendant.

    Children read it at each tool call, so a switch reaches running children at once.
    `accept_edits` is Agent mode's "accept edits" posture: file changes run unasked.
    """

    def __init__(self, mode: Mode = Mode.AGENT, *, accept_edits: bool = False) -> None:
        self.current = mode
        self.accept_edits = accept_edits


class ApprovalClass(StrEnum):
    """How risky a tool is: reads, file writes, or running code / touching the network."""

    AUTO = "auto"
    SUGGEST = "suggest"
    REQUIRED = "required"


class Verdict(StrEnum):
    ALLOW = "allow"
    ASK = "ask"
    DENY = "deny"


@dataclass(frozen=True)
class Decision:
    verdict: Verdict
    reason: str = ""


def decide(
    approval: ApprovalClass,
    mode: Mode,
    *,
    plan_artifact: bool = False,
    sandboxed_read_only: bool = False,
    accept_edits: bool = False,
) -> Decision:
    """Whether a tool of this class runs, asks first, or is refused in `mode`.

    `sandboxed_read_only`: the OS sandbox keeps this call from writing or reaching the
    network (RLM code), so Plan mode asks for it instead of refusing it.
    `accept_edits`: the user chose to accept file changes unasked for this session.
    """
    if approval is ApprovalClass.AUTO or mode is Mode.YOLO:
        return Decision(Verdict.ALLOW)
    if mode is Mode.PLAN:
        if plan_artifact:
            return Decision(Verdict.ALLOW)
        if sandboxed_read_only:
            return Decision(Verdict.ASK, "Plan mode asks before running sandboxed code.")
        what = "write files" if approval is ApprovalClass.SUGGEST else "run commands or fetch URLs"
        return Decision(
            Verdict.DENY,
            f"Plan mode is read-only: tools that {what} are disabled. "
            "Describe the change instead, or ask the user to switch to Agent mode.",
        )
    if approval is ApprovalClass.SUGGEST:
        # The plan and checklist change no file; every other write is reviewed as a diff.
        if plan_artifact or accept_edits:
            return Decision(Verdict.ALLOW)
        return Decision(Verdict.ASK, "Agent mode asks before changing files.")
    return Decision(Verdict.ASK, "Agent mode asks before running commands or using the network.")


class PathEscapeError(ValueError):
    """A path that resolves outside the workspace."""


def confine(workspace: Path, raw: str | os.PathLike[str]) -> Path:
    """Resolve `raw` against the workspace; refuse anything that lands outside it.

    Symlinks are resolved first, so a link inside the workspace that points out
    is refused just like `../`.
    """
    text = os.fspath(raw)
    if "\x00" in text:
        raise PathEscapeError("path contains a NUL byte")
    # A path that resolves below the workspace as spelled lies below its real path too:
    # it has no symlink left, so neither has the spelling inside it. The root is resolved
    # (a system call per component) only when that is not so.
    root = Path(workspace)
    resolved = _resolved(root, text)
    if _inside(resolved, root):
        return resolved
    if (real := root.resolve()) != root:
        root, resolved = real, _resolved(real, text)
    if not _inside(resolved, root):
        raise PathEscapeError(
            f"'{text}' resolves to {resolved}, outside the workspace {root}; "
            "tools may only touch files inside the workspace."
        )
    return resolved


def _resolved(root: Path, text: str) -> Path:
    # On strings: Path.resolve() builds a Path per step and stats the result once more (to
    # raise RuntimeError on a symlink loop, which here is left to fail as the open does).
    candidate = os.path.expanduser(text)
    if (below := _real_below(os.fspath(root), candidate)) is not None:
        return Path(below)
    return Path(os.path.realpath(os.path.join(root, candidate)))


def _real_below(root: str, candidate: str) -> str | None:
    """What realpath makes of `candidate` below `root` when neither needs resolving: a
    real `root`, and a relative `candidate` without `..` whose parts all exist and none
    is a symlink (one lstat each, where realpath takes one for every part of the whole
    path); None when realpath must decide."""
    if os.path.isabs(candidate) or not _is_real_root(root):
        return None
    parts = [part for part in candidate.split("/") if part and part != "."]
    path = root
    for part in parts:
        path = f"{path}/{part}" if path != "/" else f"/{part}"
        try:
            if part == ".." or stat.S_ISLNK(os.lstat(path).st_mode):
                return None
        except OSError:  # missing, or below a file: realpath spells what is left
            return None
    return path


def _is_real_root(root: str) -> bool:
    """Whether `root` is spelled as realpath spells it: remembered per root, with its
    inode, so a root later swapped for a link or another directory is looked at again."""
    try:
        now = os.lstat(root)
    except OSError:
        return False
    known = _REAL_ROOTS.get(root)
    if known is None or known != (now.st_dev, now.st_ino):
        if stat.S_ISLNK(now.st_mode) or os.path.realpath(root) != root:
            return False
        _REAL_ROOTS[root] = known = (now.st_dev, now.st_ino)
    return True


# Workspace roots found real, with their (device, inode) when they were.
_REAL_ROOTS: dict[str, tuple[int, int]] = {}


def _inside(path: Path, root: Path) -> bool:
    return spelled_below(os.fspath(path), os.fspath(root)) is not None


def spelled_below(path: str, root: str) -> str | None:
    """What follows `root` in `path` ("" for the root itself), or None if `path` does not
    start with it. Of two paths as Path spells them, what `relative_to` tells, without
    building a Path for every part."""
    if path == root:
        return ""
    prefix = root if root.endswith("/") else root + "/"
    return path[len(prefix) :] if path.startswith(prefix) else None


def relative_to_workspace(workspace: Path, path: Path) -> str:
    """A path as the model should see it: relative to the workspace root, with `/`."""
    # A resolved path (confine's) below the workspace as spelled is below its real path:
    # told from the spellings, without resolving the root (a system call per component).
    below = spelled_below(os.fspath(path), os.fspath(workspace))
    if below is not None:
        return below or "."
    try:
        return path.relative_to(Path(workspace).resolve()).as_posix() or "."
    except ValueError:
        return path.as_posix()


class CommandClass(StrEnum):
    READ_ONLY = "read_only"
    TEST = "test"
    OTHER = "other"


# Programs that only read. Left out on purpose: env (runs any command), sort/uniq/
# tree/xxd (can write an output file), file (-C writes), date (-s sets the clock).
_READ_ONLY_PROGRAMS = frozenset(
    [
        "ls",
        "cat",
        "head",
        "tail",
        "wc",
        "grep",
        "rg",
        "find",
        "pwd",
        "echo",
        "stat",
        "du",
        "df",
        "which",
        "basename",
        "dirname",
        "realpath",
        "cut",
        "diff",
        "cmp",
        "nl",
        "od",
        "sha256sum",
        "md5sum",
        "true",
    ]
)
# Options that make an otherwise read-only program write or execute.
_UNSAFE_OPTION_PREFIXES = ("--output", "--pre", "--exec")
_GIT_READ_ONLY = frozenset(
    ["status", "log", "diff", "show", "blame", "branch", "rev-parse", "ls-files", "grep"]
)
# find actions that run a program, delete, or write a file.
FIND_ACTIONS = frozenset(
    ["-exec", "-execdir", "-ok", "-okdir", "-delete", "-fprint", "-fprint0", "-fprintf", "-fls"]
)
_SHELL_OPERATORS = ("|", "&", ";", ">", "<", "`", "$(", "\n")
_TEST_PREFIXES = (
    ("pytest",),
    ("python", "-m", "pytest"),
    ("python3", "-m", "pytest"),
    ("cargo", "test"),
    ("go", "test"),
    ("npm", "test"),
    ("npm", "run", "test"),
    ("make", "test"),
    ("tox",),
)


def classify_command(command: str) -> CommandClass:
    """Prove a command read-only or a test run; anything unprovable is OTHER."""
    if reads_process_environment(command):
        return CommandClass.OTHER
    if any(operator in command for operator in _SHELL_OPERATORS):
        return CommandClass.OTHER
    try:
        words = shlex.split(command)
    except ValueError:
        return CommandClass.OTHER
    if not words:
        return CommandClass.OTHER
    program = os.path.basename(words[0])
    if any(word.startswith(_UNSAFE_OPTION_PREFIXES) for word in words[1:]):
        return CommandClass.OTHER
    if program == "git":
        return CommandClass.READ_ONLY if _is_read_only_git(words[1:]) else CommandClass.OTHER
    if program == "find":
        return CommandClass.OTHER if FIND_ACTIONS & set(words) else CommandClass.READ_ONLY
    if program in _READ_ONLY_PROGRAMS:
        return CommandClass.READ_ONLY
    normalised = (program, *words[1:])
    if any(normalised[: len(prefix)] == prefix for prefix in _TEST_PREFIXES):
        return CommandClass.TEST
    return CommandClass.OTHER


def _is_read_only_git(arguments: list[str]) -> bool:
    subcommand = next((word for word in arguments if not word.startswith("-")), None)
    if subcommand not in _GIT_READ_ONLY:
        return False
    # `git branch NAME` creates a branch; only listing forms are read-only.
    return subcommand != "branch" or all(word.startswith("-") for word in arguments[1:])


# Quotes and escapes removed, a command's text splits into these path and word parts.
_PART_SEPARATORS = re.compile(r"[\s/{},;&|<>()=]+")
_COMMAND_SEPARATORS = re.compile(r"[;&|()\n]")
_BSD_PS_OPTIONS = re.compile(r"[a-zA-Z]*e[a-zA-Z]*")


def reads_process_environment(command: str) -> bool:
    """Whether a command may print a process's environment, where the app's holds the key.

    Catches `/proc/<pid>/environ` however the pid or name is written (`self`, `$PPID`,
    `[0-9]*`, `*`, `env*`, `cd /proc && cat 1/environ`) and `ps e` (BSD-style `e` shows
    every process's environment). A tripwire for plain forms, not a parser: a command
    can always build the path at run time, which only the sandbox stops.
    """
    text = re.sub(r"[\"'\\]", "", command)
    parts = [part for part in _PART_SEPARATORS.split(text) if part]
    proc = next((n for n, part in enumerate(parts) if fnmatch.fnmatchcase("proc", part)), None)
    if proc is not None and any(
        part.startswith("$") or fnmatch.fnmatchcase("environ", part) for part in parts[proc + 1 :]
    ):
        return True
    for segment in _COMMAND_SEPARATORS.split(text):
        words = segment.split()
        if words and os.path.basename(words[0]) == "ps":
            # A BSD option word (`e`, `axe`, `eww`), not the value of a `-o`-like option.
            pairs = itertools.pairwise(words)
            if any(_BSD_PS_OPTIONS.fullmatch(w) and not p.startswith("-") for p, w in pairs):
                return True
    return False


def unsandboxed_refusal(command: str) -> str | None:
    """Why a command must not run without a sandbox, or None if it may."""
    if not reads_process_environment(command):
        return None
    return (
        "Refused: this command reads a process's environment (/proc/<pid>/environ or `ps e`), "
        "which holds CodeWhale's API key, and commands here run without a sandbox. "
        "Print only the variables you need (`printenv NAME`), or ask the user to enable the "
        "sandbox (install bubblewrap; [sandbox] enabled)."
    )
