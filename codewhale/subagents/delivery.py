"""What travels between a child and whoever opened it: messages in, completions out."""

from __future__ import annotations

import json
from typing import Any

from codewhale.subagents.child import Child
from codewhale.subagents.records import WorkerRecord
from codewhale.subagents.store import RESTART_REASON
from codewhale.subagents.worktree import Worktree

# How many changed files a completion event names (the projection lists more).
EVENT_FILES = 20

SESSION_CLOSED = "parent session closed"
NOT_DELIVERED = "session already terminated; follow-up not delivered"
EVENT_NOTE = "This is an internal runtime event, not a message from the user."


def next_action(record: WorkerRecord) -> str:
    if record.status == "completed" and record.worktree is not None:
        return (
            "review the report and the diff; agent_apply merges its changes into your work "
            "tree, agent_close with keep_worktree decides what happens to its worktree"
        )
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
    changes = ""
    if record.worktree is not None:
        tree = Worktree.from_json(record.worktree)
        isolated: dict[str, Any] = {"branch": tree.branch, "path": tree.path}
        if tree.diff is not None:
            isolated.update(
                files_changed=tree.diff.files_changed,
                added=tree.diff.added,
                deleted=tree.diff.deleted,
            )
        done["worktree"] = isolated
        changes = worktree_changes(tree)
    return (
        '<codewhale:runtime_event kind="subagent_completion">\n'
        f"{EVENT_NOTE}\n"
        f"{line[:240]}\n{changes}"
        f"<codewhale:subagent.done>{json.dumps(done)}</codewhale:subagent.done>\n"
        "</codewhale:runtime_event>"
    )


def worktree_changes(tree: Worktree) -> str:
    """The diff summary of an isolated child: its files, lines added and deleted."""
    if tree.diff is None:
        return f"Its worktree ({tree.branch}) could not be read; nothing to apply.\n"
    diff = tree.diff
    if not diff.files_changed:
        return f"Its worktree (branch {tree.branch}) has no changes.\n"
    head = f"Changes in its worktree (branch {tree.branch}, not yet applied): {diff.line()}"
    shown = [f"- {change.text()}" for change in diff.files[:EVENT_FILES]]
    if diff.files_changed > len(shown):
        shown.append(f"- … and {diff.files_changed - len(shown)} more files")
    return "\n".join([head, *shown]) + "\n"


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


def revival_delivery(revival: dict[str, Any]) -> dict[str, Any]:
    """agent_eval's `message_delivery` for a finished child the message revived (or not)."""
    if revival["revived"]:
        return {"delivered": True, "revived": True}
    return {"delivered": False, "revived": False, "reason": revival["reason"]}
