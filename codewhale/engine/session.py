"""Assemble a working session: config, provider client, tools, engine and session file.

Shared by `codewhale exec` and the TUI so both start (and resume) the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from codewhale.config import LoadedConfig, load_config
from codewhale.engine import events
from codewhale.engine.loop import DEFAULT_MAX_STEPS, Engine
from codewhale.engine.prompt import MAX_MEMORY_CHARS, build_system_prompt
from codewhale.paths import WorkspacePaths, memory_file, user_agents_dir, user_dirs
from codewhale.permissions import Mode
from codewhale.providers.client import ChatClient
from codewhale.providers.errors import ProviderError
from codewhale.providers.local_model import bundled_model_file, limits, missing_local_runtime
from codewhale.providers.local_server import LocalServer
from codewhale.providers.settings import ProviderSettings
from codewhale.rlm.sessions import RlmManager
from codewhale.rlm.tools import rlm_tools
from codewhale.sessions.store import SessionError, SessionInfo, SessionStore, SessionWriter
from codewhale.subagents.definitions import load_definitions
from codewhale.subagents.manager import SubAgentManager
from codewhale.subagents.tools import agent_tools, bind_opener
from codewhale.tools.base import ToolContext
from codewhale.tools.registry import ToolRegistry, default_tools


class SessionSetupError(Exception):
    """The session could not start: bad workspace, endpoint or session id."""


@dataclass
class Session:
    engine: Engine
    info: SessionInfo
    writer: SessionWriter
    client: ChatClient
    loaded: LoadedConfig
    manager: SubAgentManager
    rlm: RlmManager
    warnings: list[str] = field(default_factory=list)
    local_server: LocalServer | None = None

    async def close(self) -> None:
        # A turn still running (quitting mid-answer) ends "interrupted" and is recorded
        # before the session file closes under it.
        await self.engine.stop()
        await self.manager.shutdown()
        await self.rlm.close_all()
        self.writer.close()
        await self.client.aclose()
        if self.local_server is not None:
            await self.local_server.stop()


def open_session(
    *,
    workspace: Path,
    overrides: Mapping[str, Any] | None = None,
    mode: Mode = Mode.AGENT,
    emit: Callable[[events.Event], None] = lambda event: None,
    resume: str | None = None,
    continue_latest: bool = False,
    max_steps: int | None = None,
    retry_base_delay_secs: float = 0.5,
) -> Session:
    """Everything one conversation needs; raises ConfigError or SessionSetupError."""
    workspace = workspace.resolve()
    if not workspace.is_dir():
        raise SessionSetupError(f"workspace {workspace} is not a directory")
    loaded = load_config(workspace=workspace, overrides=overrides)
    settings = loaded.provider_settings()
    dirs = user_dirs()
    local_server = _local_server(settings, dirs.state_dir)
    try:
        client = ChatClient(
            settings, retry_base_delay_secs=retry_base_delay_secs, launcher=local_server
        )
    except ProviderError as error:
        raise SessionSetupError(error.message) from None
    store = SessionStore(dirs.data_dir)
    warnings = list(loaded.warnings)
    if loaded.offline_fallback:
        what = limits(settings.offer_tools)
        warnings.append(
            f"no API key configured, so the bundled model answers ({what}). "
            "Set DEEPSEEK_API_KEY, or another provider in the user config, for real work."
        )
    messages: list[dict[str, Any]] = []
    try:
        if resume or continue_latest:
            info = _find(store, workspace, resume)
            previous = store.load(info.id)
            warnings += previous.warnings
            messages = previous.messages
            writer = store.open_for_append(previous)
        else:
            info, writer = store.create(workspace, settings.model)
    except SessionError as error:
        raise SessionSetupError(str(error)) from None
    memory = memory_file(dirs) if loaded.config.memory.enabled else None
    context = ToolContext(
        workspace=workspace,
        session_id=info.id,
        mode=mode,
        memory_file=memory_file(dirs),
        memory_enabled=loaded.config.memory.enabled,
        allow_private_network=loaded.config.network.allow_private,
    )
    system_prompt = (
        messages[0]["content"]
        if messages and messages[0].get("role") == "system"
        else build_system_prompt(workspace, mode, memory_file=memory, tools=settings.offer_tools)
    )
    definitions = load_definitions(
        WorkspacePaths(workspace).agents_dir,
        user_agents_dir(dirs),
        {tool.name for tool in default_tools()},
    )
    warnings += [f"agent definition {error}" for error in definitions.errors]

    def memory_text() -> str | None:
        if memory is None or not memory.is_file():
            return None
        return memory.read_text(encoding="utf-8", errors="replace")[-MAX_MEMORY_CHARS:]

    manager = SubAgentManager(
        workspace=workspace,
        client=client,
        settings=settings,
        config=loaded.config.subagents,
        tools_factory=default_tools,
        handles=context.handles,
        definitions=definitions,
        parent_mode=lambda: context.mode,
        emit=emit,
        memory_text=memory_text,
    )
    if manager.state_error:
        warnings.append(manager.state_error)
    engine_ref: list[Engine] = []
    rlm = RlmManager(
        client=client,
        config=loaded.config.rlm,
        handles=context.handles,
        on_usage=lambda usage: engine_ref[0].add_external_usage(usage),
        workspace=workspace,
    )

    def transcript() -> str:
        return "\n\n".join(
            f"[{m.get('role')}] {m.get('content') or ''}" for m in engine_ref[0].messages
        )

    tools = [*default_tools(), *agent_tools(manager), *rlm_tools(rlm, transcript)]
    engine = Engine(
        client=client,
        tools=ToolRegistry(tools),
        context=context,
        system_prompt=system_prompt,
        emit=emit,
        model=settings.model,
        max_steps=max_steps or DEFAULT_MAX_STEPS,
        messages=messages,
        recorder=writer,
    )
    engine_ref.append(engine)
    bind_opener(tools, engine)
    manager.attach_parent(engine)
    return Session(engine, info, writer, client, loaded, manager, rlm, warnings, local_server)


def _local_server(settings: ProviderSettings, state_dir: Path) -> LocalServer | None:
    """The offline model server for the `local` provider; it starts on the first request."""
    if settings.provider != "local":
        return None
    missing = missing_local_runtime()
    if missing:
        raise SessionSetupError(missing)
    model = bundled_model_file()
    assert model is not None  # missing_local_runtime() looked for it
    return LocalServer(model, alias=settings.model, log_file=state_dir / "local-model.log")


def _find(store: SessionStore, workspace: Path, session_id: str | None) -> SessionInfo:
    if session_id:
        return store.load(session_id).info
    latest = store.latest(workspace)
    if latest is None:
        raise SessionError(f"no earlier session for {workspace} to continue")
    return latest
