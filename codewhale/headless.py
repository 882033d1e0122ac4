"""`codewhale exec`: one prompt, run to completion without the TUI.

Exit codes: 0 done, 1 the turn failed, 2 usage or config error, 130 interrupted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
from typing import TextIO

from codewhale.config import ConfigError
from codewhale.permissions import Mode
from codewhale.runtime import RuntimeSetupError, events, open_runtime
from codewhale.sanitize import clean_text

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


def read_prompt(argument: str, stdin: TextIO) -> str:
    return stdin.read() if argument == "-" else argument


class ApprovalPolicy:
    """Resolves approval requests for a run with no UI: auto, deny, or ask on the terminal."""

    def __init__(self, policy: str) -> None:
        self.policy = policy

    def __call__(self, request: events.ApprovalRequested) -> None:
        if self.policy == "auto":
            request.resolve("approve")
        elif self.policy == "ask" and sys.stdin.isatty():
            request.resolve(_ask_on_terminal(request))
        else:
            request.resolve("deny")


def _ask_on_terminal(request: events.ApprovalRequested) -> str:
    print(f"\n{request.requester} wants to run {request.tool}: {request.summary}", file=sys.stderr)
    answer = input("Allow? [y]es / [a]lways / [N]o: ").strip().lower()
    return {"y": "approve", "yes": "approve", "a": "approve_always"}.get(answer, "deny")


class Printer:
    """Turns events into output: JSON lines, or the final answer plus progress on stderr."""

    def __init__(self, as_json: bool, out: TextIO, err: TextIO) -> None:
        self.as_json = as_json
        self.out = out
        self.err = err

    def __call__(self, event: events.Event) -> None:
        if self.as_json:
            self.out.write(json.dumps(event.to_dict(), ensure_ascii=False, default=str) + "\n")
            self.out.flush()
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
        elif isinstance(event, events.TurnComplete) and event.final_text:
            self.out.write(clean_text(event.final_text).rstrip() + "\n")


def run_exec(args: argparse.Namespace) -> int:
    prompt = read_prompt(args.prompt, sys.stdin)
    if not prompt.strip():
        print("codewhale exec: the prompt is empty", file=sys.stderr)
        return EXIT_USAGE
    if args.max_steps is not None and args.max_steps < 1:
        print("codewhale exec: --max-steps must be at least 1", file=sys.stderr)
        return EXIT_USAGE
    try:
        return asyncio.run(_run(args, prompt))
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED


async def _run(args: argparse.Namespace, prompt: str) -> int:
    printer = Printer(args.json, sys.stdout, sys.stderr)
    approvals = ApprovalPolicy(args.approve)

    def handle(event: events.Event) -> None:
        if isinstance(event, events.ApprovalRequested):
            approvals(event)
        printer(event)

    try:
        runtime = open_runtime(
            workspace=args.workspace_path,
            overrides=args.overrides,
            mode=Mode(args.mode) if args.mode else Mode.AGENT,
            emit=handle,
            resume=getattr(args, "resume", None),
            continue_latest=getattr(args, "continue_latest", False),
            max_steps=args.max_steps,
        )
    except (ConfigError, RuntimeSetupError) as error:
        print(f"codewhale: {error}", file=sys.stderr)
        return EXIT_USAGE
    for warning in runtime.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGINT, runtime.cancel_turn)
    try:
        result = await runtime.submit(prompt)
    finally:
        loop.remove_signal_handler(signal.SIGINT)
        await runtime.close()
    if result.status == "completed":
        return EXIT_OK
    if result.status == "interrupted":
        return EXIT_INTERRUPTED
    return EXIT_FAILED
