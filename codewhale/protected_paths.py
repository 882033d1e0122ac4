"""Workspace paths whose contents run programs or steer the app: writing them always asks.

`.git/config` and `.git/hooks` name commands git runs, `.mcp.json` names servers we start,
`.codewhale/` and `.claude/` hold project config, agent definitions and hooks. A file tool
writing one of these could turn an approved edit into code that runs later outside the
sandbox, so such a write asks in every mode (YOLO included); Plan mode refuses it like any
write. A path is protected when any of its components, taken relative to the writing
agent's own workspace, is one of these names: a worktree child writes its own tree freely,
while the parent writing into a worktree the app keeps under `.git/` is asked.
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath

# Why each name is protected, as the approval prompt says it.
PROTECTED_NAMES = {
    ".git": "git's own directory (its config and hooks name programs git runs)",
    ".codewhale": "CodeWhale's project config, agent definitions and state",
    ".claude": "Claude Code's project settings, agents and hooks",
    ".mcp.json": "the project's MCP servers (programs CodeWhale starts)",
}
# Written at the app's request and read by people, never run or loaded as config.
UNPROTECTED = frozenset({PurePosixPath(".codewhale/handoff.md")})


def protection(workspace: Path, path: Path) -> str | None:
    """Why writing `path` (resolved, inside `workspace`) asks first, or None if it need not.

    Names compare case-insensitively: on macOS and Windows `.GIT/config` is `.git/config`.
    """
    try:
        relative = PurePosixPath(path.relative_to(workspace.resolve()).as_posix())
    except ValueError:
        return None  # outside the workspace: confinement refuses it before this is asked
    if relative in UNPROTECTED:
        return None
    for part in relative.parts:
        reason = PROTECTED_NAMES.get(part.casefold())
        if reason is not None:
            return f"{relative} is protected: {reason}"
    return None
