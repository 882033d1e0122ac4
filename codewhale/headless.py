"""`codewhale exec`: one prompt, run to completion without the TUI.

Exit codes: 0 done, 1 the turn failed, 2 usage or config error, 130 interrupted (SIGINT),
143 and 129 stopped by SIGTERM and SIGHUP (handled as SIGINT is: the result is written).

With `--json`, stdout is JSON Lines: a `session` record, the events, then a `result`
record (docs/EVENTS.md, "exec --json"). Without it, stdout holds only the final answer.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import json
import sys
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, TextIO, TypeVar

from codewhale.approval_answers import ALWAYS, Answer, approvals
from codewhale.config import ConfigError
from codewhale.output_streams import holds_any_character
from codewhale.permissions import Mode
from codewhale.providers.key_help import lacks_key, missing_key_help
from codewhale.providers.types import Usage
from codewhale.runtime import Runtime, RuntimeSetupError, TurnResult, events, open_runtime
from codewhale.sanitize import clean_text
from codewhale.stop_signals import StopSignals

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130

# Bumped only when a field of the session or result record changes meaning or goes away.
SCHEMA_VERSION = 1

NEEDS_TERMINAL = "--approve ask needs a terminal (/dev/tty); use --approve auto or deny"

# The turn's status as the result record names it: a script tells failures apart by the
# `error` event before the record, not by a status of its own for each kind.
RESULT_STATUS = {
    "completed": "completed",
    "interrupted": "interrupted",
    "max_steps": "max_steps",
    "failed": "error",
    "timed_out": "error",
}

# A child's status, as counted in the result record; anything not finished is running.
CHILD_OUTCOMES = ("completed", "failed", "cancelled", "interrupted")

T = TypeVar("T")


def read_prompt(argument: str, stdin: TextIO) -> str:
    return stdin.read() if argument == "-" else argument


# -- asking on the terminal -------------------------------------------------------------------


@dataclass
class Terminal:
    """Where `--approve ask` talks to a person: the controlling terminal, never stdout
    (which may carry JSON) nor stdin (which may carry the prompt)."""

    answers: TextIO
    questions: TextIO

    @classmethod
    def open(cls) -> Terminal:
        """Raises OSError when the process has no controlling terminal.

        Never closed: a question still waiting when the run ends (Ctrl-C) holds the
        reader's lock, so closing it would wait for an answer; the exit closes it.
        """
        answers = open("/dev/tty", encoding="utf-8", errors="replace")  # noqa: SIM115
        questions = open("/dev/tty", "w", encoding="utf-8")  # noqa: SIM115
        return cls(answers, questions)

    def ask(self, question: str) -> str:
        """Blocking: show `question`, wait for one line ("" if the terminal went away)."""
        self.questions.write(question)
        self.questions.flush()
        return self.answers.readline()


async def in_daemon_thread(work: Callable[[], T]) -> T:
    """Run blocking `work` off the event loop, like `asyncio.to_thread`, except that a
    thread still blocked when the run ends (a question nobody answered before Ctrl-C)
    does not hold up the exit: asyncio.run waits for its executor's threads, never for
    a daemon thread."""
    outcome: concurrent.futures.Future[T] = concurrent.futures.Future()

    def run() -> None:
        # Running from here on: cancelling the awaiting task can no longer cancel
        # `outcome`, so setting it below cannot fail.
        outcome.set_running_or_notify_cancel()
        try:
            outcome.set_result(work())
        except Exception as error:
            outcome.set_exception(error)

    threading.Thread(target=run, name="codewhale-terminal", daemon=True).start()
    return await asyncio.wrap_future(outcome)


# A diff longer than this is cut in the terminal question (the whole is in `--json` output).
QUESTION_DIFF_LINES = 80


def approval_question(request: events.ApprovalRequested) -> str:
    """The call, then (for a call "always" may allow) the rule it would store, then the
    answers that fit it: the app's dialog offers the same (codewhale/approval_answers.py)."""
    # The summary comes from the model: no escape sequences reach the terminal.
    # A file change shows the diff it would make, as the app's dialog does.
    diff = clean_text(request.preview).splitlines() if request.file_change else []
    if len(diff) > QUESTION_DIFF_LINES:
        diff = [*diff[:QUESTION_DIFF_LINES], f"… {len(diff) - QUESTION_DIFF_LINES} more lines"]
    offered = terminal_answers(request)
    rule = clean_text(request.scope) or f"every {clean_text(request.tool)} call"
    lasting = (
        f"[a]lways allows, for this session: {rule}; [p] keeps that rule in this project\n"
        if ALWAYS in offered
        else ""
    )
    choices = " / ".join(f"[{answer.key}] {answer.label.lower()}" for answer in offered)
    return (
        f"\n{clean_text(request.requester)} wants to run {request.tool}: "
        f"{clean_text(request.summary)}\n"
        + "".join(f"{line}\n" for line in diff)
        + lasting
        + f"Allow? {choices} / [N]o: "
    )


def terminal_answers(request: events.ApprovalRequested) -> list[Answer]:
    return approvals(request.file_change, bool(request.files))


def decision_from_answer(answer: str, request: events.ApprovalRequested) -> str:
    """The decision a typed key (or the word "yes") gives; anything else denies, an answer
    that does not fit this request and the end of input included."""
    typed = answer.strip().lower()
    typed = {"yes": "y", "always": "a"}.get(typed, typed)
    return next((a.decision for a in terminal_answers(request) if a.key == typed), "deny")


async def ask_approval(terminal: Terminal, request: events.ApprovalRequested) -> str:
    answer = await in_daemon_thread(lambda: terminal.ask(approval_question(request)))
    return decision_from_answer(answer, request)


class ApprovalPolicy:
    """Resolves approval requests for a run with no UI: auto, deny, or ask on the terminal."""

    def __init__(self, policy: str, terminal: Terminal | None) -> None:
        self.policy = policy
        self.terminal = terminal
        # Children ask in parallel; one question at a time keeps their prompts apart.
        self._one_question_at_a_time = asyncio.Lock()
        self._asking: set[asyncio.Task[None]] = set()

    def __call__(self, request: events.ApprovalRequested) -> None:
        if self.policy == "auto":
            request.resolve("approve")
        elif self.policy == "ask" and self.terminal is not None:
            # Events are emitted on the loop, which must keep running while a person thinks.
            task = asyncio.get_running_loop().create_task(self._ask(self.terminal, request))
            self._asking.add(task)  # a task nobody references may be collected mid-question
            task.add_done_callback(self._asking.discard)
        else:
            request.resolve("deny")

    async def _ask(self, terminal: Terminal, request: events.ApprovalRequested) -> None:
        async with self._one_question_at_a_time:
            request.resolve(await ask_approval(terminal, request))


# -- output -----------------------------------------------------------------------------------


class Printer:
    """Turns events into output: JSON lines, or the final answer plus progress on stderr."""

    def __init__(self, as_json: bool, out: TextIO, err: TextIO) -> None:
        self.as_json = as_json
        self.out = out
        self.err = err

    def __call__(self, event: events.Event) -> None:
        if self.as_json:
            self._write_json(event.to_dict())
            return
        if isinstance(event, events.ToolCallStarted):
            self.err.write(f"· {event.name} {clean_text(event.summary)[:120]}\n")
        elif isinstance(event, events.Retrying):
            self.err.write(
                f"retrying in {event.delay:.1f} s: {clean_text(event.reason)}"
                f" (attempt {event.attempt} of {event.max_attempts})\n"
            )
        elif isinstance(event, events.ErrorEvent):
            self.err.write(f"error: {clean_text(event.message)}\n")
        elif isinstance(event, events.HookRan) and event.outcome != "ok":
            self.err.write(f"{clean_text(event.line())}\n")
        elif isinstance(event, events.WarningEvent):
            self.err.write(f"warning: {clean_text(event.message)}\n")
        elif isinstance(event, events.ContextCompacted):
            self.err.write(
                f"context compacted: {event.summarised} messages summarised, {event.kept} kept "
                f"({event.tokens_before} -> about {event.tokens_after} tokens)\n"
            )
        elif isinstance(event, events.CompactionFailed):
            self.err.write(f"warning: context not compacted: {clean_text(event.message)}\n")
        elif isinstance(event, events.TurnComplete) and event.final_text:
            self.out.write(clean_text(event.final_text).rstrip() + "\n")

    def begin(self, session: dict[str, Any]) -> None:
        """The session record opens the JSON stream; a person has nothing to see yet."""
        if self.as_json:
            self._write_json(session)

    def end(self, result: dict[str, Any]) -> None:
        """The result record closes the JSON stream; a person gets the id to resume with."""
        if self.as_json:
            self._write_json(result)
        else:
            self.err.write(f"session: {result['session_id']}\n")

    def _write_json(self, record: dict[str, Any]) -> None:
        escape = not holds_any_character(self.out)  # an ASCII locale: \u escapes, exact
        self.out.write(json.dumps(record, ensure_ascii=escape, default=str) + "\n")
        self.out.flush()


def session_record(runtime: Runtime, resumed: bool) -> dict[str, Any]:
    return {
        "type": "session",
        "ts": time.time(),
        "schema_version": SCHEMA_VERSION,
        "session_id": runtime.info.id,
        "workspace": str(runtime.workspace),
        "model": runtime.model,
        "mode": runtime.mode.value,
        "resumed": resumed,
    }


def children_counts(children: Iterable[events.AgentSnapshot]) -> dict[str, int]:
    counts = dict.fromkeys(("total", *CHILD_OUTCOMES, "running"), 0)
    for child in children:
        counts["total"] += 1
        counts[child.status if child.status in CHILD_OUTCOMES else "running"] += 1
    return counts


def result_record(
    runtime: Runtime,
    turn: TurnResult,
    children: Iterable[events.AgentSnapshot],
    duration_ms: int,
) -> dict[str, Any]:
    return {
        "type": "result",
        "ts": time.time(),
        "schema_version": SCHEMA_VERSION,
        "status": RESULT_STATUS.get(turn.status, "error"),
        "final_text": turn.final_text,
        "usage": (spent := runtime.spent_this_run()).total.counts(),
        "cost_usd": spent.cost_usd,
        "duration_ms": duration_ms,
        "session_id": runtime.info.id,
        "children": children_counts(children),
    }


# -- the run ----------------------------------------------------------------------------------


def usage_error(message: str) -> int:
    print(f"codewhale exec: {message}", file=sys.stderr)
    return EXIT_USAGE


def run_exec(args: argparse.Namespace) -> int:
    terminal = None
    if args.approve == "ask":
        # Checked before anything else: finding out at the first approval would be too
        # late, with the model already paid for and the work half done.
        try:
            terminal = Terminal.open()
        except OSError:
            return usage_error(NEEDS_TERMINAL)
    if args.max_steps is not None and args.max_steps < 1:
        return usage_error("--max-steps must be at least 1")
    prompt = read_prompt(args.prompt, sys.stdin)
    if not prompt.strip():
        return usage_error("the prompt is empty")
    try:
        return asyncio.run(_run(args, prompt, terminal))
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED


async def _run(args: argparse.Namespace, prompt: str, terminal: Terminal | None) -> int:
    started = time.monotonic()
    printer = Printer(args.json, sys.stdout, sys.stderr)
    approvals = ApprovalPolicy(args.approve, terminal)

    def handle(event: events.Event) -> None:
        if isinstance(event, events.ApprovalRequested):
            approvals(event)
        printer(event)

    resume = getattr(args, "resume", None)
    continue_latest = getattr(args, "continue_latest", False)
    try:
        runtime = open_runtime(
            workspace=args.workspace_path,
            overrides=args.overrides,
            mode=Mode(getattr(args, "mode", None) or Mode.AGENT),
            emit=handle,
            resume=resume,
            continue_latest=continue_latest,
            max_steps=args.max_steps,
        )
    except (ConfigError, RuntimeSetupError) as error:
        print(f"codewhale: {error}", file=sys.stderr)
        return EXIT_USAGE
    if lacks_key(runtime.settings):
        # A setup problem like a bad config: said before any request, with the fix.
        await runtime.close()
        print(
            f"codewhale: {missing_key_help(runtime.settings, runtime.loaded.user_file)}",
            file=sys.stderr,
        )
        return EXIT_USAGE
    for warning in runtime.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    printer.begin(session_record(runtime, resumed=runtime.resumed))
    work = asyncio.ensure_future(servers_then_turn(runtime, prompt))
    # SIGINT, SIGTERM or SIGHUP interrupts the turn (before it starts, the wait for MCP
    # servers), and closing below stops the rest; a second one while closing exits at once.
    with StopSignals(lambda _: runtime.cancel_turn() or work.cancel()) as stop:
        try:
            await asyncio.wait({work})
            turn = stopped_before_the_turn() if work.cancelled() else work.result()
            # Counted as the turn ended: closing then stops the children still running.
            children = runtime.agents()
        finally:
            await runtime.close()
    # After close, so nothing it reports (children it stopped) comes after the result.
    duration_ms = round((time.monotonic() - started) * 1000)
    # A file the run could not write (a full or read-only disk) costs nothing printed: the
    # answer is out, one line says what was not saved (--json had a storage_error record).
    problems = runtime.storage_problems()
    if not args.json:
        for problem in problems:
            print(f"codewhale: {problem}", file=sys.stderr)
    printer.end(result_record(runtime, turn, children, duration_ms))
    if turn.status == "completed":
        return EXIT_FAILED if problems else EXIT_OK
    if turn.status == "interrupted":
        return stop.exit_status or EXIT_INTERRUPTED
    return EXIT_FAILED


async def servers_then_turn(runtime: Runtime, prompt: str) -> TurnResult:
    """Wait for the MCP servers, then run the turn: one task, so one signal stops either."""
    # A server that cannot start is said once, up front; the turn runs without its tools.
    for problem in await runtime.start_mcp():
        print(f"warning: {problem}", file=sys.stderr)
    return await runtime.submit(prompt)


def stopped_before_the_turn() -> TurnResult:
    """The result of a turn a stop signal prevented (it came while MCP servers started)."""
    return TurnResult(status="interrupted", steps=0, usage=Usage())
