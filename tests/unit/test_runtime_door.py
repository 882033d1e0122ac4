"""The TUI reaches the session only through the Runtime's operations (issue 31, item 3):
no attribute of the runtime's parts (its sub-agent manager, RLM manager, MCP hub) is
read anywhere in codewhale/tui. Import-linter checks the imports; this checks the use."""

from __future__ import annotations

import ast
from pathlib import Path

import codewhale.tui

PARTS = frozenset({"manager", "rlm", "mcp"})
# What the TUI calls its Runtime: `runtime`, `app.runtime`, `self.runtime`, `opened`.
RUNTIME_NAMES = frozenset({"runtime", "opened"})


def reaches_into_the_runtime(node: ast.AST) -> bool:
    if not isinstance(node, ast.Attribute) or node.attr not in PARTS:
        return False
    holder = node.value
    if isinstance(holder, ast.Name):
        return holder.id in RUNTIME_NAMES
    return isinstance(holder, ast.Attribute) and holder.attr == "runtime"


def test_the_tui_never_touches_the_runtimes_parts():
    folder = Path(codewhale.tui.__file__).parent
    found = []
    for path in sorted(folder.glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        found += [
            f"{path.name}:{node.lineno}: .{node.attr}"  # type: ignore[attr-defined]
            for node in ast.walk(tree)
            if reaches_into_the_runtime(node)
        ]
    assert found == []


def test_the_check_sees_a_reach_in():
    written = "runtime.manager.snapshot_of(x)\nself.runtime.mcp.statuses()\nself.rlm.update()"
    hits = [n for n in ast.walk(ast.parse(written)) if reaches_into_the_runtime(n)]
    assert [n.attr for n in hits] == ["manager", "mcp"]  # type: ignore[attr-defined]
