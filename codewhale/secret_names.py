"""Which names hold secrets, in one place: the headers `config show` redacts, the
environment variables a launch receipt records only as set or unset, and the env and
header values an MCP server's output is scrubbed of."""

from __future__ import annotations

SECRET_NAME_WORDS = ("key", "token", "secret", "passw", "auth", "credential", "cookie")


def secret_name(name: str) -> bool:
    """Whether `name` (any case) reads like it holds a secret."""
    lowered = name.lower()
    return any(word in lowered for word in SECRET_NAME_WORDS)
