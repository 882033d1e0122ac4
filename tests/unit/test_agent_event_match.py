"""The TUI handles the sub-agents' mailbox events by their types (issue 31, item 3): it
matches `AnyAgentEvent` with an `assert_never` default, so mypy names every handler a new
event would miss, and it never dispatches on the JSON envelope's `"kind"` strings (those
are for `exec --json` only)."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import get_args

import pytest

import codewhale
import codewhale.tui
from codewhale.subagents import events
from codewhale.subagents.events import AgentEvent, AnyAgentEvent

TUI = Path(codewhale.tui.__file__).parent
PROJECT = Path(codewhale.__file__).parent.parent


def all_subclasses(cls: type) -> set[type]:
    found = set(cls.__subclasses__())
    for sub in list(found):
        found |= all_subclasses(sub)
    return found


def kind_dispatch(node: ast.AST) -> str | None:
    """What in `node` reads an event's kind as a string to decide on, if anything."""
    if isinstance(node, ast.Subscript):
        key = node.slice
        if isinstance(key, ast.Constant) and key.value == "kind":
            return '["kind"]'
        if isinstance(key, ast.Attribute) and key.attr == "kind":
            return "[….kind]"
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        if node.func.attr == "envelope":
            return ".envelope()"
        first = node.args[0] if node.args else None
        if node.func.attr == "get" and isinstance(first, ast.Constant) and first.value == "kind":
            return '.get("kind")'
    if isinstance(node, ast.Compare):
        sides = [node.left, *node.comparators]
        if any(isinstance(side, ast.Attribute) and side.attr == "kind" for side in sides):
            return "….kind compared"
    if isinstance(node, ast.Match):
        subject = node.subject
        if isinstance(subject, ast.Attribute) and subject.attr == "kind":
            return "match ….kind"
    return None


def agent_event_matches(tree: ast.AST) -> list[ast.Match]:
    """The `match` statements with a case on a mailbox event class (`events.AgentX()`)."""
    names = {cls.__name__ for cls in get_args(AnyAgentEvent)}
    return [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Match)
        and any(
            isinstance(pattern, ast.MatchClass)
            and isinstance(pattern.cls, ast.Attribute | ast.Name)
            and (pattern.cls.attr if isinstance(pattern.cls, ast.Attribute) else pattern.cls.id)
            in names
            for case in node.cases
            for pattern in ast.walk(case.pattern)
        )
    ]


def ends_in_assert_never(match: ast.Match) -> bool:
    last = match.cases[-1]
    wildcard = isinstance(last.pattern, ast.MatchAs) and last.pattern.pattern is None
    call = last.body[0].value if isinstance(last.body[0], ast.Expr) else None
    return (
        wildcard
        and isinstance(call, ast.Call)
        and isinstance(call.func, ast.Name)
        and call.func.id == "assert_never"
    )


def tui_trees() -> dict[str, ast.Module]:
    return {
        path.name: ast.parse(path.read_text(encoding="utf-8")) for path in sorted(TUI.glob("*.py"))
    }


def test_every_agent_event_class_is_in_the_union_the_tui_matches():
    # A class left out would pass mypy unhandled, and `isinstance(e, AnyAgentEvent)`
    # would drop it at run time.
    assert all_subclasses(AgentEvent) == set(get_args(AnyAgentEvent))


def test_the_tui_never_dispatches_on_kind_strings():
    found = [
        f"{name}:{node.lineno}: {what}"  # type: ignore[attr-defined]
        for name, tree in tui_trees().items()
        for node in ast.walk(tree)
        if (what := kind_dispatch(node))
    ]
    assert found == []


def test_the_kind_check_sees_each_way_of_dispatching_on_kind():
    written = """
if envelope["kind"] == "completed": pass
if event.get("kind") in ENDED: pass
group = LATEST_ONLY[event.kind]
if event.kind != "progress": pass
match event.kind:
    case "queued": pass
shown = event.envelope()
"""
    hits = [what for node in ast.walk(ast.parse(written)) if (what := kind_dispatch(node))]
    assert sorted(set(hits)) == sorted(
        {'["kind"]', '.get("kind")', "[….kind]", "….kind compared", "match ….kind", ".envelope()"}
    )


def test_each_tui_match_on_agent_events_ends_in_assert_never():
    matches = {
        name: agent_event_matches(tree)
        for name, tree in tui_trees().items()
        if agent_event_matches(tree)
    }
    # The transcript's cell, the agent screen's child, the app's frame coalescing.
    assert set(matches) >= {"transcript.py", "agent_screen.py", "app.py"}
    open_ended = [
        f"{name}:{match.lineno}"
        for name, found in matches.items()
        for match in found
        if not ends_in_assert_never(match)
    ]
    assert open_ended == []


NEW_EVENT = """
@dataclass(frozen=True, kw_only=True)
class AgentPaused(AgentEvent):
    KIND: ClassVar[str] = "paused"


"""


@pytest.mark.slow
def test_mypy_names_each_tui_handler_a_new_agent_event_would_miss(tmp_path):
    """A new event added to the union, with no TUI handler written: mypy fails, at each
    match. The real module is left alone: mypy reads a changed copy in its place."""
    source = Path(events.__file__)
    text = source.read_text(encoding="utf-8")
    union = "AnyAgentEvent: TypeAlias = (\n"
    assert text.count(union) == 1
    changed = text.replace(union, f"{NEW_EVENT}{union}    AgentPaused\n    | ")
    shadow = tmp_path / "events.py"
    shadow.write_text(changed, encoding="utf-8")
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--cache-dir", os.devnull, "--shadow-file", source, shadow],
        cwd=PROJECT,
        capture_output=True,
        text=True,
        check=False,
    )
    unhandled = re.findall(
        r'^codewhale/tui/(\w+\.py):\d+: error: Argument 1 to "assert_never" has '
        r'incompatible type "AgentPaused"',
        result.stdout,
        re.MULTILINE,
    )
    assert sorted(unhandled) == ["agent_screen.py", "app.py", "transcript.py"], result.stdout
