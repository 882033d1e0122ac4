"""Which `${VAR}`s a project's MCP server may have filled in from your environment.

A cloned repository writes its own `.mcp.json`: trusting it lets its servers start, never
lets it choose which of your secrets they get. A project server is given a variable only
when your user config names it in `[mcp] project_env`, and never one of the app's own API
key variables or a secret-looking name (codewhale/secret_names.py): those go only to
servers you define yourself in `[mcp.servers.*]`.
"""

from __future__ import annotations

from codewhale.providers.presets import PRESETS
from codewhale.secret_names import secret_name

# The setting that allows a variable, as the user writes it in their config.
SETTING = "mcp.project_env"
HOW_TO_ALLOW = (
    "To allow a variable that holds no secret, name it in your user config: "
    '[mcp] project_env = ["NAME"]. A secret goes only to a server you define there '
    "yourself ([mcp.servers.<name>])."
)
# Every variable the app reads its provider key from (config.py's env layer).
APP_KEY_VARIABLES = frozenset(
    {"CODEWHALE_API_KEY", *(preset.key_env for preset in PRESETS.values() if preset.key_env)}
)


def refusal(variable: str, allowed: frozenset[str]) -> str | None:
    """Why a project server may not have `variable` expanded, or None when it may."""
    if variable in APP_KEY_VARIABLES:
        return "the app's own API key, never given to a project's server"
    if secret_name(variable):
        return "a secret-looking name; secrets go only to servers in your own config"
    if variable not in allowed:
        return f"not in {SETTING} in your user config"
    return None
