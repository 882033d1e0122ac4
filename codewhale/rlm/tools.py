"""rlm_open, rlm_eval, rlm_configure and rlm_close."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from codewhale.permissions import ApprovalClass
from codewhale.rlm.sessions import RlmError, RlmManager
from codewhale.tools.base import Tool, ToolContext, ToolError, ToolResult
from codewhale.tools.files import read_text

SOURCES = ("file_path", "content", "url", "session_object")
ACTIVE_TRANSCRIPT = "session://active/transcript"


class _RlmTool(Tool):
    # Opening, tuning and closing run no model-written code; a url source still obeys
    # fetch_url's network rules. Only rlm_eval asks (docs/SECURITY.md).
    approval = ApprovalClass.AUTO
    sequential = True

    def __init__(self, manager: RlmManager, transcript: Callable[[], str]) -> None:
        self.manager = manager
        self.transcript = transcript

    def summary(self, arguments: Mapping[str, Any]) -> str:
        return str(arguments.get("name") or arguments.get("file_path") or "")

    def reply(self, data: dict[str, Any]) -> ToolResult:
        return ToolResult(json.dumps(data, ensure_ascii=False, indent=2), ok=data.get("ok", True))


class RlmOpen(_RlmTool):
    name = "rlm_open"
    description = (
        "Load a long input into a persistent Python REPL (an RLM session) for analysis with "
        "rlm_eval. Exactly one source: file_path (in the workspace), content, url, or "
        "session_object ('session://active/transcript'). Inside the REPL: _context/content, "
        "context_meta(), peek(start, end, unit), search(pattern, max_hits), chunk(max_chars, "
        "overlap), chunk_coverage(chunks), llm_query(prompt), llm_query_batched(prompts) "
        "(<=16, concurrent), sub_query(prompt, slice), sub_query_batch, sub_query_map, "
        "sub_query_sequence(prompt, slices), rlm_query(prompt, context=None) (a sub-model with "
        "its own REPL, depth-limited), SHOW_VARS(), repl_get/repl_set, "
        "finalize(value, confidence) / FINAL / FINAL_VAR."
    )
    parameters = {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "file_path": {"type": "string"},
            "content": {"type": "string"},
            "url": {"type": "string"},
            "session_object": {"type": "string"},
        },
    }

    def read_paths(self, arguments: Mapping[str, Any], context: ToolContext) -> list[Path]:
        path = arguments.get("file_path")
        return [context.path(path)] if path is not None else []

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolResult:
        given = [key for key in SOURCES if arguments.get(key) is not None]
        if len(given) != 1:
            raise ToolError(f"rlm_open needs exactly one source: {', '.join(SOURCES)}")
        source = given[0]
        value = arguments[source]
        if source == "file_path":
            text = read_text(context.path(value), workspace=context.workspace)
        elif source == "content":
            text = str(value)
        elif source == "url":
            from codewhale.tools.web import FetchUrl

            fetched = await FetchUrl().run({"url": value}, context)
            text = fetched.output.split("\n", 1)[1] if "\n" in fetched.output else ""
        elif value == ACTIVE_TRANSCRIPT:
            text = self.transcript()
        else:
            raise ToolError(f"unknown session_object {value!r}; use {ACTIVE_TRANSCRIPT!r}")
        label = str(value) if source != "content" else "content"
        try:
            opened = await self.manager.open(
                arguments.get("name"), text, {"source": label, "source_kind": source}
            )
        except RlmError as error:
            raise ToolError(str(error)) from None
        return self.reply(opened)


class RlmEval(_RlmTool):
    name = "rlm_eval"
    description = (
        "Run Python in an open RLM session; variables persist between calls. Output up to "
        "1000 bytes comes back inline, more is stored as a handle (read with handle_read). "
        "finalize(value) stores a result as handle final_N."
    )
    parameters = {
        "type": "object",
        "properties": {"name": {"type": "string"}, "code": {"type": "string"}},
        "required": ["name", "code"],
    }
    # It runs code: asked for in Agent mode (and in Plan mode, where it runs only inside
    # the read-only, offline sandbox).
    approval = ApprovalClass.REQUIRED
    # The kernel enforces eval_timeout_secs (at most 3600) and restarts itself after it;
    # the dispatcher's limit is only a backstop above that.
    timeout_secs = 3600 + 60

    def approval_text(self, arguments: Mapping[str, Any]) -> str:
        where = "in the sandbox" if self.manager.sandboxed else "WITHOUT a sandbox"
        name, code = arguments.get("name"), arguments.get("code")
        return f"Python in RLM session {name!s} ({where}):\n{code!s}"

    def sandboxed_read_only(self) -> bool:
        return self.manager.sandboxed

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolResult:
        try:
            return self.reply(await self.manager.evaluate(arguments["name"], arguments["code"]))
        except RlmError as error:
            raise ToolError(str(error)) from None


class RlmConfigure(_RlmTool):
    name = "rlm_configure"
    description = (
        "Tune an RLM session: output_feedback full|metadata, sub_query_timeout_secs (1-600), "
        "sub_rlm_max_depth (0-3)."
    )
    parameters = {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "output_feedback": {"type": "string", "enum": ["full", "metadata"]},
            "sub_query_timeout_secs": {"type": "integer"},
            "sub_rlm_max_depth": {"type": "integer"},
        },
        "required": ["name"],
    }

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolResult:
        try:
            return self.reply(self.manager.configure(arguments["name"], arguments))
        except RlmError as error:
            raise ToolError(str(error)) from None


class RlmClose(_RlmTool):
    name = "rlm_close"
    description = "Close an RLM session and stop its kernel; returns its counters."
    parameters = {
        "type": "object",
        "properties": {"name": {"type": "string"}},
        "required": ["name"],
    }

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolResult:
        try:
            return self.reply(await self.manager.close(arguments["name"]))
        except RlmError as error:
            raise ToolError(str(error)) from None


def rlm_tools(manager: RlmManager, transcript: Callable[[], str]) -> list[Tool]:
    return [cls(manager, transcript) for cls in (RlmOpen, RlmEval, RlmConfigure, RlmClose)]
