"""What each slash command does in the app."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from codewhale.engine.slash_prompts import (
    SlashUsageError,
    agent_prompt,
    parse_agent_arguments,
    relay_prompt,
    rlm_prompt,
)
from codewhale.paths import user_dirs
from codewhale.permissions import Mode
from codewhale.sessions.store import SessionStore
from codewhale.subagents.spawn import SpawnError, validate_model
from codewhale.tui.commands import CommandRegistry, SlashCommand

if TYPE_CHECKING:
    from codewhale.tui.app import CodeWhaleApp


async def _help(app: CodeWhaleApp, arguments: str) -> None:
    lines = ["Commands:"]
    for command in app.registry.commands():
        aliases = (
            f" (also {', '.join('/' + a for a in command.aliases)})" if command.aliases else ""
        )
        lines.append(f"  /{command.name} {command.usage}".rstrip() + f" — {command.help}{aliases}")
    lines.append(
        "Keys: Enter send/steer · Shift+Enter newline · Tab mode/queue/complete · "
        "Esc cancel · Ctrl+B Work sidebar · Ctrl+Q quit"
    )
    await app.transcript.notice("\n".join(lines))


async def _agent(app: CodeWhaleApp, arguments: str) -> None:
    word, _, rest = arguments.strip().partition(" ")
    manager = app.session.manager
    if word == "list":
        await _agents(app, "")
        return
    if word in ("show", "cancel"):
        try:
            if word == "cancel":
                reply = await manager.close(rest.strip())
                await app.transcript.notice(f"{reply['agent_id']} is {reply['status']}")
            else:
                reply = await manager.evaluate({"agent_id": rest.strip()})
                await app.transcript.notice(json.dumps(reply, indent=2)[:4000])
        except SpawnError as error:
            await app.transcript.notice(str(error), "error")
        return
    try:
        request = parse_agent_arguments(arguments)
    except SlashUsageError as error:
        await app.transcript.notice(str(error), "error")
        return
    await _prompt(app, agent_prompt(request), f"/agent {arguments.strip()}")


async def _rlm(app: CodeWhaleApp, arguments: str) -> None:
    try:
        prompt = rlm_prompt(arguments, app.workspace)
    except SlashUsageError as error:
        await app.transcript.notice(str(error), "error")
        return
    await _prompt(app, prompt, f"/rlm {arguments.strip()}")


async def _agents(app: CodeWhaleApp, arguments: str) -> None:
    snapshots = app.session.manager.snapshot()
    if not snapshots:
        await app.transcript.notice("No sub-agents in this session.")
        return
    lines = [
        f"{s.agent_id}  {s.nickname:<10} {s.type:<12} {s.status:<11} {s.description}"
        for s in snapshots
    ]
    await app.transcript.notice("\n".join(lines))


async def _mode(app: CodeWhaleApp, arguments: str) -> None:
    context = app.engine.context
    choice = arguments.strip().lower()
    if not choice:
        context.mode = context.mode.next()
    elif choice in {m.value for m in Mode}:
        context.mode = Mode(choice)
    else:
        await app.transcript.notice("usage: /mode [plan|agent|yolo]", "error")
        return
    app.refresh_status()
    await app.transcript.notice(f"mode: {context.mode.value}")


async def _model(app: CodeWhaleApp, arguments: str) -> None:
    model = arguments.strip()
    if not model:
        await app.transcript.notice(f"model: {app.engine.model}")
        return
    try:
        validate_model(model, app.session.loaded.provider_settings())
    except SpawnError as error:
        await app.transcript.notice(str(error), "error")
        return
    app.engine.model = model
    app.refresh_status()
    await app.transcript.notice(f"model: {model}")


async def _relay(app: CodeWhaleApp, focus: str) -> None:
    engine = app.engine
    work = engine.context.work
    agents = [
        f"{s.agent_id} {s.type} {s.status}: {s.description}" for s in app.session.manager.snapshot()
    ]
    snapshot = "\n".join(
        [
            f"- workspace: {app.workspace}",
            f"- mode: {engine.context.mode.value}",
            f"- model: {engine.model}",
            f"- focus: {focus.strip() or '(none given)'}",
            f"- checklist: {work.render_checklist()}",
            f"- plan: {work.render_plan() or '(none)'}",
            f"- open sub-agents: {'; '.join(agents) or 'none'}",
            f"- open RLM sessions: {', '.join(app.session.rlm.sessions) or 'none'}",
        ]
    )
    await _prompt(app, relay_prompt(focus, snapshot), f"/relay {focus.strip()}".strip())


async def _sessions(app: CodeWhaleApp, arguments: str) -> None:
    sessions = [
        s
        for s in SessionStore(user_dirs().data_dir).list(app.workspace)
        if app.session is None or s.id != app.session.info.id
    ]
    if not sessions:
        await app.transcript.notice("No other saved sessions for this workspace.")
        return
    from codewhale.tui.sessions_picker import SessionPicker

    def picked(session_id: str | None) -> None:
        if session_id:
            app.run_worker(app.resume_session(session_id), group="session")

    app.push_screen(SessionPicker(sessions[:50]), picked)


async def _memory(app: CodeWhaleApp, arguments: str) -> None:
    context = app.engine.context
    path = context.memory_file
    if not context.memory_enabled:
        await app.transcript.notice(
            f"Memory is off. Enable it with [memory] enabled = true in {app.loaded.user_file} "
            "or CODEWHALE_MEMORY=on, then restart."
        )
        return
    text = path.read_text(encoding="utf-8") if path and path.exists() else ""
    tail = "\n".join(text.splitlines()[-15:]) or "(empty)"
    await app.transcript.notice(f"Memory file {path}:\n{tail}")


async def _clear(app: CodeWhaleApp, arguments: str) -> None:
    engine = app.engine
    del engine.messages[1:]
    await app.transcript.remove_children()
    await app.transcript.notice("Conversation cleared (sub-agents keep running).")


async def _revert(app: CodeWhaleApp, arguments: str) -> None:
    from codewhale.tools.base import ToolError
    from codewhale.tools.work import RevertTurn

    count = int(arguments) if arguments.strip().isdigit() else 1
    try:
        result = await RevertTurn().run({"turns": count}, app.engine.context)
    except ToolError as error:
        await app.transcript.notice(str(error), "error")
        return
    await app.transcript.notice(result.output)


async def _quit(app: CodeWhaleApp, arguments: str) -> None:
    await app.action_quit()


async def _prompt(app: CodeWhaleApp, prompt: str, shown: str) -> None:
    if app.turn_running:
        app.engine.queue(prompt)
        await app.transcript.notice(f"queued for after this turn: {shown}", "steer")
    else:
        await app.start_turn(prompt, shown=shown)


def build_registry() -> CommandRegistry:
    registry = CommandRegistry()
    for command in (
        SlashCommand("help", "list commands and keys", _help),
        SlashCommand(
            "agent",
            "delegate a task to a sub-agent; or list, show ID, cancel ID",
            _agent,
            usage="[N] <task>",
        ),
        SlashCommand("agents", "list this session's sub-agents", _agents),
        SlashCommand(
            "rlm", "analyse a long file or text in an RLM session", _rlm, usage="[N] <file-or-text>"
        ),
        SlashCommand(
            "relay",
            "write .codewhale/handoff.md for the next session",
            _relay,
            aliases=("batonpass", "接力"),
            usage="[focus]",
        ),
        SlashCommand("mode", "switch Plan / Agent / YOLO", _mode, usage="[plan|agent|yolo]"),
        SlashCommand("model", "show or change the model", _model, usage="[id]"),
        SlashCommand("sessions", "pick a saved session of this workspace to resume", _sessions),
        SlashCommand("memory", "show the memory file the model sees", _memory),
        SlashCommand("revert", "restore files changed in the last N turns", _revert, usage="[N]"),
        SlashCommand("clear", "start the conversation afresh", _clear),
        SlashCommand(
            "quit", "leave (running sub-agents are interrupted)", _quit, aliases=("exit",)
        ),
    ):
        registry.add(command)
    return registry
