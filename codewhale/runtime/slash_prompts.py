"""Prompts that slash commands hand to the model (no UI here, so any front end can use them)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from codewhale.skills import Skill


class SlashUsageError(ValueError):
    """Arguments a slash command cannot use; the message says how to call it."""


@dataclass(frozen=True)
class AgentRequest:
    depth: int
    task: str


def parse_agent_arguments(arguments: str) -> AgentRequest:
    """`/agent [N] <task>`: N is the max_depth (0..3, default 1)."""
    depth, task = _depth_and_rest(
        arguments, "usage: /agent [N] <task>   (N = depth 0..3, default 1)"
    )
    return AgentRequest(depth, task)


def agent_prompt(request: AgentRequest) -> str:
    return (
        "Delegate this task to a persistent sub-agent: call agent_open with "
        f"max_depth: {request.depth}, a short description, and the task below as its "
        "prompt. Keep working on anything you can do meanwhile; when its completion "
        "arrives, check the side effects it claims (files, test results) before you "
        f"report them.\n\nTask:\n{request.task}"
    )


def skill_prompt(skill: Skill, arguments: str) -> str:
    """What `/<skill>` sends: the skill's instructions with the user's arguments, where the
    skill asks for them (`$ARGUMENTS`, as Claude Code fills it) or after them."""
    text = skill.instructions
    if "$ARGUMENTS" in text:
        text = text.replace("$ARGUMENTS", arguments.strip())
    elif arguments.strip():
        text += f"\n\nARGUMENTS: {arguments.strip()}"
    return f"Follow the skill '{skill.name}' (from {skill.file}), run by the user:\n\n{text}"


def relay_prompt(focus: str, snapshot: str, earlier: str = "") -> str:
    """`earlier`: the hand-off file as it is now, which the new one updates."""
    focus_line = f"Focus of the hand-off: {focus}\n\n" if focus.strip() else ""
    earlier_part = (
        f"\n\nThe hand-off file as it is now (update it; keep what still holds):\n{earlier}"
        if earlier.strip()
        else ""
    )
    return (
        "Write the hand-off for `.codewhale/handoff.md` so another session can pick up this "
        "work without asking questions. Reply with the document itself, in Markdown, as your "
        "whole answer: CodeWhale saves your answer to that file, so do not write it with a "
        "tool. Title it `# Session relay` and use the sections Goal, Current work, Files and "
        "state, Decisions, Verification, Next action. Keep it under about 900 words, "
        "concrete (paths, commands, results), and true to what happened.\n\n"
        f"{focus_line}Session snapshot:\n{snapshot}{earlier_part}"
    )


def _depth_and_rest(arguments: str, usage: str) -> tuple[int, str]:
    text = arguments.strip()
    head, _, rest = text.partition(" ")
    depth = 1
    if head.lstrip("-").isdigit():
        depth = int(head)
        text = rest.strip()
        if not 0 <= depth <= 3:
            raise SlashUsageError("Depth must be between 0 and 3")
    if not text:
        raise SlashUsageError(usage)
    return depth, text


def rlm_prompt(arguments: str, workspace: Path) -> str:
    """`/rlm [N] <file-or-text>`: a workspace file opens by path, anything else as content."""
    depth, target = _depth_and_rest(arguments, "usage: /rlm [N] <file-or-text>")
    candidate = (workspace / target).resolve()
    inside = candidate == workspace.resolve() or workspace.resolve() in candidate.parents
    if inside and candidate.is_file():
        source = f"rlm_open with file_path: {json.dumps(target)}"
    else:
        source = f"rlm_open with content: {json.dumps(target)}"
    return (
        f"Analyse this input with an RLM session: call {source}, then rlm_configure with "
        f"sub_rlm_max_depth: {depth}. Work in rlm_eval: look at context_meta(), search and "
        "chunk the text, use llm_query / sub_query helpers for the parts that need reading, "
        "and finalize(...) the result. Close the session with rlm_close when done and report "
        "what you found, citing positions in the input."
    )
