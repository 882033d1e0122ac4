"""Assemble one conversation: config, provider client, tools, engine, sub-agent and RLM
managers, session file and the offline model server, each built once, in order, so
nothing needs patching afterwards.
"""

from __future__ import annotations

import contextlib
import gc
import os
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from codewhale.config import LoadedConfig, load_config
from codewhale.engine import events
from codewhale.engine.compaction import CompactionPolicy
from codewhale.engine.conversation import Conversation, Inbox, UsageMeter
from codewhale.engine.loop import DEFAULT_MAX_STEPS, Engine
from codewhale.engine.prompt import MAX_MEMORY_CHARS, build_system_prompt, git_branch
from codewhale.gitrun import follow_sandbox_setting
from codewhale.hooks.session import HookReport, Hooks, open_hooks
from codewhale.hooks.trust import waiting_notice
from codewhale.mcp.hub import McpHub
from codewhale.mcp.registry import SessionTools
from codewhale.paths import memory_file, user_dirs
from codewhale.permissions import Mode, ModeSwitch
from codewhale.private_files import private_dir
from codewhale.providers.client import ChatClient
from codewhale.providers.errors import ProviderError
from codewhale.providers.local_model import bundled_model_file, limits, missing_local_runtime
from codewhale.providers.local_server import LocalServer
from codewhale.providers.pricing import cost_usd
from codewhale.providers.settings import ProviderSettings
from codewhale.rlm.sessions import RlmManager
from codewhale.rlm.tools import rlm_tools
from codewhale.rules.ruleset import PermissionRules
from codewhale.rules.sources import rule_files, trust_store
from codewhale.runtime.redactor import session_redactor
from codewhale.runtime.runtime import Runtime
from codewhale.sandbox import describe, sandbox_status
from codewhale.sessions.store import LoadedSession, SessionError, SessionStore
from codewhale.skills import load_skills
from codewhale.subagents.child import Opener
from codewhale.subagents.definition_problems import missing_skills, startup_notices
from codewhale.subagents.definition_trust import load_workspace_definitions
from codewhale.subagents.manager import SubAgentManager
from codewhale.subagents.roles import served_tools
from codewhale.subagents.tools import agent_tools
from codewhale.tools.background import exit_note
from codewhale.tools.base import ToolContext
from codewhale.tools.registry import default_tools
from codewhale.tools.session_changes import SessionChanges
from codewhale.tools.skill import skill_tools

# How deep the session's own children may nest (spec §2: max_depth 0..3).
ROOT_DEPTH = 3


NOTHING_TO_CONTINUE = "no earlier session here: started a new one"


class RuntimeSetupError(Exception):
    """The session could not start: bad workspace, endpoint or session id."""


def open_runtime(
    *,
    workspace: Path,
    overrides: Mapping[str, Any] | None = None,
    loaded: LoadedConfig | None = None,
    mode: Mode = Mode.AGENT,
    emit: Callable[[events.Event], None] = lambda event: None,
    resume: str | None = None,
    continue_latest: bool = False,
    max_steps: int | None = None,
    retry_base_delay_secs: float = 0.5,
) -> Runtime:
    """Everything one conversation needs; raises ConfigError or RuntimeSetupError.

    `loaded`: the config already read for this workspace and overrides (the app's start-up
    checks read it), so it is not read and validated twice.
    """
    workspace = workspace.resolve()
    if not workspace.is_dir():
        raise RuntimeSetupError(f"workspace {workspace} is not a directory")
    if loaded is None:
        loaded = load_config(workspace=workspace, overrides=overrides)
    settings = loaded.provider_settings()
    dirs = user_dirs()
    # The app's own folders hold sessions, logs and memory: 0700, even where an older
    # version made them wider. One that cannot be made (a full or read-only disk) does
    # not stop the session: it runs in memory, and the writer says what was not saved.
    for folder in (dirs.data_dir, dirs.state_dir):
        with contextlib.suppress(OSError):
            private_dir(folder)
    local_server = _local_server(settings, dirs.state_dir)
    try:
        client = ChatClient(
            settings, retry_base_delay_secs=retry_base_delay_secs, launcher=local_server
        )
    except ProviderError as error:
        raise RuntimeSetupError(error.message) from None
    store = SessionStore(dirs.data_dir)
    warnings = list(loaded.warnings)
    sandbox = loaded.config.sandbox
    follow_sandbox_setting(sandbox.enabled)
    if not (status := sandbox_status(sandbox.enabled)).available:
        warnings.append(describe(status, sandbox.enabled))
    # One git run (in the sandbox: two bwraps) for the prompt and the children's records.
    # It mostly waits on processes, so it runs beside the rest of the opening.
    lookup = ThreadPoolExecutor(max_workers=1, thread_name_prefix="git-branch")
    branch_lookup = lookup.submit(git_branch, workspace)
    lookup.shutdown(wait=False)
    if loaded.offline_fallback:
        what = limits(settings.offer_tools)
        warnings.append(
            f"no API key configured, so the bundled model answers ({what}). "
            "Set DEEPSEEK_API_KEY, or another provider in the user config, for real work."
        )
    messages: list[dict[str, Any]] = []
    previous: LoadedSession | None = None
    try:
        earlier = store.resumable(workspace, resume) if resume or continue_latest else None
        if continue_latest and earlier is None:
            # `--continue` where nothing ran yet still means "work here": a new session.
            warnings.append(NOTHING_TO_CONTINUE)
        if earlier is not None:
            resumed = store.resume(earlier.id, workspace, settings.model)
            previous, writer = resumed.loaded, resumed.writer
            info = previous.info
            warnings += previous.warnings
            messages = previous.messages
        else:
            info, writer = store.create(workspace, settings.model)
    except SessionError as error:
        raise RuntimeSetupError(str(error)) from None
    memory = memory_file(dirs) if loaded.config.memory.enabled else None
    context = ToolContext(
        workspace=workspace,
        session_id=info.id,
        modes=ModeSwitch(mode),
        memory_file=memory_file(dirs),
        memory_enabled=loaded.config.memory.enabled,
        allow_private_network=loaded.config.network.allow_private,
        redactor=session_redactor(loaded, workspace, os.environ),
        rules=_permission_rules(loaded, workspace, dirs.state_dir),
        changes=SessionChanges(),
        hooks=_session_hooks(loaded, workspace, dirs.state_dir, info.id, writer.path, emit),
    )
    warnings += context.rules.loaded.warnings
    warnings += context.hooks.problems
    if waiting := context.hooks.untrusted():
        warnings.append(waiting_notice(len(waiting)))
    branch = branch_lookup.result()
    if not messages:
        prompt = build_system_prompt(
            workspace,
            mode,
            memory_file=memory,
            tools=settings.offer_tools,
            warnings=warnings,
            branch=branch,
        )
        messages.append({"role": "system", "content": prompt})
    # A resumed session's message sizes come with it: the first estimate encodes none.
    conversation = Conversation(messages, known_sizes=previous.sizes if previous else [])
    # A resumed session counts on from the totals it had (spent money stays spent).
    meter = UsageMeter.from_json(previous.meter) if previous is not None else UsageMeter()
    root = Opener(None, conversation, Inbox(), meter, context, ROOT_DEPTH)
    # A background task that ends by itself is news for the conversation (its own turn
    # or the next one); tasks a child started tell the parent too, which owns the session.
    context.background.on_exit = lambda task: root.inbox.runtime_event(exit_note(task))
    skills = load_skills(workspace)
    warnings += skills.warnings
    builtin_tools = [*default_tools(sandbox), *skill_tools(skills)]
    # No server starts here (this may run in a thread, before the app's first frame):
    # the front end starts them, or the first model request does.
    mcp = McpHub.from_config(loaded.config.mcp, workspace, dirs)
    warnings += mcp.warnings
    definitions = load_workspace_definitions(
        workspace, served_tools((tool.name for tool in builtin_tools), mcp.server_names())
    )
    warnings += startup_notices(definitions)
    warnings += missing_skills(definitions, skills)

    def memory_text() -> str | None:
        if memory is None or not memory.is_file():
            return None
        return memory.read_text(encoding="utf-8", errors="replace")[-MAX_MEMORY_CHARS:]

    compaction = CompactionPolicy.from_config(loaded.config.context)
    manager = SubAgentManager(
        workspace=workspace,
        client=client,
        settings=settings,
        config=loaded.config.subagents,
        definitions=definitions,
        handles=context.handles,
        root=root,
        session_id=info.id,
        # A child gets the MCP tools of the servers up when it is made; its authority
        # decides which of them it is offered and may call.
        tools_factory=lambda: [*default_tools(sandbox), *skill_tools(skills), *mcp.tools()],
        agent_tools_factory=agent_tools,
        emit=emit,
        memory_text=memory_text,
        compaction=compaction,
        mcp_servers=mcp.server_names(),
        skills=skills,
        branch=branch,
    )
    if manager.state_error:
        warnings.append(manager.state_error)
    warnings.extend(manager.state_warnings)
    rlm_model = loaded.config.rlm.child_model or settings.fast_model
    rlm = RlmManager(
        client=client,
        config=loaded.config.rlm,
        handles=context.handles,
        on_usage=lambda usage: meter.add_delegated(
            usage, cost_usd(settings.provider, rlm_model, usage)
        ),
        workspace=workspace,
        sandbox=sandbox,
        redactor=context.redactor,
    )

    def transcript() -> str:
        return "\n\n".join(
            f"[{m.get('role')}] {m.get('content') or ''}" for m in conversation.messages
        )

    tools = SessionTools(
        [*builtin_tools, *agent_tools(manager, root), *rlm_tools(rlm, transcript)], mcp
    )
    engine = Engine(
        client=client,
        tools=tools,
        # The list MCP servers' tools join as they come up (SessionTools).
        offered_tools=tools.offered,
        context=context,
        conversation=conversation,
        emit=emit,
        model=settings.model,
        max_steps=max_steps or DEFAULT_MAX_STEPS,
        recorder=writer,
        inbox=root.inbox,
        meter=meter,
        hold=manager.hold_for(root),
        compaction=compaction,
    )
    if previous is not None and (note := manager.adopt_session()):
        root.inbox.runtime_event(note)
    # Everything alive now (modules, config, clients) lives as long as the session. Moving
    # it out of the collector's reach keeps full collections from walking it: measured, a
    # 15 ms pause inside one of 20 agent_open calls disappears (20 opens: 24 ms -> 6 ms).
    gc.freeze()
    return Runtime(
        engine=engine,
        info=info,
        writer=writer,
        client=client,
        loaded=loaded,
        manager=manager,
        rlm=rlm,
        mcp=mcp,
        warnings=warnings,
        local_server=local_server,
        resumed=previous is not None,
        skills=skills,
    )


def _permission_rules(loaded: LoadedConfig, workspace: Path, state_dir: Path) -> PermissionRules:
    """The allow/ask/deny rules of the user's and the project's config and Claude settings."""
    files = rule_files(workspace, loaded.user_file, loaded.project_file, os.environ)
    return PermissionRules.load(workspace, files, trust_store(state_dir))


def _session_hooks(
    loaded: LoadedConfig,
    workspace: Path,
    state_dir: Path,
    session_id: str,
    transcript: Path,
    emit: Callable[[events.Event], None],
) -> Hooks:
    """The user's and the project's hooks; each run is reported as a HookRan event."""

    def report(run: HookReport) -> None:
        emit(events.HookRan(**vars(run)))

    return open_hooks(
        workspace=workspace,
        user_config=loaded.user_file,
        project_config=loaded.project_file,
        state_dir=state_dir,
        env=os.environ,
        pass_env=tuple(loaded.config.sandbox.pass_env),
        session_id=session_id,
        transcript_path=str(transcript),
        on_run=report,
    )


def _local_server(settings: ProviderSettings, state_dir: Path) -> LocalServer | None:
    """The offline model server for the `local` provider; it starts on the first request."""
    if settings.provider != "local":
        return None
    missing = missing_local_runtime()
    if missing:
        raise RuntimeSetupError(missing)
    model = bundled_model_file()
    assert model is not None  # missing_local_runtime() looked for it
    return LocalServer(model, alias=settings.model, log_file=state_dir / "local-model.log")
