"""What travels between a child and whoever opened it: messages in, completions out."""

from __future__ import annotations

import json
from typing import Any

from codewhale.subagents.child import Child
from codewhale.subagents.records import WorkerRecord
from codewhale.subagents.store import RESTART_REASON

SESSION_CLOSED = "parent session closed"
NOT_DELIVERED = "session already terminated; follow-up not delivered"
EVENT_NOTE = "This is an internal runtime event, not a message from the user."


def next_action(record: WorkerRecord) -> str:
    if record.status == "completed":
        return "review the report and verify claimed side effects"
    if record.status == "interrupted" and record.checkpoint:
        return "agent_eval with continue: true to resume, or agent_close"
    return "read the error; reopen with a corrected assignment if needed"


def completion_event(record: WorkerRecord) -> str:
    """The user-role runtime event that tells the opener a child ended (spec §10)."""
    summary = " ".join(
        ((record.report or {}).get("summary") or record.result or record.error or "").split()
    )
    line = f"{record.nickname} ({record.agent_id}, {record.type}) {record.status}: {summary}"
    done = {
        "agent_id": record.agent_id,
        "type": record.type,
        "status": record.status,
        "summary_complete": bool((record.report or {}).get("well_formed")),
        "next_action": next_action(record),
    }
    return (
        '<codewhale:runtime_event kind="subagent_completion">\n'
        f"{EVENT_NOTE}\n"
        f"{line[:240]}\n"
        f"<codewhale:subagent.done>{json.dumps(done)}</codewhale:subagent.done>\n"
        "</codewhale:runtime_event>"
    )


def interrupted_by_restart(records: list[WorkerRecord]) -> str | None:
    """One runtime event listing the children an earlier run left interrupted, if any."""
    stopped = [
        r
        for r in records
        if r.status == "interrupted" and r.error in (RESTART_REASON, SESSION_CLOSED)
    ]
    if not stopped:
        return None
    lines = [
        f"- {r.agent_id} ({r.nickname}, {r.role}): {' '.join(r.objective.split())[:160]} — "
        f'next: agent_eval {{"agent_id": "{r.agent_id}", "continue": true}} to resume from '
        "its checkpoint, or agent_close to drop it"
        for r in stopped
    ]
    return (
        '<codewhale:runtime_event kind="subagents_interrupted">\n'
        f"{EVENT_NOTE}\n"
        "The previous run of this session ended while these sub-agents were working; "
        "each kept its transcript and can be continued:\n" + "\n".join(lines) + "\n"
        "</codewhale:runtime_event>"
    )


def deliver_message(child: Child, message: str, interrupt: bool) -> dict[str, Any]:
    """agent_eval's `message`: a steer for a running child, a polite no for a finished one."""
    if child.record.terminal or child.engine is None:
        return {"delivered": False, "reason": NOT_DELIVERED}
    if interrupt:
        child.engine.clear_steers()
    child.engine.steer(message)
    return {"delivered": True, "interrupted_pending": interrupt}
