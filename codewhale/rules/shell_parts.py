"""A shell command cut into the simple commands it runs, for matching `Bash(…)` rules.

An allow rule must cover every part of `a && b | c`, and a deny rule on any part denies
the whole: so `echo ok && rm -rf x` is never allowed by `Bash(echo:*)`, and is denied by
`Bash(rm:*)`. The cut is quote-aware but not a full parser; a command whose effect it
cannot see (command substitution, redirection to a file) is never allowed by a rule.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

# Redirections that write no file: merging streams and discarding output.
_HARMLESS_REDIRECTIONS = re.compile(r"(?<![^\s])(?:[12]?>&[12]|[12]?>\s*/dev/null)(?=\s|$)")
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=\S*")
# Programs that run the command after them: a deny rule on `rm` also stops `sudo rm`.
_WRAPPERS = frozenset(
    ["sudo", "env", "command", "exec", "nohup", "time", "nice", "xargs", "builtin", "doas"]
)


@dataclass(frozen=True)
class ShellParts:
    """The simple commands of one command line, and whether a rule may allow it at all."""

    parts: tuple[str, ...]
    # Command substitution or redirection to a file: what runs or is written is not
    # visible in the parts, so only a rule allowing every command covers it.
    opaque: bool


def split_command(command: str) -> ShellParts:
    """The parts of `command` split at `;`, `&`, `|`, newlines, `$(`, backquotes and
    parentheses outside quotes, each with its whitespace collapsed."""
    text = _HARMLESS_REDIRECTIONS.sub(" ", command)
    parts: list[str] = []
    current: list[str] = []
    opaque = False
    quote = ""
    index = 0

    def cut() -> None:
        part = " ".join("".join(current).split())
        if part:
            parts.append(part)
        current.clear()

    while index < len(text):
        char = text[index]
        if char == "\\" and quote != "'" and index + 1 < len(text):
            current.append(text[index : index + 2])
            index += 2
            continue
        if quote:
            if char == quote:
                quote = ""
            elif quote == '"' and (char == "`" or text.startswith("$(", index)):
                opaque = True  # still runs inside double quotes
            current.append(char)
            index += 1
            continue
        if char in "'\"":
            quote = char
            current.append(char)
        elif text.startswith("$(", index) or char == "`":
            opaque = True
            cut()
            index += 2 if char == "$" else 1
            continue
        elif char in ";&|\n()":
            cut()
        elif char in "<>":
            opaque = True
            current.append(char)
        else:
            current.append(char)
        index += 1
    cut()
    return ShellParts(tuple(parts), opaque)


def core_command(part: str) -> str:
    """`part` without leading `NAME=value` words and wrapper programs, its program named
    without a folder: the form deny rules also test, so `FOO=1 /bin/rm x` meets `rm`."""
    words = part.split()
    while words and (_ASSIGNMENT.fullmatch(words[0]) or words[0] in _WRAPPERS):
        words.pop(0)
        while words and words[0].startswith("-"):
            words.pop(0)  # the wrapper's own options (`sudo -n`, `nice -n 5` in part)
    if not words:
        return ""
    words[0] = os.path.basename(words[0].strip("'\""))
    return " ".join(words)
