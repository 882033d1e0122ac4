"""The shape of config.toml: its tables, their defaults and their bounds.

Numbers outside their bounds are clamped (with a note naming the key); values
of the wrong type are validation errors (config_tables.py checks them). Notes are
collected as (dotted_keys, message) pairs by `Config.validate(data, notes)`.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, ClassVar, Literal
from urllib.parse import urlsplit

from codewhale.config_tables import Bounds, Table, note, rule
from codewhale.providers.presets import DEFAULT_PROVIDER, PRESETS
from codewhale.secret_names import secret_name

PROVIDER_ALIASES = {"llama.cpp": "llamacpp", "llama-cpp": "llamacpp"}


def web_url(url: str) -> str:
    """`url` when it is an http(s) URL with a host and a port that can be dialled; a
    ValueError saying what is wrong (a bad port would otherwise fail at the first request)."""
    if not url.startswith(("http://", "https://")):
        raise ValueError(f"'{url}' is not an http:// or https:// URL")
    parts = urlsplit(url)
    if not parts.hostname:
        raise ValueError(f"'{url}' names no host")
    try:
        parts.hostname.encode("idna")  # as the request will spell it
    except UnicodeError:
        raise ValueError(
            f"'{url}' names a host that is not a valid domain name (a label is empty or "
            "longer than 63 characters)"
        ) from None
    try:
        port = parts.port
    except ValueError as error:
        raise ValueError(
            f"'{url}' has a bad port ({error}); a port is a number from 1 to 65535"
        ) from None
    if port == 0:
        raise ValueError(f"'{url}' has port 0; a port is a number from 1 to 65535")
    return url


# A header's name: an HTTP token (RFC 9110 5.1).
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")


def http_headers(headers: dict[str, str]) -> dict[str, str]:
    """`headers` when each can go on the wire as it is: a token for a name, printable ASCII
    for a value (no line break that would start a header of its own); a ValueError
    naming the first that cannot."""
    for name, value in headers.items():
        if not _HEADER_NAME.fullmatch(name):
            raise ValueError(f"header name {name!r} is not an HTTP token (letters, digits, -)")
        if not all(" " <= character <= "~" or character == "\t" for character in value):
            raise ValueError(
                f"header {name}: its value must be printable ASCII, without line breaks"
            )
    return headers


class NetworkConfig(Table):
    section: ClassVar[str] = "network"
    connect_timeout_secs: Annotated[float, Bounds(1, 120)] = 10.0
    stream_idle_timeout_secs: Annotated[float, Bounds(5, 1800)] = 90.0
    max_retries: Annotated[int, Bounds(0, 10)] = 4
    retry_deadline_secs: Annotated[float, Bounds(1, 1800)] = 120.0
    allow_private: bool = False


MAX_SUBAGENTS = 20
DEFAULT_API_TIMEOUT_SECS = 120


class SubagentsConfig(Table):
    section: ClassVar[str] = "subagents"
    max_concurrent: Annotated[int, Bounds(1, MAX_SUBAGENTS)] = MAX_SUBAGENTS
    launch_concurrency: int | None = None
    api_timeout_secs: Annotated[int, Bounds(0, 1800)] = DEFAULT_API_TIMEOUT_SECS
    heartbeat_timeout_secs: Annotated[int, Bounds(30, 3600)] = 300
    default_model: str | None = None
    worker_model: str | None = None
    explorer_model: str | None = None
    awaiter_model: str | None = None
    review_model: str | None = None
    custom_model: str | None = None
    models: dict[str, str] = {}
    # Finished isolated children's worktrees are deleted this long after they finished.
    worktree_keep_hours: Annotated[int, Bounds(0, 8760)] = 24
    # Each child's budget unless agent_open sets its own (unset: no limit); a child over
    # it is stopped and recorded failed with the budget as its reason.
    max_runtime_secs: Annotated[float, Bounds(1, 86400)] | None = None
    max_tokens: Annotated[int, Bounds(1_000, 100_000_000)] | None = None
    max_cost_usd: Annotated[float, Bounds(0.001, 10_000)] | None = None
    # How many children one turn of one conversation may open (unset: no limit beyond
    # max_concurrent): a runaway fan-out is refused, not queued.
    max_children_per_turn: Annotated[int, Bounds(1, 1000)] | None = None

    @rule("models")
    def _normalise_role_keys(models: dict[str, str]) -> dict[str, str]:
        return {key.strip().lower(): value for key, value in models.items()}

    def _after(self) -> None:
        """Rules that tie one limit to another."""
        if self.api_timeout_secs == 0:
            self._set("api_timeout_secs", DEFAULT_API_TIMEOUT_SECS)
        launch = self.launch_concurrency
        if launch is None:
            self._set("launch_concurrency", self.max_concurrent)
        elif not 1 <= launch <= self.max_concurrent:
            self._set("launch_concurrency", min(max(launch, 1), self.max_concurrent))
            note(
                ("subagents.launch_concurrency", "subagents.max_concurrent"),
                f"subagents.launch_concurrency = {launch} is outside 1..{self.max_concurrent} "
                f"(max_concurrent); using {self.launch_concurrency}",
            )
        floor = self.api_timeout_secs + 30
        if self.heartbeat_timeout_secs < floor:
            note(
                ("subagents.heartbeat_timeout_secs", "subagents.api_timeout_secs"),
                f"subagents.heartbeat_timeout_secs = {self.heartbeat_timeout_secs} must be at "
                f"least api_timeout_secs + 30; using {floor}",
            )
            self._set("heartbeat_timeout_secs", floor)


class MemoryConfig(Table):
    section: ClassVar[str] = "memory"
    enabled: bool = False


class RlmConfig(Table):
    section: ClassVar[str] = "rlm"
    child_model: str | None = None
    sub_query_timeout_secs: Annotated[int, Bounds(1, 600)] = 120
    sub_rlm_max_depth: Annotated[int, Bounds(0, 3)] = 1
    eval_timeout_secs: Annotated[int, Bounds(1, 3600)] = 120
    cpu_limit_secs: Annotated[int, Bounds(10, 86400)] = 900
    memory_limit_mb: Annotated[int, Bounds(256, 65536)] = 2048
    max_processes: Annotated[int, Bounds(1, 4096)] = 64


# keep_recent must stay this far under compact_at: a compaction has to free real room.
MIN_COMPACTION_GAIN = 0.2


class ContextConfig(Table):
    """How much of the model's context window a conversation may fill (docs/CONTEXT.md)."""

    section: ClassVar[str] = "context"
    # Tokens (prompt + answer) the model takes; unset = known per model and provider.
    window: Annotated[int | None, Bounds(2_048, 10_000_000)] = None
    # Compact when the next request would fill this fraction of the window.
    compact_at: Annotated[float, Bounds(0.3, 0.95)] = 0.8
    # The newest messages kept word for word, as a fraction of the window.
    keep_recent: Annotated[float, Bounds(0.05, 0.5)] = 0.25
    # The model that writes the summary; unset = the provider's fast model.
    summary_model: str | None = None
    # Off: compaction happens only on /compact (a request past the window then fails).
    auto_compact: bool = True

    @classmethod
    def _before(cls, values: dict[str, Any]) -> dict[str, Any]:
        # A whole number here is a percentage typed by mistake (80 for 0.8); said before
        # the bounds would clamp it into something meaningless.
        for name in ("compact_at", "keep_recent"):
            value = values.get(name)
            if isinstance(value, int) and not isinstance(value, bool):
                raise ValueError(
                    f"{name} = {value}: expected a fraction of the window such as "
                    f"{cls.default_of(name)}"
                )
        return values

    @rule("summary_model")
    def _model_id(model: str | None) -> str | None:
        if model is not None and not model.strip():
            raise ValueError("expected a model id; leave the key out for the fast model")
        return model.strip() if model is not None else None

    def _after(self) -> None:
        """What is kept must leave room under the threshold, or every step would compact."""
        most = round(self.compact_at - MIN_COMPACTION_GAIN, 2)
        if self.keep_recent > most:
            note(
                ("context.keep_recent", "context.compact_at"),
                f"context.keep_recent = {self.keep_recent:g} must be at most compact_at - "
                f"{MIN_COMPACTION_GAIN:g}; using {most:g}",
            )
            self._set("keep_recent", most)


class TuiConfig(Table):
    section: ClassVar[str] = "tui"
    sidebar: bool = True
    theme: str = "textual-dark"
    show_reasoning: bool = True
    # When a turn or a sub-agent ends after 10 s or more: "bell" rings the terminal bell,
    # "desktop" asks the terminal for a desktop notification (OSC 9 / OSC 777), "off".
    notify: Literal["bell", "desktop", "off"] = "bell"
    # "unfocused": only while the terminal window is not focused; "always": either way.
    notify_when: Literal["unfocused", "always"] = "unfocused"


class SandboxConfig(Table):
    """The OS sandbox around shell commands (docs/SECURITY.md)."""

    section: ClassVar[str] = "sandbox"
    # "auto": use it wherever it can start, otherwise run commands unsandboxed (they still
    # ask in Agent mode); true: refuse to run commands without it; false: never use it.
    enabled: bool | Literal["auto"] = "auto"
    # More paths to hide from commands; `~` is expanded, relative paths are in the workspace.
    hide: list[str] = []
    # More environment variables commands may see (the allowlist: sandbox/environment.py).
    pass_env: list[str] = []

    @rule("enabled", before=True)
    def _switch(value: Any) -> Any:
        # One readable message instead of one per type the key takes.
        if value is True or value is False or value == "auto":
            return value
        raise ValueError(f'expected true, false or "auto", got {value!r}')

    @rule("pass_env")
    def _variable_names(names: list[str]) -> list[str]:
        bad = [name for name in names if not name.strip() or "=" in name]
        if bad:
            raise ValueError(f"not environment variable names: {bad!r}")
        return [name.strip() for name in names]


# A server's name becomes part of each of its tools' names (`mcp__<server>__<tool>`).
_MCP_SERVER_NAME = re.compile(r"^[A-Za-z0-9_-]+$")


def mcp_server_name_problem(name: str) -> str | None:
    """Why `name` cannot name an MCP server, or None."""
    if not _MCP_SERVER_NAME.match(name):
        return f"server name '{name}' may only use letters, digits, '-' and '_'"
    if "__" in name:
        return f"server name '{name}' may not contain '__' (it separates server and tool)"
    return None


class McpServerConfig(Table):
    """One MCP server: a program over stdio (`command`) or a streamable-HTTP `url`."""

    section: ClassVar[str] = "mcp.servers"
    hidden: ClassVar[frozenset[str]] = frozenset({"env", "headers"})
    # "sse": a `url` server on the older HTTP+SSE transport; unset, a url means
    # streamable HTTP and a command stdio (Claude Code's `type`, same values).
    type: Literal["stdio", "http", "streamable-http", "sse"] | None = None
    command: str | None = None
    args: list[str] = []
    # Values may name environment variables (`${TOKEN}`, `${TOKEN:-default}`); shown
    # redacted by `config show`.
    env: dict[str, str] = {}
    url: str | None = None
    headers: dict[str, str] = {}
    # "read_only": its tools change nothing, so they run without asking and read-only
    # sub-agents may use them. Unset: every call asks (Agent mode), as a shell command does.
    trust: Literal["read_only"] | None = None
    enabled: bool = True
    # Tools of this server the model is never offered (Claude Code's `disabledTools`).
    disabled_tools: list[str] = []

    def _after(self) -> None:
        if (self.command is None) == (self.url is None):
            raise ValueError("give either command (a program over stdio) or url (streamable HTTP)")
        if self.url is not None:
            web_url(self.url)
        if self.command is not None and (self.headers or not self.command.strip()):
            raise ValueError("command must be a program name; headers belong to url servers")
        if self.url is not None and (self.args or self.env):
            raise ValueError("args and env belong to command servers, not url ones")
        if self.type is not None and (self.type == "stdio") != (self.command is not None):
            raise ValueError(f"type '{self.type}' does not match the server's command or url")


class McpConfig(Table):
    """MCP servers whose tools the model gets as `mcp__<server>__<tool>` (docs/MCP.md)."""

    section: ClassVar[str] = "mcp"
    servers: dict[str, McpServerConfig] = {}
    # How long the first model request waits for servers still starting.
    startup_timeout_secs: Annotated[float, Bounds(1, 300)] = 30.0
    # Read the project's .mcp.json (its servers still need your trust once).
    project_servers: bool = True
    # Variables a project's .mcp.json may have expanded (`${NAME}`) for its servers; a
    # server asking for any other does not start. User config only (docs/MCP.md).
    project_env: list[str] = []

    @rule("servers")
    def _server_names(servers: dict[str, McpServerConfig]) -> dict[str, McpServerConfig]:
        for name in servers:
            if problem := mcp_server_name_problem(name):
                raise ValueError(problem)
        return servers

    @rule("project_env")
    def _plain_variable_names(names: list[str]) -> list[str]:
        bad = [name for name in names if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name)]
        if bad:
            raise ValueError(f"not environment variable names: {bad!r}")
        # A repository's server gets no secret, whatever this list says: that is the rule
        # the trust prompt explains, so a secret here is a mistake to point out.
        secrets = [name for name in names if secret_name(name)]
        if secrets:
            raise ValueError(
                f"{', '.join(secrets)} looks like a secret, and a project's server is never "
                "given one; define the server that needs it in your own config "
                "([mcp.servers.<name>]) instead"
            )
        return names


class PermissionsConfig(Table):
    """Lasting allow/ask/deny rules in Claude Code's syntax (docs/PERMISSIONS.md).

    Checked here, but enforced from each file on its own (codewhale.rules): the user's and
    the project's lists add up rather than one replacing the other, and a project's
    `allow` is ignored.
    """

    section: ClassVar[str] = "permissions"
    allow: list[str] = []
    ask: list[str] = []
    deny: list[str] = []


class Config(Table):
    """The whole effective configuration."""

    hidden: ClassVar[frozenset[str]] = frozenset({"api_key", "headers"})

    provider: str = DEFAULT_PROVIDER
    model: str | None = None
    fast_model: str | None = None
    base_url: str | None = None
    api_key: str | None = None
    headers: dict[str, str] = {}
    allow_insecure_http: bool = False
    # With no provider and no API key configured, use the bundled offline model.
    offline_fallback: bool = True
    # Offer tools to the offline model. Off: a 135M model calls tools for everything.
    offline_tools: bool = False
    # How hard a reasoning model thinks, where the provider takes it (OpenAI's
    # `reasoning_effort`, OpenRouter's `reasoning.effort`); unset, the model's default.
    # Top-level, not `[model]`: `model` is already the model's id.
    reasoning_effort: Literal["minimal", "low", "medium", "high"] | None = None
    network: NetworkConfig
    subagents: SubagentsConfig
    memory: MemoryConfig
    rlm: RlmConfig
    tui: TuiConfig
    context: ContextConfig
    sandbox: SandboxConfig
    mcp: McpConfig
    permissions: PermissionsConfig
    # Lifecycle hooks in Claude Code's shape; checked, with file and key, by codewhale.hooks
    # (which reads each file itself: a project's hooks need the user's trust).
    hooks: dict[str, Any] = {}

    @rule("provider")
    def _known_provider(name: str) -> str:
        key = PROVIDER_ALIASES.get(name.strip().lower(), name.strip().lower())
        if key not in PRESETS:
            raise ValueError(f"unknown provider '{name}'; known providers: {', '.join(PRESETS)}")
        return key

    @rule("base_url")
    def _http_url(url: str | None) -> str | None:
        return None if url is None else web_url(url)

    @rule("headers")
    def _sendable_headers(headers: dict[str, str]) -> dict[str, str]:
        return http_headers(headers)

    @rule("api_key")
    def _sendable_key(key: str | None) -> str | None:
        # Sent as `Authorization: Bearer <key>`; the message names where, never the key.
        for position, character in enumerate(key or "", start=1):
            if not " " < character <= "~":
                raise ValueError(
                    f"the key's character {position} cannot be sent: a key is printable ASCII "
                    "with no spaces (a line break or a look-alike letter in the copy?); copy "
                    "the key again"
                )
        return key


# Keys a project overlay may not set: a cloned repository must not be able to
# send your API key (or your code) to a server of its choosing.
# Likewise it may not open the user's private network to fetch_url, nor switch off or
# loosen the sandbox its own commands run in (a project `hide` list would also replace
# the user's, since lists are not merged).
# Nor may it start programs: its MCP servers come from .mcp.json, which needs your trust;
# nor turn on reading that file, or choose which of your variables its servers get.
PROJECT_FORBIDDEN_KEYS = (
    "provider",
    "base_url",
    "api_key",
    "headers",
    "allow_insecure_http",
    "network.allow_private",
    "sandbox.enabled",
    "sandbox.hide",
    "sandbox.pass_env",
    "mcp.servers",
    "mcp.project_env",
    "mcp.project_servers",
)

# Tables whose keys are free-form (no unknown-key warnings inside them).
FREE_FORM_TABLES = ("headers", "subagents.models", "mcp.servers")
