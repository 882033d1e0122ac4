"""`Hooks`: one session's hooks, shared by the parent and every child, and the one way
they run: matching entries together, each reported, their verdicts combined."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from codewhale.hooks.names import HookEvent
from codewhale.hooks.runner import HookRun, run_hook
from codewhale.hooks.settings import HookEntry, hook_files, load_hooks
from codewhale.hooks.trust import HookTrust, trust_file
from codewhale.hooks.verdict import HookVerdict, combine, read_run
from codewhale.sandbox.environment import child_environment


@dataclass(frozen=True)
class HookReport:
    """One hook run, for the transcript and `exec --json`."""

    event: str
    matcher: str
    command: str
    source: str
    outcome: str  # ok | blocked | error | timed_out
    exit_code: int | None
    duration_ms: int
    message: str  # stderr or the reason, cut short
    status_message: str
    agent_id: str  # "" for the parent


@dataclass
class Hooks:
    """The session's hooks; a project's entries run once their digest is trusted."""

    entries: list[HookEntry] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    workspace: Path = field(default_factory=Path.cwd)
    session_id: str = ""
    transcript_path: str = ""
    # The app's environment: hooks get its allowlisted part (never the API key).
    base_env: Mapping[str, str] = field(default_factory=dict)
    pass_env: tuple[str, ...] = ()
    trust_store: HookTrust | None = None
    trusted: set[str] = field(default_factory=set)
    on_run: Callable[[HookReport], None] = lambda report: None

    def __post_init__(self) -> None:
        if self.trust_store is not None:
            self.trusted = self.trust_store.trusted_digests(self.workspace)

    def is_trusted(self, entry: HookEntry) -> bool:
        return not entry.project or entry.digest in self.trusted

    def untrusted(self) -> list[HookEntry]:
        """The project's hooks that do not run until the user trusts them."""
        return [entry for entry in self.entries if not self.is_trusted(entry)]

    def trust_all(self) -> list[HookEntry]:
        """Trust this project's hooks (as they are now) in this workspace; returns them."""
        waiting = self.untrusted()
        if waiting and self.trust_store is not None:
            self.trust_store.trust(self.workspace, waiting)
        self.trusted.update(entry.digest for entry in waiting)
        return waiting

    def has(self, event: HookEvent) -> bool:
        """Whether any hook may run for `event` (the usual answer, no, costs nothing)."""
        return any(entry.event == event and self.is_trusted(entry) for entry in self.entries)

    async def run(
        self, event: HookEvent, value: str | None, payload: Mapping[str, Any]
    ) -> HookVerdict:
        """Run the trusted hooks of `event` whose matcher takes `value`, together."""
        chosen: dict[str, HookEntry] = {}
        for entry in self.entries:
            if entry.event == event and self.is_trusted(entry) and entry.matcher.matches(value):
                # The same command declared in two files runs once, as in Claude Code.
                chosen.setdefault(entry.command, entry)
        if not chosen:
            return HookVerdict()
        stdin = {
            "session_id": self.session_id,
            "transcript_path": self.transcript_path,
            "cwd": str(self.workspace),
            "hook_event_name": str(event),
            **payload,
        }
        env = self._environment()
        runs = await asyncio.gather(
            *(run_hook(entry, stdin, self.workspace, env) for entry in chosen.values())
        )
        verdicts = []
        for hook_run in runs:
            reading = read_run(event, hook_run)
            verdicts.append(reading.verdict)
            self.on_run(_report(hook_run, reading.outcome, reading.message, payload))
        return combine(verdicts)

    def _environment(self) -> dict[str, str]:
        env = child_environment(self.base_env, self.pass_env)
        env["CLAUDE_PROJECT_DIR"] = env["CODEWHALE_PROJECT_DIR"] = str(self.workspace)
        return env


def _report(run: HookRun, outcome: str, message: str, payload: Mapping[str, Any]) -> HookReport:
    entry = run.entry
    return HookReport(
        event=entry.event,
        matcher=entry.matcher.text,
        command=entry.command,
        source=str(entry.source),
        outcome=outcome,
        exit_code=run.exit_code,
        duration_ms=run.duration_ms,
        message=message[:2000],
        status_message=entry.status_message,
        agent_id=str(payload.get("agent_id", "")),
    )


def open_hooks(
    *,
    workspace: Path,
    user_config: Path,
    project_config: Path | None,
    state_dir: Path,
    env: Mapping[str, str],
    pass_env: tuple[str, ...] = (),
    session_id: str = "",
    transcript_path: str = "",
    on_run: Callable[[HookReport], None] = lambda report: None,
) -> Hooks:
    """The hooks of every file a session reads them from, with this workspace's trust."""
    loaded = load_hooks(hook_files(workspace, user_config, project_config, env))
    return Hooks(
        entries=loaded.entries,
        problems=loaded.problems,
        workspace=workspace,
        session_id=session_id,
        transcript_path=transcript_path,
        base_env=dict(env),
        pass_env=pass_env,
        trust_store=HookTrust(trust_file(state_dir)),
        on_run=on_run,
    )
