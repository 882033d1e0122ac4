"""Run one response's tool calls: validate, check permissions, ask, execute, report.

Read-only calls run concurrently; anything that writes or runs code runs one at
a time in the order the model gave, so edits never race each other. Each call
runs under its tool's time limit. Every failure, a timeout included, becomes a
tool result the model can read and correct.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from codewhale.approval_rules import (
    ApprovalRule,
    approval_rule,
    edits_allowed,
    file_edit_rule,
    is_always_allowed,
    protected_write_rule,
)
from codewhale.engine import events
from codewhale.engine.tool_hooks import ToolHooks
from codewhale.permissions import ApprovalClass, Verdict, decide, relative_to_workspace
from codewhale.protected_paths import protection
from codewhale.providers.types import ToolCall
from codewhale.rules.rule import Effect
from codewhale.rules.ruleset import RuleVerdict, ruled_decision
from codewhale.rules.sources import RuleFileError
from codewhale.sanitize import clean_text
from codewhale.tools.base import Tool, ToolContext, ToolError, ToolResult, check_arguments
from codewhale.tools.registry import ToolRegistry

LARGE_OUTPUT_CHARS = 20_000
PREVIEW_CHARS = 2_000
# An approval's dry-run diff is cut here: the dialog shows far less, and the event is
# written to `exec --json` output.
MAX_CHANGE_PREVIEW_CHARS = 100_000
_request_ids = itertools.count(1)


def _decoded(arguments: str) -> Any:
    """A call's arguments decoded once (the summary and the run both read them); no text
    is an empty object, text that is not JSON its ValueError (the run reports it)."""
    if not arguments.strip():
        return {}
    try:
        return json.loads(arguments)
    except ValueError as error:
        return error


@dataclass
class Outcome:
    call: ToolCall
    result: ToolResult

    def message(self) -> dict[str, Any]:
        return {"role": "tool", "tool_call_id": self.call.id, "content": self.result.output}


@dataclass
class ToolDispatcher:
    tools: ToolRegistry
    context: ToolContext
    emit: Callable[[events.Event], None]
    requester: str = "parent"

    def __post_init__(self) -> None:
        self.hooks = ToolHooks(self.context)

    async def run(self, calls: Sequence[ToolCall]) -> list[Outcome]:
        """Results in the calls' order; concurrent where every call in a run is read-only."""
        outcomes: list[Outcome | None] = [None] * len(calls)
        batch: list[int] = []

        async def flush() -> None:
            if len(batch) == 1:
                # One call runs in this task: a task and a gather per step cost loop turns
                # that many children streaming at once feel.
                index = batch.pop()
                outcomes[index] = await self._run_one(calls[index])
                return
            results = await asyncio.gather(*(self._run_one(calls[i]) for i in batch))
            for index, outcome in zip(batch, results, strict=True):
                outcomes[index] = outcome
            batch.clear()

        for index, call in enumerate(calls):
            if self._is_read_only(call):
                batch.append(index)
                continue
            await flush()
            outcomes[index] = await self._run_one(call)
        await flush()
        return [outcome for outcome in outcomes if outcome is not None]

    def _is_read_only(self, call: ToolCall) -> bool:
        if call.name not in self.tools:
            return False
        tool = self.tools.get(call.name)
        return tool.approval is ApprovalClass.AUTO and not tool.sequential

    async def _run_one(self, call: ToolCall) -> Outcome:
        started = time.monotonic()
        arguments = _decoded(call.arguments)
        self.emit(
            events.ToolCallStarted(
                call_id=call.id,
                name=call.name,
                arguments=call.arguments,
                summary=self._summary(call, arguments),
            )
        )
        try:
            result = await self._execute(call, arguments)
        except ToolError as error:
            result = ToolResult(f"Error: {error}", ok=False)
        except asyncio.CancelledError:
            self._finished(call, ToolResult("Cancelled by the user.", ok=False), started)
            raise
        except Exception as error:  # a tool bug must not end the turn; report it instead
            result = ToolResult(
                f"Error: {call.name} failed: {type(error).__name__}: {error}", ok=False
            )
        result = self._redacted(result)
        result = self._offload_if_large(call, result)
        self._finished(call, result, started)
        return Outcome(call, result)

    def _redacted(self, result: ToolResult) -> ToolResult:
        """`result` without the session's secrets: the handle store, the preview, the
        screen, the records and the next request all get it from here."""
        redact = self.context.redactor.redact
        display = redact(result.display) if result.display is not None else None
        return replace(result, output=redact(result.output), display=display)

    def _finished(self, call: ToolCall, result: ToolResult, started: float) -> None:
        self.emit(
            events.ToolCallFinished(
                call_id=call.id,
                name=call.name,
                ok=result.ok,
                output_preview=clean_text(result.output[:400]),
                duration_ms=int((time.monotonic() - started) * 1000),
                display=result.display,
            )
        )

    def _summary(self, call: ToolCall, arguments: Any) -> str:
        if not isinstance(arguments, dict) or call.name not in self.tools:
            return ""
        return clean_text(self.tools.get(call.name).summary(arguments))

    async def _execute(self, call: ToolCall, arguments: Any) -> ToolResult:
        tool = self.tools.get(call.name)
        if isinstance(arguments, ValueError):
            raise ToolError(
                f"the arguments are not valid JSON ({arguments}); resend the call with a JSON "
                "object"
            )
        check_arguments(tool.parameters, arguments)
        # Authority first: a call this conversation may not make is refused without
        # asking the user (approving it could not make it allowed).
        refusal = self.context.authority.check(
            tool.name, tool.approval, plan_artifact=tool.plan_artifact, arguments=arguments
        )
        if refusal is not None:
            raise ToolError(refusal)
        # Permission rules next: a deny holds in every mode, YOLO included.
        ruled = self._rule_verdict(tool, arguments)
        if ruled is not None and ruled.effect is Effect.DENY:
            raise ToolError(ruled.refusal(tool.name))
        # PreToolUse hooks may refuse the call, or settle whether the user is asked; a
        # hook's "allow" never widens the authority, a deny rule or the mode.
        hooked = await self.hooks.before(tool.name, arguments, call.id)
        mode_decision = decide(
            tool.approval,
            self.context.mode,
            plan_artifact=tool.plan_artifact,
            sandboxed_read_only=tool.sandboxed_read_only(),
            accept_edits=self.context.modes.accept_edits,
        )
        decision = ruled_decision(mode_decision, ruled)
        if decision.verdict is Verdict.DENY:
            raise ToolError(decision.reason)
        protected = self._protected(tool, arguments)
        if protected:
            # Asked in every mode, YOLO included; "always" covers exactly these files.
            rule = protected_write_rule(tool.name, protected)
            if rule not in self.context.always_allowed:
                reason = "; ".join(protected.values())
                await self._ask(tool, arguments, call.arguments, rule, reason=reason)
        elif hooked.permission == "ask":
            reason = hooked.reason or "a PreToolUse hook asks"
            rule = approval_rule(tool.name, arguments)
            await self._ask(tool, arguments, call.arguments, rule, reason=reason)
        elif hooked.permission == "allow":
            pass  # a PreToolUse hook answered for the user
        elif (
            decision.verdict is Verdict.ASK
            and tool.approval is ApprovalClass.SUGGEST
            and (ruled is None or ruled.effect is not Effect.ASK)
        ):
            # A file change the mode asks about (an ask rule asks every time, without the
            # edit answers): reviewed as a diff unless "this file" answers cover it all.
            files = self._written(tool, arguments)
            if not edits_allowed(self.context.always_allowed, files) and not is_always_allowed(
                self.context.always_allowed, tool.name, arguments
            ):
                rule = approval_rule(tool.name, arguments)
                await self._ask(tool, arguments, call.arguments, rule, files=files)
        elif decision.verdict is Verdict.ASK and not is_always_allowed(
            self.context.always_allowed, tool.name, arguments
        ):
            await self._ask(tool, arguments, call.arguments, approval_rule(tool.name, arguments))
        return await self.hooks.around(
            tool.name, arguments, call.id, lambda: self._run_limited(tool, arguments)
        )

    def _rule_verdict(self, tool: Tool, arguments: dict[str, Any]) -> RuleVerdict | None:
        """What the session's permission rules say of this call, its paths resolved."""
        context = self.context
        if not context.rules.cover(tool.name):
            return None  # the usual case: no paths to work out
        return context.rules.verdict(
            tool.name,
            arguments,
            reads=tool.read_paths(arguments, context),
            writes=tool.written_paths(arguments, context),
        )

    def _written(self, tool: Tool, arguments: dict[str, Any]) -> tuple[str, ...]:
        """The workspace files a file change would write, workspace-relative."""
        workspace = self.context.workspace
        paths = tool.written_paths(arguments, self.context)
        return tuple(sorted({relative_to_workspace(workspace, path) for path in paths}))

    def _protected(self, tool: Tool, arguments: dict[str, Any]) -> dict[str, str]:
        """The protected files this call would write (workspace-relative), each with why."""
        workspace = self.context.workspace
        found = {}
        for path in tool.written_paths(arguments, self.context):
            reason = protection(workspace, path)
            if reason is not None:
                found[relative_to_workspace(workspace, path)] = reason
        return found

    async def _run_limited(self, tool: Tool, arguments: dict[str, Any]) -> ToolResult:
        """`tool.run` under its time limit (started after any approval: a user may think)."""
        limit = asyncio.timeout(tool.timeout_secs)
        try:
            async with limit:
                return await tool.run(arguments, self.context)
        except TimeoutError:
            if not limit.expired():
                raise  # the tool's own TimeoutError: reported like any other failure
            raise ToolError(f"{tool.name} timed out after {tool.timeout_secs:g} s") from None

    async def _ask(
        self,
        tool: Tool,
        arguments: dict[str, Any],
        raw: str,
        rule: ApprovalRule,
        *,
        reason: str = "",
        files: tuple[str, ...] | None = None,
    ) -> None:
        """Ask the user, showing the rule "always" would grant; `reason` says why when the
        mode alone would not have asked; `files` is given for a file change (the files
        it writes), which the edit answers may cover."""
        if await self.hooks.permission_request(tool.name, arguments):
            return  # a PermissionRequest hook allowed it (one that denies raises)
        self.hooks.notify(f"CodeWhale needs your permission to use {tool.name}")
        future: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        said: list[str] = []  # filled by the answer that carries a message to the model
        request_id = f"approval_{next(_request_ids)}"
        tool_name, summary = tool.name, tool.summary(arguments)
        question = tool.approval_text(arguments) + (f" ({reason})" if reason else "")
        self.emit(
            events.ApprovalRequested(
                request_id=request_id,
                tool=tool_name,
                summary=clean_text(question),
                arguments=raw,
                requester=self.requester,
                scope=rule.describe(),
                preview=await self._change_preview(tool, arguments),
                file_change=files is not None,
                files=files or (),
                _future=future,
                _message=said,
            )
        )
        decision = await future
        message = clean_text(said[0]).strip() if said else ""
        self.emit(
            events.ApprovalResolved(
                request_id=request_id, tool=tool_name, decision=decision, message=message
            )
        )
        if decision == "approve_always":
            self.context.always_allowed.add(rule)
        elif decision == "approve_project":
            self.context.always_allowed.add(rule)
            self._remember_in_project(rule)
        elif decision == "approve_file":
            self.context.always_allowed.update(file_edit_rule(path) for path in files or ())
        elif decision == "accept_edits":
            if files is not None:
                # On the shared switch: the parent and every running child stop asking.
                self.context.modes.accept_edits = True
        elif decision != "approve":
            if message:
                raise ToolError(
                    f"the user denied this {tool_name} call ({summary}) and said: {message}"
                )
            raise ToolError(
                f"the user denied this {tool_name} call ({summary}). Do not retry it; "
                "continue another way or ask the user."
            )

    def _remember_in_project(self, rule: ApprovalRule) -> None:
        """Keep an "always in this project" answer in `.claude/settings.local.json`; if the
        file cannot take it, the answer still holds for this session, and the user is told."""
        try:
            self.context.rules.remember_in_project(rule)
        except (RuleFileError, OSError) as error:
            said = f"the rule was not saved for this project: {error}"
            self.emit(events.ErrorEvent(message=said))

    async def _change_preview(self, tool: Tool, arguments: dict[str, Any]) -> str:
        """The diff the user approves, worked out before anything is written."""
        if type(tool).approval_preview is Tool.approval_preview:
            return ""  # changes no files: no thread needed
        try:
            # In a thread: it reads the file the call would change, which may be large.
            diff = await asyncio.to_thread(tool.approval_preview, arguments, self.context)
        except ToolError as error:
            return f"Dry run: this call would fail as it stands: {error}"
        if len(diff) > MAX_CHANGE_PREVIEW_CHARS:
            diff = diff[:MAX_CHANGE_PREVIEW_CHARS] + "\n[… diff cut]\n"
        # The file's current text is shown too, and goes to `exec --json` output.
        return clean_text(self.context.redactor.redact(diff))

    def _offload_if_large(self, call: ToolCall, result: ToolResult) -> ToolResult:
        if len(result.output) <= LARGE_OUTPUT_CHARS or self.tools.get(call.name).bounded_output:
            return result
        store = self.context.handles
        session_id = self.context.session_id
        name = store.next_name(session_id, "tool_output")
        handle = store.put(session_id, name, result.output)
        preview = result.output[:PREVIEW_CHARS]
        text = (
            f"{preview}\n[… output of {len(result.output)} characters stored as a handle; read "
            f"more with handle_read]\n{json.dumps(handle)}"
        )
        return ToolResult(text, ok=result.ok, display=result.display)
