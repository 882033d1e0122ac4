"""The one way the app runs git itself: no repository code runs, and no secret goes along.

A repository's config and attributes are not ours to trust: the model can write
`.git/config`, and a cloned repository brings its own `.gitattributes`. Either can make
git run a command (a hook, an fsmonitor, a clean/smudge filter, a textconv, an external
diff, a merge driver, a lazy fetch through a promisor remote). So every git the app
starts comes from `run_git`, which:

- gives it the allowlisted environment (no API key, no GIT_DIR-style redirect but the
  ones a caller names), no system config, no transport, and a C locale;
- overrides every setting that names a command, and every filter, diff and merge
  driver the config defines (their names read first, by a git run the same way):
  an empty command is one git never starts (verified against git 2.39: a filter with
  empty clean/smudge/process passes content through; an empty textconv, external diff
  or merge driver makes git fail "cannot run" rather than run anything);
- turns textconv and external diffs off on the commands that use them by default;
- runs inside the sandbox wherever the platform has one: no network, read-only unless
  the caller names the one directory the command writes.

The overrides travel as GIT_CONFIG_COUNT/KEY/VALUE (git 2.31 and later), not `-c`:
a driver's name may hold "=", which `-c name=value` cannot express. docs/SECURITY.md
("The app's own git") is the user-facing account.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from codewhale.sandbox import (
    Launch,
    SandboxSpec,
    Switch,
    child_environment,
    hidden_paths,
    sandbox_status,
    sandboxed,
)

# Settings that make git run a command, each set to what runs nothing. hooksPath at
# /dev/null finds no hook; an empty helper list, askpass, ssh or gpg program starts
# nothing; ":" is git's own no-op editor and "cat" its no-pager.
SAFETY_CONFIG: tuple[tuple[str, str], ...] = (
    ("core.hooksPath", "/dev/null"),
    ("core.fsmonitor", "false"),
    ("core.sshCommand", ""),
    ("core.askPass", ""),
    ("credential.helper", ""),
    ("core.pager", "cat"),
    ("core.editor", ":"),
    ("sequence.editor", ":"),
    ("diff.external", ""),
    ("commit.gpgSign", "false"),
    ("gpg.program", ""),
    # A checkout would otherwise run git in each submodule, under that submodule's own
    # config, whose drivers were never read.
    ("submodule.recurse", "false"),
)
# What neutralises one driver, by the section that defines it. A filter that is
# `required` fails the command once it has no command, hence required=false.
DRIVER_OVERRIDES: Mapping[str, tuple[tuple[str, str], ...]] = {
    "filter": (("clean", ""), ("smudge", ""), ("process", ""), ("required", "false")),
    "diff": (("textconv", ""), ("command", "")),
    "merge": (("driver", ""),),
}
# Set alongside the overrides and asked for when reading the driver names: a git that
# does not echo it back ignores GIT_CONFIG_COUNT (before 2.31), and every override with it.
_PROBE = ("codewhale.overrides", "honoured")
_DRIVER_NAMES = r"^(filter|diff|merge)\..+\.|^codewhale\.overrides$"
_ENVIRONMENT = {
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_TERMINAL_PROMPT": "0",
    # Messages are parsed; paths print the same in any locale.
    "LC_ALL": "C",
    # No transport at all: a promisor remote would otherwise fetch a missing object
    # through any URL the config names, `ext::` commands included.
    "GIT_ALLOW_PROTOCOL": "",
    # The same for git 2.44 and later, which has a switch for it.
    "GIT_NO_LAZY_FETCH": "1",
    # `git status` may skip refreshing the index: the user's own git may hold its lock.
    "GIT_OPTIONAL_LOCKS": "0",
}
# git reads the user's global config and excludes from here when it is set.
_PASSED = ("XDG_CONFIG_HOME",)
# Porcelain commands that run textconv and external diffs unless told not to.
_DIFFING = frozenset({"diff", "log", "show"})
_NO_DIFF_PROGRAMS = ("--no-ext-diff", "--no-textconv")


# Whether git runs sandboxed where the platform allows: `[sandbox] enabled = false` turns
# the sandbox off for the app's own git too (the overrides above hold either way).
_sandbox_wanted = True


def follow_sandbox_setting(enabled: Switch) -> None:
    """Sandbox the app's git unless `[sandbox] enabled` is false; the runtime calls this."""
    global _sandbox_wanted
    _sandbox_wanted = enabled is not False


@dataclass(frozen=True)
class GitResult:
    """How git exited and what it printed."""

    returncode: int
    stdout: bytes
    stderr: bytes


class GitError(Exception):
    """git gave no answer: the directory is gone, git is missing or too old, or it hung."""


class GitMissing(GitError):
    """No git on PATH."""


def run_git(
    args: Sequence[str],
    cwd: Path,
    *,
    timeout: float,
    writes: Path | None = None,
    env: Mapping[str, str] | None = None,
    stdin: bytes = b"",
) -> GitResult:
    """`git args` in `cwd`, running no repository code; GitError when git gives no answer.

    `writes` is the one directory the command may write (None: read-only); `env` adds
    variables such as GIT_INDEX_FILE, which cannot weaken the safety settings.
    """
    cwd = cwd.resolve()
    if not cwd.is_dir():
        raise GitError(f"{cwd} does not exist (any more)")
    overrides = [*SAFETY_CONFIG, *_driver_overrides(cwd, timeout)]
    return _run(_with_diff_programs_off(args), cwd, overrides, timeout, writes, env or {}, stdin)


def git_environment(
    overrides: Sequence[tuple[str, str]], extra: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The whole environment of the app's git: the allowlist, `extra`, then the safety settings."""
    env = child_environment(os.environ, _PASSED)
    env.update(extra or {})
    env.update(_ENVIRONMENT)
    settings = [*overrides, _PROBE]
    env["GIT_CONFIG_COUNT"] = str(len(settings))
    for number, (key, value) in enumerate(settings):
        env[f"GIT_CONFIG_KEY_{number}"] = key
        env[f"GIT_CONFIG_VALUE_{number}"] = value
    return env


def _driver_overrides(cwd: Path, timeout: float) -> list[tuple[str, str]]:
    """An override for every filter, diff and merge driver git's config defines for `cwd`."""
    command = ["config", "-z", "--name-only", "--get-regexp", _DRIVER_NAMES]
    found = _run(command, cwd, SAFETY_CONFIG, timeout, None, {}, b"")
    keys = found.stdout.decode("utf-8", "surrogateescape").split("\0")
    if _PROBE[0] not in keys:
        # Nothing matched, silently: an old git, which ignored the probe with the rest.
        if found.returncode != 1 or found.stderr.strip():
            raise GitError(f"git config failed: {first_error(found.stderr)}")
        raise GitError(
            "this git ignores GIT_CONFIG_COUNT, which keeps repository code from running "
            "in the app's own git: install git 2.31 or later"
        )
    drivers: dict[tuple[str, str], None] = {}  # (section, name), in a stable order
    for key in keys:
        # section.name.variable, where the name may itself hold dots.
        section, _, rest = key.partition(".")
        name, dot, _variable = rest.rpartition(".")
        if dot and section in DRIVER_OVERRIDES:
            drivers[(section, name)] = None
    return [
        (f"{section}.{name}.{variable}", value)
        for section, name in drivers
        for variable, value in DRIVER_OVERRIDES[section]
    ]


def _with_diff_programs_off(args: Sequence[str]) -> list[str]:
    position = _subcommand_position(args)
    if position is None or args[position] not in _DIFFING:
        return list(args)
    return [*args[: position + 1], *_NO_DIFF_PROGRAMS, *args[position + 1 :]]


def _subcommand_position(args: Sequence[str]) -> int | None:
    """Where the git command is in `args`: past git's own options (`-c` and `-C` take a value)."""
    takes_value = False
    for position, arg in enumerate(args):
        if takes_value:
            takes_value = False
        elif arg in ("-c", "-C"):
            takes_value = True
        elif not arg.startswith("-"):
            return position
    return None


def _run(
    args: Sequence[str],
    cwd: Path,
    overrides: Sequence[tuple[str, str]],
    timeout: float,
    writes: Path | None,
    extra_env: Mapping[str, str],
    stdin: bytes,
) -> GitResult:
    env = git_environment(overrides, extra_env)
    # Looked for first: inside the sandbox a missing git is only the launcher's failure.
    if shutil.which("git", path=env.get("PATH")) is None:
        raise GitMissing("git is not installed (or not on PATH)")
    with _launch(["git", "--no-pager", *args], cwd, writes) as launch:
        try:
            process = subprocess.Popen(
                launch.argv,
                cwd=cwd,
                env=env,
                pass_fds=launch.pass_fds,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                # Its own process group, so a timeout ends whatever git started too.
                start_new_session=True,
            )
        except OSError as error:
            raise GitError(f"git could not start: {error}") from None
    with process:
        try:
            stdout, stderr = process.communicate(stdin, timeout=timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.communicate()
            raise GitError(f"git {subcommand(args)} took longer than {timeout:g} s") from None
    return GitResult(process.returncode, stdout, stderr)


def first_error(stderr: bytes) -> str:
    """The line of git's stderr that says what went wrong (its first fatal: or error:)."""
    lines = stderr.decode("utf-8", "replace").strip().splitlines()
    errors = [line for line in lines if line.startswith(("fatal:", "error:"))]
    return (errors or lines or ["(no message)"])[0]


def subcommand(args: Sequence[str]) -> str:
    """The git command `args` run, for messages."""
    position = _subcommand_position(args)
    return "" if position is None else args[position]


@contextlib.contextmanager
def _launch(argv: list[str], cwd: Path, writes: Path | None) -> Iterator[Launch]:
    """`argv` inside the sandbox where there is one: it sees the repository, writes `writes`."""
    if not (_sandbox_wanted and sandbox_status().available):
        yield Launch(argv)
        return
    reads = _paths_git_reads(cwd)
    workspace = writes.resolve() if writes is not None else reads[0]
    spec = SandboxSpec(
        workspace=workspace,
        cwd=cwd,
        writable=writes is not None,
        network=False,
        hidden=hidden_paths(workspace, (), os.environ),
        # The sandbox's /tmp is private: a repository there must be shown explicitly.
        visible=tuple(path for path in reads if path != workspace),
    )
    with sandboxed(argv, spec) as launch:
        yield launch


def work_tree_root(directory: Path) -> Path | None:
    """The nearest folder at or above `directory` that holds a `.git`, resolved; None if none.

    Where git's discovery stops. git's own top level differs only when the repository's
    core.worktree moves the work tree elsewhere.
    """
    directory = directory.resolve()
    return next((top for top in (directory, *directory.parents) if (top / ".git").exists()), None)


def _paths_git_reads(cwd: Path) -> tuple[Path, ...]:
    """The work tree holding `cwd` and its git directories, found as git finds them.

    `cwd` alone outside a work tree (a bare repository, or no repository at all).
    """
    top = work_tree_root(cwd)
    if top is None:
        return (cwd,)
    dot_git = top / ".git"
    if dot_git.is_dir():
        return (top,)
    # A linked worktree or a submodule: `.git` names its git directory, and that one's
    # `commondir` the directory shared by every worktree of the repository.
    git_dir = _linked(dot_git, "gitdir: ")
    common = _linked(git_dir / "commondir", "") if git_dir else None
    found = (top, git_dir, common)
    return tuple(dict.fromkeys(path for path in found if path and path.is_dir()))


def _linked(file: Path, prefix: str) -> Path | None:
    """The path `file` holds after `prefix`, relative to the file's own directory."""
    try:
        text = file.read_text("utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None
    if not text.startswith(prefix):
        return None
    return (file.parent / text.removeprefix(prefix)).resolve()
