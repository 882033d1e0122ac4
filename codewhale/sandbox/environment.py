"""The environment every process we start gets: an allowlist, never the app's own."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

# The variables a command may see from the app's environment ([sandbox] pass_env adds
# more); LC_* are passed too. Everything else, API keys first, stays behind.
PASSED_ENV = frozenset(["PATH", "HOME", "LANG", "TERM", "TZ", "USER", "LOGNAME", "SHELL", "TMPDIR"])
# stdin is /dev/null, so anything that would open an editor, a pager or a password
# prompt gets a no-op instead and fails fast rather than waiting forever.
NON_INTERACTIVE_ENV = {
    "GIT_EDITOR": "true",
    "EDITOR": "true",
    "VISUAL": "true",
    "PAGER": "cat",
    "GIT_PAGER": "cat",
    "GIT_TERMINAL_PROMPT": "0",
}


def child_environment(parent: Mapping[str, str], pass_env: Iterable[str] = ()) -> dict[str, str]:
    """The allowlisted part of `parent` plus the non-interactive settings, which always win."""
    allowed = PASSED_ENV | frozenset(pass_env)
    env = {
        name: value for name, value in parent.items() if name in allowed or name.startswith("LC_")
    }
    env.update(NON_INTERACTIVE_ENV)
    return env
