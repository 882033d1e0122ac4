"""Build the parent's system prompt: our instructions, project instructions, memory, facts."""

from __future__ import annotations

import platform
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path

from codewhale.engine.instructions import load_instructions
from codewhale.gitrun import GitError, run_git
from codewhale.permissions import Mode

MAX_MEMORY_CHARS = 8_000

_MODE_TEXT = {
    Mode.PLAN: "Plan mode: read-only. You may read and search, and write plan artifacts "
    "(update_plan, checklist_write). You cannot edit files or run commands; propose changes.",
    Mode.AGENT: "Agent mode: file edits, shell commands and network access ask the user "
    "first; the user sees each edit as a diff and may deny it with a reason.",
    Mode.YOLO: "YOLO mode: every tool runs without asking. Be careful with destructive commands.",
}


def base_instructions(name: str = "system") -> str:
    return resources.files("codewhale.data").joinpath(f"prompts/{name}.md").read_text("utf-8")


def git_branch(workspace: Path) -> str | None:
    """The checked-out branch ("HEAD" when detached); None outside a repository or without git."""
    try:
        result = run_git(["rev-parse", "--abbrev-ref", "HEAD"], workspace, timeout=2)
    except GitError:
        return None
    branch = result.stdout.decode("utf-8", "replace").strip()
    return (branch or None) if result.returncode == 0 else None


def build_system_prompt(
    workspace: Path,
    mode: Mode,
    *,
    memory_file: Path | None = None,
    today: str | None = None,
    tools: bool = True,
    warnings: list[str] | None = None,
    branch: str | None = None,
) -> str:
    """The session's system prompt; what the user should hear about it goes to `warnings`.

    `branch` is git_branch(workspace), looked up once by the caller for all who need it.
    """
    if not tools:
        # A model offered no tools (the offline one) gets a short prompt that says so:
        # instructions about tools would only invite it to pretend, and its context
        # (8k tokens) is too small for project instructions.
        date = today or datetime.now(UTC).strftime("%Y-%m-%d")
        return f"{base_instructions('offline_chat').strip()}\n\nToday is {date}.\n"
    sections = [base_instructions().strip()]
    instructions = load_instructions(workspace)
    if warnings is not None:
        warnings.extend(instructions.warnings)
    if instructions.text:
        sections.append(instructions.text)
    if memory_file is not None and memory_file.is_file():
        memory = memory_file.read_text(encoding="utf-8", errors="replace")[-MAX_MEMORY_CHARS:]
        if memory.strip():
            sections.append(f"# The user's memory notes\n\n{memory.strip()}")
    facts = [
        f"- Workspace: {workspace}",
        f"- Git branch: {branch}" if branch else "- Not a git repository (or git unavailable)",
        f"- Date: {today or datetime.now(UTC).strftime('%Y-%m-%d')}",
        f"- OS: {platform.system()} {platform.release()}",
        f"- {_MODE_TEXT[mode]}",
    ]
    sections.append("# Environment\n\n" + "\n".join(facts))
    return "\n\n".join(sections) + "\n"
