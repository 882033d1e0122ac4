"""What each slash command does in the app."""

from __future__ import annotations

from typing import TYPE_CHECKING

from codewhale.paths import user_dirs
from codewhale.permissions import Mode
from codewhale.runtime import Runtime, RuntimeRequestError
from codewhale.runtime.slash_prompts import (
    SlashUsageError,
    agent_prompt,
    parse_agent_arguments,
    rlm_prompt,
    skill_prompt,
)
from codewhale.sessions.store import SessionStore
from codewhale.skills import Skill, SkillSet, listing
from codewhale.subagents.card import agent_card
from codewhale.subagents.catalog import format_entries
from codewhale.tui.commands import CommandRegistry, Handler, SlashCommand
from codewhale.tui.diff_screen import show_diff
from codewhale.tui.hooks_view import hooks_command
from codewhale.tui.permissions_view import permissions_command
from codewhale.tui.rewind_screen import rewind_command
from codewhale.tui.usage_view import show_cost, show_status

if TYPE_CHECKING:
    from codewhale.runtime import TurnResult
    from codewhale.tui.app import CodeWhaleApp


async def _help(app: CodeWhaleApp, arguments: str) -> None:
    lines = ["Commands:"]
    for command in app.registry.commands():
        aliases = (
            f" (also {', '.join('/' + a for a in command.aliases)})" if command.aliases else ""
        )
        lines.append(f"  /{command.name} {command.usage}".rstrip() + f" — {command.help}{aliases}")
    lines.append(
        "Keys: Enter send/steer · Shift+Enter newline · Tab Plan ↔ Agent/queue/complete · "
        "Esc cancel · Ctrl+B Work sidebar · Ctrl+Q quit"
    )
    await app.transcript.notice("\n".join(lines))


async def _agent(app: CodeWhaleApp, arguments: str) -> None:
    word, _, rest = arguments.strip().partition(" ")
    runtime = _runtime(app)
    if word == "list":
        await _agents(app, "")
        return
    if word == "types":
        await app.transcript.notice(format_entries(runtime.agent_types()))
        return
    if word == "trust":
        await _agent_trust(app, rest.split())
        return
    if word in ("show", "cancel", "continue"):
        try:
            if word == "cancel":
                reply = await runtime.cancel_agent(rest.strip())
                await app.transcript.notice(f"{reply['agent_id']} is {reply['status']}")
            elif word == "continue":
                reply = await runtime.continue_agent(rest.strip())
                outcome = reply.get("continuation", {})
                said = "continuing" if outcome.get("resumed") else outcome.get("reason", "")
                await app.transcript.notice(f"{reply['agent_id']}: {said}")
            else:
                await app.transcript.notice(agent_card(runtime.agent_record(rest.strip())))
        except RuntimeRequestError as error:
            await app.transcript.notice(str(error), "error")
        return
    try:
        request = parse_agent_arguments(arguments)
    except SlashUsageError as error:
        await app.transcript.notice(str(error), "error")
        return
    await _prompt(app, agent_prompt(request), f"/agent {arguments.strip()}")


async def _agent_trust(app: CodeWhaleApp, names: list[str]) -> None:
    """`/agent trust NAME…` (or --all): typing the names is the consent; bare, it lists."""
    runtime = _runtime(app)
    waiting = [entry for entry in runtime.agent_types() if entry.not_trusted]
    if not waiting:
        await app.transcript.notice("No agent definition here waits for trust.")
        return
    if not names:
        listed = format_entries(waiting)
        await app.transcript.notice(
            f"{listed}\nTrust with /agent trust NAME … or /agent trust --all"
        )
        return
    if names == ["--all"]:
        names = [entry.name for entry in waiting]
    try:
        trusted = runtime.trust_agent_types(names)
    except RuntimeRequestError as error:
        await app.transcript.notice(str(error), "error")
        return
    await app.transcript.notice(f"Trusted in this workspace: {', '.join(trusted)}")


async def _rlm(app: CodeWhaleApp, arguments: str) -> None:
    try:
        prompt = rlm_prompt(arguments, app.workspace)
    except SlashUsageError as error:
        await app.transcript.notice(str(error), "error")
        return
    await _prompt(app, prompt, f"/rlm {arguments.strip()}")


async def _agents(app: CodeWhaleApp, arguments: str) -> None:
    snapshots = _runtime(app).agents()
    if not snapshots:
        await app.transcript.notice("No sub-agents in this session.")
        return
    lines = [
        f"{s.agent_id}  {s.nickname:<10} {s.type:<12} {s.status:<11} {s.description}"
        + ("  (continuable: /agent continue ID)" if s.continuable else "")
        for s in snapshots
    ]
    await app.transcript.notice("\n".join(lines))


MODE_CHOICES = {
    Mode.PLAN: "read-only: reads and searches; writes only plan artifacts",
    Mode.AGENT: "file edits (as diffs), shell commands and network access ask first",
    Mode.YOLO: "every tool runs without asking, except writes to protected paths",
}


async def _mode(app: CodeWhaleApp, arguments: str) -> None:
    runtime = _runtime(app)
    choice = arguments.strip().lower()
    if not choice:
        lines = [f"mode: {runtime.mode.value}"]
        for mode, meaning in MODE_CHOICES.items():
            marker = "▸" if mode is runtime.mode else " "
            lines.append(f" {marker} {mode.value:<6} {meaning}")
        lines.append("Switch with /mode plan|agent|yolo (YOLO asks first); Tab: Plan ↔ Agent.")
        await app.transcript.notice("\n".join(lines))
        return
    if choice not in {m.value for m in Mode}:
        await app.transcript.notice(
            f"Unknown mode {choice!r}: use /mode plan, /mode agent or /mode yolo.", "error"
        )
        return
    if Mode(choice) is Mode.YOLO and runtime.mode is not Mode.YOLO:
        # Nothing asks in YOLO, so entering it takes a second, explicit yes.
        from codewhale.tui.yolo_confirm import YoloConfirmScreen  # loaded on first use

        async def answered(switch: bool | None) -> None:
            if switch:
                await _switch_mode(app, runtime, Mode.YOLO)
            else:
                await app.transcript.notice(f"mode: {runtime.mode.value} (YOLO not entered)")

        app.push_screen(YoloConfirmScreen(runtime.mode.value), answered)
        return
    await _switch_mode(app, runtime, Mode(choice))


async def _switch_mode(app: CodeWhaleApp, runtime: Runtime, mode: Mode) -> None:
    runtime.set_mode(mode)
    app.refresh_status()
    await app.transcript.notice(f"mode: {mode.value}")


async def _model(app: CodeWhaleApp, arguments: str) -> None:
    runtime = _runtime(app)
    model = arguments.strip()
    if not model:
        await app.transcript.notice(f"model: {runtime.model}")
        return
    try:
        runtime.set_model(model)
    except RuntimeRequestError as error:
        await app.transcript.notice(str(error), "error")
        return
    app.refresh_status()
    await app.transcript.notice(f"model: {model}")


async def _relay(app: CodeWhaleApp, focus: str) -> None:
    """The model answers with the hand-off and the app saves it, so it works in any mode."""
    runtime = _runtime(app)
    if app.turn_running:
        # Its answer must be the hand-off alone, so it cannot wait in the queue.
        await app.transcript.notice(
            "A turn is running: /relay once it ends (or press Esc to stop it).", "error"
        )
        return

    async def save(result: TurnResult) -> None:
        try:
            path = runtime.save_relay(result)
        except RuntimeRequestError as error:
            await app.transcript.notice(str(error), "error")
            return
        await app.transcript.notice(f"Hand-off saved to {path}")

    shown = f"/relay {focus.strip()}".strip()
    await app.start_turn(runtime.relay_request(focus), shown=shown, then=save)


async def _sessions(app: CodeWhaleApp, arguments: str) -> None:
    current = app.runtime.info.id if app.runtime is not None else None
    sessions = [
        s for s in SessionStore(user_dirs().data_dir).list(app.workspace) if s.id != current
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
    enabled, path = _runtime(app).memory()
    if not enabled:
        await app.transcript.notice(
            f"Memory is off. Enable it with [memory] enabled = true in {app.loaded.user_file} "
            "or CODEWHALE_MEMORY=on, then restart."
        )
        return
    text = path.read_text(encoding="utf-8") if path and path.exists() else ""
    tail = "\n".join(text.splitlines()[-15:]) or "(empty)"
    await app.transcript.notice(f"Memory file {path}:\n{tail}")


async def _clear(app: CodeWhaleApp, arguments: str) -> None:
    try:
        _runtime(app).clear()
    except RuntimeRequestError as error:
        await app.transcript.notice(str(error), "error")
        return
    await app.transcript.reset()
    await app.transcript.notice("Conversation cleared (sub-agents keep running).")


async def _compact(app: CodeWhaleApp, arguments: str) -> None:
    runtime = _runtime(app)
    if not runtime.turn_running:  # otherwise the runtime says why not, below
        await app.transcript.notice("Compacting: the older turns are being summarised…")

    async def compact() -> None:
        try:
            done = await runtime.compact()
        except RuntimeRequestError as error:
            await app.transcript.notice(str(error), "error")
            return
        await app.transcript.notice(
            f"Compacted: {done.summarised} messages summarised into one by {done.model}, "
            f"the {done.kept} most recent kept as they were; context {done.tokens_before:,} "
            f"→ about {done.tokens_after:,} tokens of {done.window:,}."
        )
        app.refresh_status()

    # A worker: the summary takes a model call, and the app keeps answering meanwhile.
    app.run_worker(compact(), group="compact", exclusive=True)


async def _revert(app: CodeWhaleApp, arguments: str) -> None:
    count = int(arguments) if arguments.strip().isdigit() else 1
    try:
        restored = await _runtime(app).revert(count)
    except RuntimeRequestError as error:
        await app.transcript.notice(str(error), "error")
        return
    await app.transcript.notice(restored)


async def _mcp(app: CodeWhaleApp, arguments: str) -> None:
    from codewhale.tui.mcp_view import ask_trust, show_servers

    runtime = _runtime(app)
    word = arguments.strip().lower()
    if word == "trust":
        if not ask_trust(app, runtime):
            await app.transcript.notice("No untrusted servers in this project's .mcp.json.")
        return
    if word:
        await app.transcript.notice("usage: /mcp [trust]", "error")
        return
    await show_servers(app, runtime)


async def _quit(app: CodeWhaleApp, arguments: str) -> None:
    await app.action_quit()


async def _skills(app: CodeWhaleApp, arguments: str) -> None:
    skills = _runtime(app).skills
    if not skills.skills:
        text = "No skills: put one in .claude/skills/<name>/SKILL.md (or .codewhale/skills/)."
    else:
        text = "Skills (the model loads them with the skill tool; /name runs one):\n"
        text += listing(skills.skills.values())
    notes = [f"  not loaded: {warning}" for warning in skills.warnings]
    await app.transcript.notice("\n".join([text, *notes]))


def skill_commands(skills: SkillSet) -> list[SlashCommand]:
    """`/<name>` for each skill the user may run, sending its instructions as a prompt."""

    def runner(skill: Skill) -> Handler:
        async def run(app: CodeWhaleApp, arguments: str) -> None:
            shown = f"/{skill.name} {arguments.strip()}".rstrip()
            await _prompt(app, skill_prompt(skill, arguments), shown)

        return run

    return [
        SlashCommand(
            skill.name, f"skill: {skill.description[:80]}", runner(skill), usage=skill.argument_hint
        )
        for skill in skills.for_user()
    ]


async def _prompt(app: CodeWhaleApp, prompt: str, shown: str) -> None:
    if app.turn_running:
        _runtime(app).queue(prompt)
        await app.transcript.notice(f"queued for after this turn: {shown}", "steer")
    else:
        await app.start_turn(prompt, shown=shown)


def _runtime(app: CodeWhaleApp) -> Runtime:
    # run_command refuses commands that need a session when none is open.
    assert app.runtime is not None
    return app.runtime


def build_registry() -> CommandRegistry:
    registry = CommandRegistry()
    for command in (
        SlashCommand("help", "list commands and keys", _help, needs_session=False),
        SlashCommand(
            "agent",
            "delegate a task to a sub-agent; or list, types, trust NAME, show ID, cancel ID, "
            "continue ID",
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
        SlashCommand(
            "mode", "show or switch Plan / Agent / YOLO", _mode, usage="[plan|agent|yolo]"
        ),
        SlashCommand("model", "show or change the model", _model, usage="[id]"),
        SlashCommand(
            "sessions",
            "pick a saved session of this workspace to resume",
            _sessions,
            needs_session=False,
        ),
        SlashCommand("memory", "show the memory file the model sees", _memory),
        SlashCommand("skills", "list the skills of this workspace and user", _skills),
        SlashCommand("permissions", "allow/ask/deny rules: list, remove N", permissions_command),
        SlashCommand("hooks", "lifecycle hooks; trust a project's", hooks_command, usage="[trust]"),
        SlashCommand(
            "mcp",
            "MCP servers: their state and tools; trust a project's .mcp.json",
            _mcp,
            usage="[trust]",
        ),
        SlashCommand("revert", "restore files changed in the last N turns", _revert, usage="[N]"),
        SlashCommand("rewind", "go back to before an earlier prompt (Esc Esc)", rewind_command),
        SlashCommand("status", "session, model, mode, context, tokens, sub-agents", show_status),
        SlashCommand("cost", "tokens and cost of the session and of each sub-agent", show_cost),
        SlashCommand("diff", "show the files this session changed, and their diffs", show_diff),
        SlashCommand(
            "compact", "summarise the older turns to free context (the newest stay)", _compact
        ),
        SlashCommand("clear", "start the conversation afresh", _clear),
        SlashCommand(
            "quit",
            "leave (running sub-agents are interrupted)",
            _quit,
            aliases=("exit",),
            needs_session=False,
        ),
    ):
        registry.add(command)
    return registry
