"""Gitignore-style path patterns, as Claude Code's `Read(…)` and `Edit(…)` rules write them.

`//abs/path` is absolute, `~/path` is under the home folder, `/path`, `./path` and any
pattern with a slash inside are relative to the project the rule belongs to, and a bare
name (`.env`, `*.pem`) matches at any depth below it. A pattern that names a folder
covers everything inside it, as in .gitignore.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path, PurePosixPath


def anchored_pattern(pattern: str, root: Path, home: Path) -> str:
    """`pattern` as an absolute glob (POSIX), anchored where its form says."""
    text = pattern.strip()
    if text.startswith("//"):
        return "/" + text[2:].strip("/")
    if text == "~" or text.startswith("~/"):
        return f"{home.as_posix()}/{text[2:]}".rstrip("/")
    if text.startswith("./"):
        text = text[2:]
    elif text.startswith("/"):
        text = text[1:]
    elif "/" not in text.rstrip("/"):
        text = f"**/{text}"  # a bare name: at any depth, as in .gitignore
    return f"{root.as_posix()}/{text}".rstrip("/")


@lru_cache(maxsize=512)
def _compiled(glob: str) -> re.Pattern[str]:
    """`**` spans folders, `*` and `?` stay inside one name, `[…]` is a class."""
    parts: list[str] = []
    index = 0
    while index < len(glob):
        if glob.startswith("/**/", index):
            parts.append("(?:/.*)?/")
            index += 4
        elif glob.startswith("/**", index) and index + 3 == len(glob):
            parts.append("(?:/.*)?")
            index += 3
        elif glob.startswith("**", index):
            parts.append(".*")
            index += 2
        elif glob[index] == "*":
            parts.append("[^/]*")
            index += 1
        elif glob[index] == "?":
            parts.append("[^/]")
            index += 1
        elif glob[index] == "[" and (end := glob.find("]", index + 1)) > index + 1:
            body = glob[index + 1 : end].replace("\\", "\\\\")
            parts.append(f"[^{body[1:]}]" if body.startswith("!") else f"[{body}]")
            index = end + 1
        else:
            parts.append(re.escape(glob[index]))
            index += 1
    return re.compile("".join(parts))


def path_matches(glob: str, path: Path) -> bool:
    """Whether `path` (absolute, resolved) or a folder above it matches the absolute `glob`."""
    regex = _compiled(glob)
    candidate = PurePosixPath(path.as_posix())
    # The folder a pattern names covers its contents: test the path and each parent.
    return any(regex.fullmatch(each.as_posix()) for each in (candidate, *candidate.parents))
