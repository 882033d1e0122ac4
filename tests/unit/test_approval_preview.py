"""An approval for a file write carries the diff it would make, worked out without writing."""

from __future__ import annotations

import json

from codewhale.engine import events
from codewhale.engine.dispatch import ToolDispatcher
from codewhale.permissions import ApprovalClass
from codewhale.providers.types import ToolCall
from codewhale.tools.base import ToolContext
from codewhale.tools.edit import EditFile
from codewhale.tools.files import WriteFile
from codewhale.tools.patch import ApplyPatch
from codewhale.tools.registry import ToolRegistry
from codewhale.tools.shell import ExecShell

PATCH = (
    "--- a/calc.py\n+++ b/calc.py\n@@ -1,2 +1,2 @@\n"
    " def add(a, b):\n-    return a - b\n+    return a + b\n"
)


# As a setup whose writes ask first would offer them (Agent mode lets writes run).
class AskingWrite(WriteFile):
    approval = ApprovalClass.REQUIRED


class AskingEdit(EditFile):
    approval = ApprovalClass.REQUIRED


class AskingPatch(ApplyPatch):
    approval = ApprovalClass.REQUIRED


async def ask(workspace, name: str, arguments: dict) -> tuple[events.ApprovalRequested, bool]:
    """The approval the call raises, denied; and whether the call then succeeded."""
    requests: list[events.ApprovalRequested] = []

    def emit(event: events.Event) -> None:
        if isinstance(event, events.ApprovalRequested):
            requests.append(event)
            event.resolve("deny")

    tools = ToolRegistry([AskingWrite(), AskingEdit(), AskingPatch(), ExecShell()])
    dispatcher = ToolDispatcher(tools, ToolContext(workspace=workspace, session_id="s"), emit)
    [outcome] = await dispatcher.run([ToolCall("c1", name, json.dumps(arguments))])
    [request] = requests
    return request, outcome.result.ok


async def test_write_file_shows_the_file_against_its_new_content(tmp_path):
    (tmp_path / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    content = "def add(a, b):\n    return a + b\n"
    request, ok = await ask(tmp_path, "write_file", {"path": "calc.py", "content": content})
    assert not ok
    assert request.preview == PATCH
    assert (tmp_path / "calc.py").read_text() == "def add(a, b):\n    return a - b\n"


async def test_write_file_of_a_new_file_shows_every_line_added(tmp_path):
    request, _ = await ask(tmp_path, "write_file", {"path": "new/one.txt", "content": "a\nb\n"})
    assert request.preview.splitlines()[-2:] == ["+a", "+b"]
    assert not (tmp_path / "new").exists()


async def test_edit_file_applies_the_edit_in_memory_with_the_same_matching(tmp_path):
    (tmp_path / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    # Spacing and indentation differ from the file's: run()'s tolerant matching finds it.
    arguments = {"path": "calc.py", "old_string": "return  a - b", "new_string": "return a + b"}
    request, _ = await ask(tmp_path, "edit_file", arguments)
    assert request.preview == PATCH
    assert (tmp_path / "calc.py").read_text() == "def add(a, b):\n    return a - b\n"


async def test_an_edit_that_would_fail_says_so_in_the_preview(tmp_path):
    (tmp_path / "calc.py").write_text("x = 1\n")
    arguments = {"path": "calc.py", "old_string": "y = 2", "new_string": "y = 3"}
    request, _ = await ask(tmp_path, "edit_file", arguments)
    assert request.preview.startswith("Dry run: this call would fail as it stands:")
    assert "old_string was not found" in request.preview


async def test_apply_patch_shows_the_patch(tmp_path):
    (tmp_path / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    request, _ = await ask(tmp_path, "apply_patch", {"patch": PATCH})
    assert request.preview == PATCH
    assert request.summary == "1 file(s)"


async def test_a_shell_command_has_the_whole_command_and_no_preview(tmp_path):
    command = "make build && ./deploy.sh " + "--flag " * 400
    request, _ = await ask(tmp_path, "exec_shell", {"command": command})
    assert request.summary == command
    assert request.preview == ""
    assert "preview" in request.to_dict()
