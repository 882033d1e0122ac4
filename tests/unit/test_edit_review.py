"""Agent mode reviews every file change: the dispatcher asks with the diff, and the answers
"this file", "accept all edits" and "deny with a message" do what they say."""

from __future__ import annotations

import json

import pytest

from codewhale.engine import events
from codewhale.engine.dispatch import ToolDispatcher
from codewhale.headless import approval_question, decision_from_answer
from codewhale.permissions import ApprovalClass, Mode, ModeSwitch, Verdict, decide
from codewhale.providers.types import ToolCall
from codewhale.tools.base import ToolContext, ToolResult
from codewhale.tools.registry import ToolRegistry, default_tools

PATCH = "--- a/b.txt\n+++ b/b.txt\n@@ -1 +1 @@\n-bee\n+BEE\n"


@pytest.fixture
def workspace(tmp_path):
    (tmp_path / "a.txt").write_text("alpha\n")
    (tmp_path / "b.txt").write_text("bee\n")
    return tmp_path


class User:
    """A dispatcher over the real tools whose user gives the scripted answers in order."""

    def __init__(
        self, workspace, *answers: str | tuple[str, str], modes: ModeSwitch | None = None
    ) -> None:
        self.answers = list(answers)
        self.asked: list[events.ApprovalRequested] = []
        self.resolved: list[events.ApprovalResolved] = []
        self.context = ToolContext(
            workspace=workspace, session_id="s", modes=modes or ModeSwitch(Mode.AGENT)
        )
        self.dispatcher = ToolDispatcher(ToolRegistry(default_tools()), self.context, self.emit)

    def emit(self, event: events.Event) -> None:
        if isinstance(event, events.ApprovalRequested):
            self.asked.append(event)
            answer = self.answers.pop(0) if self.answers else "deny"
            decision, message = answer if isinstance(answer, tuple) else (answer, "")
            event.resolve(decision, message)
        elif isinstance(event, events.ApprovalResolved):
            self.resolved.append(event)

    async def call(self, tool: str, **arguments: object) -> ToolResult:
        call = ToolCall(f"c{len(self.asked)}", tool, json.dumps(arguments))
        [outcome] = await self.dispatcher.run([call])
        return outcome.result


def test_agent_mode_asks_for_file_changes_and_lets_the_plan_through():
    assert decide(ApprovalClass.SUGGEST, Mode.AGENT).verdict is Verdict.ASK
    assert decide(ApprovalClass.SUGGEST, Mode.AGENT, plan_artifact=True).verdict is Verdict.ALLOW
    assert decide(ApprovalClass.SUGGEST, Mode.AGENT, accept_edits=True).verdict is Verdict.ALLOW
    assert decide(ApprovalClass.SUGGEST, Mode.PLAN, accept_edits=True).verdict is Verdict.DENY
    assert decide(ApprovalClass.SUGGEST, Mode.YOLO).verdict is Verdict.ALLOW
    # "accept edits" is about files only: commands still ask.
    assert decide(ApprovalClass.REQUIRED, Mode.AGENT, accept_edits=True).verdict is Verdict.ASK


async def test_each_file_tool_asks_with_its_diff_and_a_denial_writes_nothing(workspace):
    user = User(workspace)
    for tool, arguments in [
        ("write_file", {"path": "a.txt", "content": "written\n"}),
        ("edit_file", {"path": "a.txt", "old_string": "alpha", "new_string": "edited"}),
        ("apply_patch", {"patch": PATCH}),
    ]:
        result = await user.call(tool, **arguments)
        assert not result.ok and "denied" in result.output
    assert [request.tool for request in user.asked] == ["write_file", "edit_file", "apply_patch"]
    assert all(request.file_change for request in user.asked)
    assert [request.files for request in user.asked] == [("a.txt",), ("a.txt",), ("b.txt",)]
    assert "-alpha" in user.asked[0].preview and "+written" in user.asked[0].preview
    assert (workspace / "a.txt").read_text() == "alpha\n"
    assert (workspace / "b.txt").read_text() == "bee\n"


async def test_the_plan_and_checklist_never_ask(workspace):
    user = User(workspace)
    result = await user.call("update_plan", plan=[{"text": "look", "status": "pending"}])
    assert result.ok and not user.asked


async def test_this_file_covers_later_changes_to_it_and_no_other_file(workspace):
    user = User(workspace, "approve_file")
    await user.call("write_file", path="a.txt", content="one\n")
    await user.call("edit_file", path="a.txt", old_string="one", new_string="two")
    assert len(user.asked) == 1 and user.resolved[0].decision == "approve_file"
    assert (workspace / "a.txt").read_text() == "two\n"
    result = await user.call("write_file", path="b.txt", content="other\n")
    assert len(user.asked) == 2 and not result.ok
    assert (workspace / "b.txt").read_text() == "bee\n"


async def test_accept_edits_reaches_every_agent_sharing_the_switch(workspace):
    """The answer sets the posture on the shared ModeSwitch, so a child stops asking too."""
    modes = ModeSwitch(Mode.AGENT)
    parent = User(workspace, "accept_edits", modes=modes)
    child = User(workspace, modes=modes)
    await parent.call("write_file", path="a.txt", content="parent\n")
    assert modes.accept_edits
    result = await child.call("apply_patch", patch=PATCH)
    assert result.ok and not child.asked
    assert (workspace / "b.txt").read_text() == "BEE\n"
    # Commands still ask under accept edits.
    await child.call("exec_shell", command="touch made")
    assert [request.tool for request in child.asked] == ["exec_shell"]


async def test_a_denial_carries_the_users_words_to_the_model(workspace):
    user = User(workspace, ("deny", "use snake_case please"))
    result = await user.call("write_file", path="a.txt", content="x\n")
    assert not result.ok
    assert "the user denied this write_file call (a.txt) and said: use snake_case please" in (
        result.output
    )
    [resolved] = user.resolved
    assert resolved.decision == "deny" and resolved.message == "use snake_case please"
    assert resolved.to_dict()["message"] == "use snake_case please"
    assert (workspace / "a.txt").read_text() == "alpha\n"


async def test_a_protected_write_asks_on_its_own_even_under_accept_edits(workspace):
    user = User(workspace, modes=ModeSwitch(Mode.AGENT, accept_edits=True))
    result = await user.call("write_file", path=".mcp.json", content="{}\n")
    [request] = user.asked
    assert not request.file_change  # no edit answers: protected files ask every time
    assert not result.ok and not (workspace / ".mcp.json").exists()


async def test_the_terminal_question_shows_a_file_changes_diff(workspace):
    """`exec --approve ask` prints the diff before the question, as the app's dialog shows it."""
    user = User(workspace)
    await user.call("edit_file", path="a.txt", old_string="alpha", new_string="omega")
    question = approval_question(user.asked[0])
    assert question.index("edit_file: a.txt") < question.index("-alpha")
    assert question.index("+omega") < question.index("Allow?")


async def test_the_terminal_offers_a_file_change_the_edit_answers(workspace):
    """As the app's dialog: "this file" and "accept edits" for an edit, and a key that
    does not fit the request denies."""
    user = User(workspace)
    await user.call("edit_file", path="a.txt", old_string="alpha", new_string="omega")
    [request] = user.asked
    assert "Allow? [y] approve once / [f] this file / [e] accept edits / [N]o: " in (
        approval_question(request)
    )
    answers = {typed: decision_from_answer(typed, request) for typed in ("f", "E\n", "a", "")}
    assert answers == {"f": "approve_file", "E\n": "accept_edits", "a": "deny", "": "deny"}
