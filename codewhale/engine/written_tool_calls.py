"""A tool call the model wrote as text: the sign of a server that dropped the `tools`.

A chat template without tool support (common on local servers) makes the server leave
the tools out of the prompt without an error; a model trained for tools then writes its
call as text (`<tool_call>{"name": ...}`, or a bare JSON object), and the turn ends with
nothing run. Told apart from an answer that merely shows JSON by naming an offered tool.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

_CALL_OBJECT = re.compile(
    r'\{\s*"(?:name|function)"\s*:\s*"([A-Za-z0-9_.-]+)"\s*,\s*"(?:arguments|parameters)"\s*:'
)
_CALL_TAGS = ("<tool_call>", "<|tool_call|>", "<function=", "[TOOL_CALLS]")

IGNORED_TOOLS_WARNING = (
    "The model wrote a tool call as text instead of making it, so nothing ran: the server "
    "seems to ignore the tools it is offered (often a chat template without tool support; "
    "llama.cpp needs --jinja, or a model whose template handles tools)."
)


def writes_a_tool_call(text: str, tool_names: Iterable[str]) -> bool:
    """Whether `text` holds a call of one of `tool_names`, written out instead of made."""
    names = set(tool_names)
    if any(tag in text for tag in _CALL_TAGS):
        return True
    return any(match.group(1) in names for match in _CALL_OBJECT.finditer(text))
