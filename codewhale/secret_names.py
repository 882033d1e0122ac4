"""Which names hold secrets, in one place: the headers `config show` redacts, the
environment variables a launch receipt records only as set or unset, the env and
header values an MCP server's output is scrubbed of, and the environment values every
tool result is redacted of (codewhale/redaction.py)."""

from __future__ import annotations

import re

SECRET_NAME_WORDS = ("key", "token", "secret", "passw", "auth", "credential", "cookie")
# "author" holds no secret (GIT_AUTHOR_NAME is a name and an email address, which
# redacting would blank out of every `git log`); "authorization" and "authority" do.
_AUTHOR = re.compile("author(?!i)")


def secret_name(name: str) -> bool:
    """Whether `name` (any case) reads like it holds a secret."""
    lowered = _AUTHOR.sub(" ", name.lower())
    return any(word in lowered for word in SECRET_NAME_WORDS)
