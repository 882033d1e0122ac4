"""Which MCP servers a session has: `[mcp.servers.*]` in the user's config, then the
project's `.mcp.json` (Claude Code's format), each as a ServerSpec.

Values keep their `${VAR}` references until a server starts (`resolve`), so what is
shown (`codewhale mcp list`, `/mcp`) and what trust is remembered for never holds the
secrets those variables carry. A project's server has only the variables its user allows
expanded (codewhale/mcp/project_env.py).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal
from urllib.parse import parse_qsl, urlsplit, urlunsplit

from codewhale.config_models import McpConfig, McpServerConfig, mcp_server_name_problem
from codewhale.config_tables import TableError
from codewhale.mcp.project_env import HOW_TO_ALLOW, refusal
from codewhale.secret_names import secret_name

PROJECT_FILE = ".mcp.json"
# The keys of a .mcp.json entry read here; others are named in one warning per server.
PROJECT_KEYS = frozenset({"type", "command", "args", "env", "url", "headers", "disabledTools"})
HEADERS_HELPER_NOTE = (
    " (headersHelper runs a command to make headers; put the headers in `headers`, with"
    " ${VAR} references your config allows, or configure the server in your own config)"
)
CONFIG_SOURCE = "config"
# `${NAME}` or `${NAME:-default}`, as Claude Code expands them in .mcp.json.
_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
# Variables and headers whose values are scrubbed from a server's output and errors, by
# words in their names. Not every value: PATH=/home/me would blank out every path.
# The words before a credential in an Authorization header: not secrets themselves.
AUTH_SCHEMES = frozenset({"Bearer", "Basic", "Token", "Digest"})
# Secret values shorter than this are not scrubbed: "1" would blank out every digit.
MIN_SECRET_LENGTH = 6
REDACTED = "[redacted]"


class SpecError(ValueError):
    """A server that cannot start as configured; the message says why."""


@dataclass(frozen=True)
class Resolved:
    """A server's values with `${VAR}` expanded: what the connection uses, never shown."""

    command: str | None
    args: list[str]
    env: dict[str, str]
    url: str | None
    headers: dict[str, str]
    # Values to scrub from anything the server's output or errors carry to the model,
    # the screen or a session file.
    secrets: tuple[str, ...]

    def scrub(self, text: str) -> str:
        for secret in self.secrets:
            text = text.replace(secret, REDACTED)
        return text


@dataclass(frozen=True)
class Reference:
    """One `${VAR}` in a server's entry: the field it is written in and, for a project's
    server, why it is not expanded (None: it is)."""

    variable: str
    place: str
    refusal: str | None


@dataclass(frozen=True)
class ServerSpec:
    name: str
    # "config", or the path of the .mcp.json that defined it.
    source: str
    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    url: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    read_only: bool = False
    enabled: bool = True
    # The older HTTP+SSE transport instead of streamable HTTP (a url server).
    sse: bool = False
    # Tools never offered to the model.
    disabled_tools: frozenset[str] = frozenset()
    # What the user's trust is remembered for (project servers): a changed command, env or
    # header asks again.
    digest: str = ""
    # For a project's server: the variables the user's config lets it have expanded.
    project_env: frozenset[str] = frozenset()

    @property
    def project(self) -> bool:
        return self.source != CONFIG_SOURCE

    @property
    def transport(self) -> Literal["stdio", "http", "sse"]:
        if self.command is not None:
            return "stdio"
        return "sse" if self.sse else "http"

    def target(self) -> str:
        """The command line or URL as written (variables unexpanded, URL query values hidden)."""
        if self.command is not None:
            return " ".join([self.command, *self.args])
        return redact_url(self.url or "")

    def references(self) -> list[Reference]:
        """Every `${VAR}` the entry names, in the order written, once per field."""
        fields = [
            ("command", self.command or ""),
            *(("args", arg) for arg in self.args),
            ("url", self.url or ""),
            *((f"env {name}", value) for name, value in self.env.items()),
            *((f"header {name}", value) for name, value in self.headers.items()),
        ]
        found: list[Reference] = []
        for place, text in fields:
            for match in _VARIABLE.finditer(text):
                variable = match.group(1)
                why = refusal(variable, self.project_env) if self.project else None
                if (reference := Reference(variable, place, why)) not in found:
                    found.append(reference)
        return found

    def resolve(self, environ: Mapping[str, str]) -> Resolved:
        """The values a connection uses; SpecError names a variable that is not set, or
        one a project's server may not have."""
        if self.project:
            _refuse_project_expansions(self.references(), environ)
        env = {key: expand(value, environ) for key, value in self.env.items()}
        headers = {key: expand(value, environ) for key, value in self.headers.items()}
        url = expand(self.url, environ) if self.url is not None else None
        secrets = [v for k, v in [*env.items(), *headers.items()] if secret_name(k)]
        # "Bearer <token>": the token alone is as secret as the whole value.
        secrets += [w for value in secrets for w in value.split() if w not in AUTH_SCHEMES]
        if url is not None:
            secrets += [value for _, value in parse_qsl(urlsplit(url).query)]
        return Resolved(
            command=expand(self.command, environ) if self.command is not None else None,
            args=[expand(arg, environ) for arg in self.args],
            env=env,
            url=url,
            headers=headers,
            # Longest first, so a secret containing another is replaced whole.
            secrets=tuple(
                sorted({s for s in secrets if len(s) >= MIN_SECRET_LENGTH}, key=len, reverse=True)
            ),
        )


def _refuse_project_expansions(references: list[Reference], environ: Mapping[str, str]) -> None:
    """SpecError naming every variable a project's server asks for and may not have."""
    refused = [f"${{{r.variable}}} in {r.place} ({r.refusal})" for r in references if r.refusal]
    # An allowed name can still hold a secret's value (`LABEL=$DEEPSEEK_API_KEY`).
    secrets = {
        name: value
        for name, value in environ.items()
        if secret_name(name) and len(value) >= MIN_SECRET_LENGTH
    }
    for reference in references:
        value = environ.get(reference.variable, "") if reference.refusal is None else ""
        holder = next((name for name, secret in secrets.items() if secret in value), None)
        if holder is not None:
            refused.append(
                f"${{{reference.variable}}} in {reference.place} (its value holds {holder}'s)"
            )
    if refused:
        raise SpecError(f"a project's server is not given {'; '.join(refused)}. {HOW_TO_ALLOW}")


def expand(text: str, environ: Mapping[str, str]) -> str:
    def value(match: re.Match[str]) -> str:
        name, default = match.group(1), match.group(2)
        if name in environ:
            return environ[name]
        if default is not None:
            return default
        raise SpecError(f"it needs the environment variable {name}, which is not set")

    return _VARIABLE.sub(value, text)


def only_references(value: str) -> bool:
    """Whether `value` holds no secret itself: only `${VAR}`s, maybe after an auth scheme."""
    rest = _VARIABLE.sub("", value).strip()
    return "${" in value and (not rest or rest in AUTH_SCHEMES)


def redact_url(url: str) -> str:
    """A URL with its query values hidden (tokens often travel there)."""
    parts = urlsplit(url)
    if not parts.query:
        return url
    query = "&".join(f"{key}=…" for key, _ in parse_qsl(parts.query, keep_blank_values=True))
    return urlunsplit(parts._replace(query=query))


def load_specs(config: McpConfig, workspace: Path) -> tuple[list[ServerSpec], list[str]]:
    """The session's servers, config first, and a warning for each one left out."""
    specs = [_from_config(name, server) for name, server in config.servers.items()]
    warnings: list[str] = []
    if config.project_servers:
        configured = {spec.name for spec in specs}
        for spec in project_specs(workspace, warnings, frozenset(config.project_env)):
            if spec.name in configured:
                warnings.append(
                    f"{spec.source}: server '{spec.name}' is also in your config, "
                    "which wins; the project's is not used"
                )
            else:
                specs.append(spec)
    return specs, warnings


def _from_config(name: str, server: McpServerConfig) -> ServerSpec:
    return ServerSpec(
        name=name,
        source=CONFIG_SOURCE,
        command=server.command,
        args=tuple(server.args),
        env=dict(server.env),
        url=server.url,
        headers=dict(server.headers),
        read_only=server.trust == "read_only",
        enabled=server.enabled,
        sse=server.type == "sse",
        disabled_tools=frozenset(server.disabled_tools),
    )


def project_specs(
    workspace: Path, warnings: list[str], project_env: frozenset[str] = frozenset()
) -> list[ServerSpec]:
    """The servers of `<workspace>/.mcp.json`, which may expand only the `project_env`
    variables; a broken file or entry becomes a warning."""
    path = workspace / PROJECT_FILE
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return []
    except (OSError, UnicodeDecodeError, ValueError) as error:
        warnings.append(f"{path}: not read ({error}); its MCP servers are not used")
        return []
    servers = document.get("mcpServers") if isinstance(document, dict) else None
    if not isinstance(servers, dict):
        warnings.append(f'{path}: expected {{"mcpServers": {{...}}}}; no MCP servers read')
        return []
    specs = []
    for name, entry in servers.items():
        try:
            specs.append(_from_project(str(name), entry, path, project_env))
        except SpecError as error:
            warnings.append(f"{path}: server '{name}' is not used: {error}")
            continue
        if unused := sorted(set(entry) - PROJECT_KEYS):
            warnings.append(
                f"{path}: server '{name}': {', '.join(unused)} not supported here, ignored"
                + (HEADERS_HELPER_NOTE if "headersHelper" in unused else "")
            )
    return specs


def _from_project(name: str, entry: Any, path: Path, project_env: frozenset[str]) -> ServerSpec:
    if problem := mcp_server_name_problem(name):
        raise SpecError(problem)
    if not isinstance(entry, dict):
        raise SpecError("expected an object with command or url")
    kind = entry.get("type", "http" if "url" in entry else "stdio")
    if kind not in ("stdio", "http", "streamable-http", "sse"):
        raise SpecError(f"unknown type {kind!r} (use stdio, http or sse)")
    # The project says how to start a server, never how far to trust it: `trust` is the
    # user's own to give, in their config.
    fields = {
        key: entry[key] for key in ("command", "args", "env", "url", "headers") if key in entry
    }
    # The transport and hidden tools change nothing a server can reach: not in the digest,
    # so a file trusted before they were read is not asked about again.
    extra = {"type": kind, "disabled_tools": entry.get("disabledTools", [])}
    try:
        server = McpServerConfig.validate({**fields, **extra})
    except TableError as error:
        raise SpecError(str(error)) from None
    # Everything the trust prompt shows: the entry as written, env and headers included.
    digest = hashlib.sha256(
        json.dumps([name, fields], sort_keys=True, ensure_ascii=False).encode()
    ).hexdigest()
    return replace(
        _from_config(name, server), source=str(path), digest=digest, project_env=project_env
    )
