"""The secrets one session redacts from tool output, gathered from where they are set."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from codewhale.config import LoadedConfig
from codewhale.mcp.specs import SpecError, load_specs
from codewhale.redaction import Redactor, environment_secrets, named_secrets


def session_redactor(loaded: LoadedConfig, workspace: Path, environ: Mapping[str, str]) -> Redactor:
    """The provider key in use and its secret headers, every secret-looking variable of the
    environment (each provider's key variable among them), and the secret values of the
    MCP servers in the user's config."""
    config = loaded.config
    secrets = [config.api_key or "", *named_secrets(config.headers)]
    secrets += environment_secrets(environ)
    # The user's own servers only: a project's `.mcp.json` is the repository's text, and
    # what it may expand from the environment is covered above.
    users = config.mcp.replace(project_servers=False)
    specs, _ = load_specs(users, workspace)
    for spec in specs:
        try:
            secrets += spec.resolve(environ).secrets
        except SpecError:
            continue  # a variable it needs is unset: the server cannot start either
    return Redactor(secrets)
