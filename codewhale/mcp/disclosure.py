"""What trusting a project's MCP server lets happen, as the trust prompt shows it (the
app's dialog and `codewhale mcp trust` print the same lines): the whole command line or
URL as written, the names of the env variables or headers it sets, and each `${VAR}` it
would have filled in from your environment, allowed or refused.

Only what the project wrote is shown, never an expanded value; and what is shown is what
the trust digest covers, so a change to any of it is asked about again.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable

from codewhale.mcp.project_env import SETTING
from codewhale.mcp.specs import ServerSpec
from codewhale.sanitize import clean_line


def trust_details(spec: ServerSpec) -> list[str]:
    """The prompt's lines for one server, safe to print (the text comes from a repository)."""
    lines = [f"{spec.name}  ({spec.transport}, from {spec.source})"]
    if spec.command is not None:
        lines += [f"  runs:    {command_line(spec.command, spec.args)}"]
        lines += [f"  env:     {_names(spec.env)}"]
    else:
        lines += [f"  url:     {spec.url}"]
        lines += [f"  headers: {_names(spec.headers)}"]
    references = spec.references()
    if references:
        lines.append("  from your environment:")
        for reference in references:
            verdict = (
                f"refused: {reference.refusal}" if reference.refusal else f"allowed by {SETTING}"
            )
            lines.append(f"    ${{{reference.variable}}} in {reference.place}: {verdict}")
    if any(reference.refusal for reference in references):
        lines.append("  it will not start while it asks for a refused variable")
    return [clean_line(line) for line in lines]


def command_line(command: str, args: Iterable[str]) -> str:
    """A command and its arguments, each quoted where a space or quote would blur it."""
    return " ".join(_word(word) for word in (command, *args))


def _word(word: str) -> str:
    plain = word and not any(c.isspace() or c in "'\"\\" for c in word)
    return word if plain else shlex.quote(word)


def _names(values: Iterable[str]) -> str:
    return ", ".join(values) or "(none)"
