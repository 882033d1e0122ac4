"""What an "always" answer covers: a rule the user reads in the dialog before choosing it.

A rule is an exact command, a prefix of words (`git log`, `npm run build`), a host
(fetch_url), an RLM session (rlm_eval) or, for other tools, the tool. A prefix rule
matches only plain forms of its command: never chained, redirected, expanded or
path-qualified ones, and never options or scripts that make the program write files
or run other programs, so "always" for `find . -name x` does not allow `find -exec`.
Such forms still get a rule of their own: the exact command, which matches only itself.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from urllib.parse import urlsplit

from codewhale.permissions import FIND_ACTIONS

_SHOWN_EXACT_CHARS = 60


class RuleKind(StrEnum):
    EXACT = "exact"  # this exact command (or URL)
    PREFIX = "prefix"  # exec_shell commands whose words start with these words
    HOST = "host"  # fetch_url requests to this host
    SESSION = "session"  # rlm_eval code in this RLM session
    TOOL = "tool"  # every call of this tool
    # Writes to exactly these protected paths (see protected_paths), ", "-joined.
    PROTECTED_PATHS = "protected_paths"
    # Every file change (any tool) to this one workspace file: "approve this file".
    FILE_EDITS = "file_edits"


@dataclass(frozen=True)
class ApprovalRule:
    """One "always" grant: which calls of `tool` it lets run without asking."""

    tool: str
    kind: RuleKind
    # The command or URL, the prefix (shell-quoted words), the host or the session name.
    value: str = ""

    def matches(self, tool: str, arguments: Mapping[str, object]) -> bool:
        if tool != self.tool:
            return False
        if self.kind is RuleKind.TOOL:
            return True
        if self.kind in (RuleKind.PROTECTED_PATHS, RuleKind.FILE_EDITS):
            # Its paths are the call's resolved targets, not in its arguments: the
            # dispatcher compares the whole rule instead.
            return False
        if self.kind is RuleKind.EXACT:
            return _exact_text(tool, arguments) == self.value
        if self.kind is RuleKind.HOST:
            return _host(arguments) == self.value
        if self.kind is RuleKind.SESSION:
            return str(arguments.get("name") or "") == self.value
        words = plain_words(str(arguments.get("command") or ""))
        prefix = shlex.split(self.value)
        return words is not None and words[: len(prefix)] == prefix and not writes_or_runs(words)

    def describe(self) -> str:
        """The rule in words, e.g. "exec_shell commands starting `git log` (except …)"."""
        if self.kind is RuleKind.TOOL:
            return f"every {self.tool} call"
        if self.kind is RuleKind.EXACT:
            shown = self.value
            if len(shown) > _SHOWN_EXACT_CHARS:  # shown whole just above it, where asked
                shown = shown[:_SHOWN_EXACT_CHARS].rsplit(" ", 1)[0] + " …"
            return f"exactly this {self.tool} call: `{shown}`"
        if self.kind is RuleKind.HOST:
            return f"fetch_url requests to {self.value}"
        if self.kind is RuleKind.SESSION:
            return f"rlm_eval code in RLM session `{self.value}`"
        if self.kind is RuleKind.PROTECTED_PATHS:
            return f"{self.tool} writing exactly {self.value}"
        if self.kind is RuleKind.FILE_EDITS:
            return f"every change to {self.value}"
        return (
            f"exec_shell commands starting `{self.value}` (except chained or redirected "
            "ones, and options or scripts that write files or run other programs)"
        )


def approval_rule(tool: str, arguments: Mapping[str, object]) -> ApprovalRule:
    """The rule an "always" answer to this call grants: what the user was shown, no more."""
    if tool == "rlm_eval":
        return ApprovalRule(tool, RuleKind.SESSION, str(arguments.get("name") or ""))
    if tool == "exec_shell":
        return shell_rule(str(arguments.get("command") or ""))
    if tool == "fetch_url":
        host = _host(arguments)
        if host:
            return ApprovalRule(tool, RuleKind.HOST, host)
        return ApprovalRule(tool, RuleKind.EXACT, _exact_text(tool, arguments))
    return ApprovalRule(tool, RuleKind.TOOL)


def protected_write_rule(tool: str, paths: Iterable[str]) -> ApprovalRule:
    """The rule for `tool` writing exactly these protected (workspace-relative) paths."""
    return ApprovalRule(tool, RuleKind.PROTECTED_PATHS, ", ".join(sorted(paths)))


def file_edit_rule(path: str) -> ApprovalRule:
    """The rule "approve all edits to this file" grants (`path` workspace-relative)."""
    return ApprovalRule("", RuleKind.FILE_EDITS, path)


def edits_allowed(rules: set[ApprovalRule], paths: Iterable[str]) -> bool:
    """Whether "this file" answers cover every file a change writes (none known: no)."""
    wanted = {file_edit_rule(path) for path in paths}
    return bool(wanted) and wanted <= rules


def is_always_allowed(rules: set[ApprovalRule], tool: str, arguments: Mapping[str, object]) -> bool:
    """Whether an earlier "always" answer covers this call."""
    return any(rule.matches(tool, arguments) for rule in rules)


def shell_rule(command: str) -> ApprovalRule:
    """A prefix rule for a plain, harmless form of a command; the exact command otherwise."""
    command = command.strip()
    words = plain_words(command)
    prefix = None if words is None or writes_or_runs(words) else _prefix(words)
    if prefix is None:
        return ApprovalRule("exec_shell", RuleKind.EXACT, command)
    return ApprovalRule("exec_shell", RuleKind.PREFIX, shlex.join(prefix))


def _exact_text(tool: str, arguments: Mapping[str, object]) -> str:
    key = "url" if tool == "fetch_url" else "command"
    return str(arguments.get(key) or "").strip()


def _host(arguments: Mapping[str, object]) -> str:
    try:
        return urlsplit(str(arguments.get("url") or "")).hostname or ""
    except ValueError:
        return ""


# -- plain commands ----------------------------------------------------------------------

# Unquoted, these make bash chain, redirect, substitute, glob, expand or comment, so the
# words bash runs are not the words written: `find . {-exec,…}` runs `find . -exec …`.
_SYNTAX_UNQUOTED = frozenset("|&;<>()`$*?[]{}#\n\r")
# Inside double quotes `$` and backquotes still expand, and `\` escapes differ from shlex.
_SYNTAX_IN_DOUBLE_QUOTES = frozenset("$`\\")


def plain_words(command: str) -> list[str] | None:
    """The words bash runs, exactly as written; None if bash would rewrite or extend them.

    None too for an environment prefix (`X=1 ls`) and a program named by path (`./ls`,
    `/tmp/ls`, `bin/ls`), which is another program than the one a rule names.
    """
    if _has_shell_syntax(command):
        return None
    try:
        words = shlex.split(command)
    except ValueError:
        return None
    if not words or "=" in words[0] or "/" in words[0]:
        return None
    return words


def _has_shell_syntax(command: str) -> bool:
    """Whether bash would read anything in `command` as more than literal words."""
    quote = ""
    escaped = False
    for char in command:
        if escaped:
            escaped = False
        elif quote == "'":
            quote = "" if char == "'" else quote
        elif quote == '"':
            if char in _SYNTAX_IN_DOUBLE_QUOTES:
                return True
            quote = "" if char == '"' else quote
        elif char == "\\":
            escaped = True
        elif char in "'\"":
            quote = char
        elif char in _SYNTAX_UNQUOTED:
            return True
    return bool(quote) or escaped


# -- what a prefix covers ----------------------------------------------------------------

# Programs whose first argument picks what they do, so `git status` is not `git push`.
_SUBCOMMAND_PROGRAMS = frozenset(
    [
        "git",
        "npm",
        "pnpm",
        "yarn",
        "bun",
        "cargo",
        "go",
        "pip",
        "pip3",
        "uv",
        "poetry",
        "docker",
        "podman",
        "kubectl",
        "make",
        "gh",
        "apt",
        "apt-get",
        "brew",
        "systemctl",
        "tox",
        "nox",
        "just",
        "pipx",
        "deno",
    ]
)
# `npm run build`, `uv run pytest`: the words after the subcommand name what runs.
_RUN_SUBCOMMANDS = frozenset(["run", "exec", "x"])
# Programs that run the package named by their first argument (`npx eslint`).
_PACKAGE_RUNNERS = frozenset(["npx", "pnpx", "bunx", "uvx"])
# `docker run IMAGE COMMAND…`: the image takes any command, so only the exact text.
_CONTAINER_PROGRAMS = frozenset(["docker", "podman", "kubectl"])
# Programs that run the program named in their arguments: only their exact command.
_RUNS_OTHER_PROGRAMS = frozenset(
    [
        "xargs",
        "env",
        "sudo",
        "doas",
        "su",
        "nice",
        "nohup",
        "timeout",
        "time",
        "exec",
        "command",
        "builtin",
        "eval",
        "source",
        ".",
        "watch",
        "stdbuf",
        "setsid",
        "chroot",
        "flock",
        "parallel",
        "ionice",
        "taskset",
        "strace",
        "ltrace",
        "script",
        "unbuffer",
        "busybox",
        "ssh",
    ]
)
# Interpreters run whatever file or code they are given: exact, except `python -m module`.
_INTERPRETER = re.compile(
    r"(python|pypy)[\d.]*|node|nodejs|ruby|perl|php|lua|bash|sh|zsh|dash|ksh|fish|pwsh|Rscript"
)
_PYTHON = re.compile(r"(python|pypy)[\d.]*")


def _prefix(words: list[str]) -> list[str] | None:
    """The words a rule keeps (program, subcommand, what `run` runs); None: exact only."""
    program, rest = words[0], words[1:]
    if program in _RUNS_OTHER_PROGRAMS:
        return None
    if _INTERPRETER.fullmatch(program):
        if _PYTHON.fullmatch(program) and rest[:1] == ["-m"] and len(rest) > 1:
            return words[:3]
        return None
    runner = _runner_words(words)
    if runner is not None:
        target = words[len(runner) :]
        if not target or target[0].startswith("-") or program in _CONTAINER_PROGRAMS:
            return None
        inner = _prefix(target)
        return None if inner is None else [*runner, *inner]
    if program not in _SUBCOMMAND_PROGRAMS:
        return [program]
    if not rest or rest[0].startswith("-"):
        # Bare `make` has no subcommand to scope by; options before the subcommand
        # (`git -C dir push`, `git -c …`) take values, so the subcommand is unknown.
        return None
    return words[:2]


def _runner_words(words: list[str]) -> list[str] | None:
    """`npm run` of `npm run build`, `npx` of `npx eslint`: the words that run another."""
    if words[0] in _PACKAGE_RUNNERS:
        return words[:1]
    if words[0] in _SUBCOMMAND_PROGRAMS and words[1:2] and words[1] in _RUN_SUBCOMMANDS:
        return words[:2]
    return None


# -- forms that write or run -------------------------------------------------------------

# Long options that make a program write a file or run another program, in any program.
# GNU getopt and many CLIs take any unambiguous abbreviation: `--outp` is `--output`.
_WRITE_OR_RUN_OPTIONS = frozenset(
    [
        "output",  # git log/diff, sort, …
        "exec",  # git archive --exec, rsync, …
        "upload-pack",  # git clone/fetch/ls-remote
        "receive-pack",
        "config",  # git --config-env, …
        "in-place",  # sed
        "file",  # make, sed, awk scripts read from a file nobody was shown
        "makefile",
        "directory",  # make -C
        "eval",  # make --eval
        "include-dir",
        "pre",  # rg --pre runs a preprocessor on every file
        "open-files-in-pager",  # git grep
        "ext-diff",  # git diff drivers
        "textconv",
        "to-command",  # tar
        "checkpoint-action",
        "use-compress-program",
        "compress-program",  # sort
        "info-script",
        "new-volume-script",
        "rsh",  # rsync
        "shell",
        "script-shell",  # npm
        "basetemp",  # pytest empties this directory
        "junitxml",
        "junit-xml",
        "log-file",
    ]
)
# These name a family: `--output-directory`, `--config-env`, `--exec-path` count too.
_OPTION_FAMILIES = ("output", "exec", "config", "upload-pack", "receive-pack")
# Short options (anywhere in a cluster such as `-so`) that write or run, per program.
_SHORT_OPTIONS = {
    "git": "oO",  # git archive/format-patch -o, git grep -O (opens a pager program)
    "sort": "o",
    "sdiff": "o",
    "tree": "o",
    "file": "C",
    "date": "s",
    "make": "fCEI",  # another makefile, directory, --eval text, include directory
    "sed": "if",  # in place, script from a file
}
_AWKS = frozenset(["awk", "gawk", "mawk", "nawk"])


def writes_or_runs(words: list[str]) -> bool:
    """Whether a plain command uses a form that writes files or runs other programs,
    beyond what its program and subcommand do by themselves."""
    program, rest = words[0], words[1:]
    if program in _RUNS_OTHER_PROGRAMS or any(_is_write_or_run_option(w) for w in rest):
        return True
    letters = _SHORT_OPTIONS.get(program, "")
    if letters and any(set(letters) & set(cluster) for cluster in _short_clusters(rest)):
        return True
    if program == "find":
        return bool(FIND_ACTIONS & set(rest))
    if program == "sed":
        return not all(_SED_READ_ONLY.fullmatch(script) for script in _sed_scripts(rest))
    if program in _AWKS:
        return not _awk_is_read_only(rest)
    if program == "make":
        return any("=" in word for word in rest)  # `SHELL=…` replaces the shell it runs
    runner = _runner_words(words)
    target = words[len(runner) :] if runner is not None else []
    return bool(target) and writes_or_runs(target)


def _is_write_or_run_option(word: str) -> bool:
    if not word.startswith("--") or word == "--":
        return False
    name = word[2:].partition("=")[0]
    return any(option.startswith(name) for option in _WRITE_OR_RUN_OPTIONS) or name.startswith(
        _OPTION_FAMILIES
    )


def _short_clusters(words: list[str]) -> list[str]:
    """The letters of each `-abc` word (values glued on, as in `-ofile`, included)."""
    return [word[1:] for word in words if word.startswith("-") and not word.startswith("--")]


# A sed script made only of addresses and commands that print, delete, quit or
# substitute without the `w` (write a file) or `e` (run a command) flags.
_SED_ADDRESS = r"(?:\d+(?:~\d+)?|\$|/(?:[^/\\\n]|\\.)*/[IM]*)"
_SED_RANGE = rf"{_SED_ADDRESS}(?:\s*,\s*(?:{_SED_ADDRESS}|[+~]\d+))?\s*!?"
_SED_COMMAND = r"(?:[pdqQ=lnNPDhHgGxz]|s/(?:[^/\\\n]|\\.)*/(?:[^/\\\n]|\\.)*/[gpiImM0-9]*)"
_SED_STEP = rf"\s*(?:{_SED_RANGE}\s*)?{_SED_COMMAND}\s*"
_SED_READ_ONLY = re.compile(rf"{_SED_STEP}(?:[;\n]{_SED_STEP})*;?\s*")


def _sed_scripts(arguments: list[str]) -> list[str]:
    """The scripts a sed command runs: every `-e`/`--expression`, else its first operand."""
    scripts: list[str] = []
    operands: list[str] = []
    words = iter(arguments)
    for word in words:
        if word.startswith("--expression="):
            scripts.append(word.partition("=")[2])
        elif word == "--expression":
            scripts.append(next(words, ""))
        elif word.startswith("-") and not word.startswith("--") and "e" in word:
            glued = word[word.index("e") + 1 :]
            scripts.append(glued or next(words, ""))
        elif not word.startswith("-"):
            operands.append(word)
    return scripts or operands[:1]


# Options awk may have and stay read-only: a field separator and variable assignments.
_AWK_OPTIONS_WITH_VALUE = ("-F", "-v", "--field-separator", "--assign")
# In an awk program these run commands (`system`, pipes), write files (`>`), or load code.
_AWK_WRITES_OR_RUNS = ("system", "|", ">", "getline", "@")


def _awk_is_read_only(arguments: list[str]) -> bool:
    words = iter(arguments)
    for word in words:
        if word == "--":
            program = next(words, "")
            break
        if word in _AWK_OPTIONS_WITH_VALUE:
            next(words, None)
        elif word.startswith(_AWK_OPTIONS_WITH_VALUE):
            continue  # `-F:`, `-vOFS=,`, `--assign=x=1`
        elif word.startswith("-"):
            return False  # -f/-E/-i/-l load code; -o/-p/-d write files
        else:
            program = word
            break
    else:
        return True  # no program: awk only reports its usage
    return not any(marker in program for marker in _AWK_WRITES_OR_RUNS)
