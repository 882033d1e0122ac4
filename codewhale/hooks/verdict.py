"""What hook runs decide, read from their exit codes and JSON output as Claude Code does.

Exit 0: fine; stdout, if it is a JSON object, may carry a decision. Exit 2: block, with
stderr as the reason. Any other exit (a timeout too): an error the user sees; nothing is
blocked.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from codewhale.hooks.names import HookEvent
from codewhale.hooks.runner import HookRun

BLOCK_EXIT = 2
# For these events plain (non-JSON) stdout of a successful hook is context for the model.
_STDOUT_IS_CONTEXT = frozenset({HookEvent.USER_PROMPT_SUBMIT, HookEvent.SESSION_START})
_PERMISSION_ORDER = ("deny", "ask", "allow")


@dataclass(frozen=True)
class HookVerdict:
    """What every matching hook of one moment said together."""

    blocked: bool = False  # exit 2, decision "block", permissionDecision "deny"
    reason: str = ""  # for the model (a blocked call's result, a Stop hook's instruction)
    permission: str = ""  # "allow", "ask" or "deny" (PreToolUse, PermissionRequest); "" none
    context: tuple[str, ...] = ()  # additionalContext for the model
    stop: bool = False  # "continue": false: stop the turn
    stop_reason: str = ""


@dataclass(frozen=True)
class RunReading:
    """One run read: its verdict part and how it went, for the transcript."""

    verdict: HookVerdict
    outcome: str  # ok | blocked | error | timed_out
    message: str  # what the user is shown beside the outcome


def read_run(event: str, run: HookRun) -> RunReading:
    if run.timed_out or run.exit_code is None:
        return RunReading(HookVerdict(), "timed_out" if run.timed_out else "error", run.stderr)
    if run.exit_code == BLOCK_EXIT:
        reason = run.stderr.strip() or f"blocked by hook `{run.entry.command}` (exit 2)"
        verdict = HookVerdict(blocked=True, reason=reason, permission="deny")
        return RunReading(verdict, "blocked", reason)
    if run.exit_code != 0:
        said = run.stderr.strip() or f"exit code {run.exit_code}"
        return RunReading(HookVerdict(), "error", said)
    output = _json_object(run.stdout)
    if output is None:
        text = run.stdout.strip()
        context = (text,) if text and event in _STDOUT_IS_CONTEXT else ()
        return RunReading(HookVerdict(context=context), "ok", "")
    verdict = _decision(output)
    outcome = "blocked" if verdict.blocked or verdict.stop else "ok"
    return RunReading(verdict, outcome, verdict.reason or verdict.stop_reason)


def combine(verdicts: list[HookVerdict]) -> HookVerdict:
    """Several hooks of one moment: any block blocks; deny beats ask beats allow."""
    said = [verdict.permission for verdict in verdicts if verdict.permission]
    permission = next((p for p in _PERMISSION_ORDER if p in said), "")
    return HookVerdict(
        blocked=any(verdict.blocked for verdict in verdicts),
        reason="\n".join(verdict.reason for verdict in verdicts if verdict.reason),
        permission=permission,
        context=tuple(text for verdict in verdicts for text in verdict.context),
        stop=any(verdict.stop for verdict in verdicts),
        stop_reason="\n".join(v.stop_reason for v in verdicts if v.stop_reason),
    )


def _json_object(stdout: str) -> dict[str, Any] | None:
    text = stdout.strip()
    if not text.startswith("{"):
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _decision(output: dict[str, Any]) -> HookVerdict:
    """The JSON output's fields, in Claude Code's names (the older top-level ones too)."""
    specific = output.get("hookSpecificOutput")
    specific = specific if isinstance(specific, dict) else {}
    permission = ""
    reason = _text(output.get("reason"))
    decision = output.get("decision")
    if decision == "block":
        permission = "deny"
    elif decision == "approve":
        permission = "allow"
    if (said := specific.get("permissionDecision")) in _PERMISSION_ORDER:
        permission = said
        reason = _text(specific.get("permissionDecisionReason")) or reason
    behaviour = specific.get("decision")  # PermissionRequest: {"behavior", "message"}
    if isinstance(behaviour, dict) and behaviour.get("behavior") in ("allow", "deny"):
        permission = behaviour["behavior"]
        reason = _text(behaviour.get("message")) or reason
    context = _text(specific.get("additionalContext"))
    stop = output.get("continue") is False
    return HookVerdict(
        blocked=permission == "deny",
        reason=reason,
        permission=permission,
        context=(context,) if context else (),
        stop=stop,
        stop_reason=_text(output.get("stopReason")) if stop else "",
    )


def _text(value: Any) -> str:
    return value.strip() if isinstance(value, str) else ""
