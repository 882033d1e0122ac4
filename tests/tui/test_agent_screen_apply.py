"""The agent screen's Apply: an isolated child's changes merged into the work tree."""

from __future__ import annotations

from textual.widgets import Button

from codewhale.permissions import Mode
from codewhale.tui.agent_screen import AgentScreen
from codewhale.tui.transcript import Notice
from tests.support.git_repo import make_repo
from tests.support.llm_server import Reply, ToolCallSpec
from tests.tui.conftest import REPORT, is_child, open_agent_screen, type_and_send, wait_for


def header(screen: AgentScreen) -> str:
    return str(screen.query_one("#agent-header").render())


def delegate(llm, isolation: str) -> None:
    opened = {"prompt": "rewrite the notes", "description": "notes writer", "isolation": isolation}
    llm.enqueue(Reply(tool_calls=[ToolCallSpec("agent_open", opened)]), Reply(text="delegated"))
    llm.respond = lambda body: Reply(text="noted")
    write = ToolCallSpec("write_file", {"path": "notes.txt", "content": "rewritten\n"})
    llm.route(is_child, Reply(tool_calls=[write]), Reply(text=REPORT))


async def test_apply_merges_an_isolated_childs_changes_once(llm, make_app, workspace):
    make_repo(workspace)
    delegate(llm, "worktree")
    app = make_app(workspace)
    async with app.run_test(size=(140, 40)) as pilot:
        app.runtime.set_mode(Mode.YOLO)
        await type_and_send(pilot, "delegate")
        screen = await open_agent_screen(pilot, app)
        await wait_for(pilot, lambda: "completed" in header(screen))
        apply = screen.query_one("#apply", Button)
        await wait_for(pilot, lambda: not apply.disabled)
        assert apply.display
        assert "worktree codewhale/" in header(screen) and "1 file changed, +1 −1" in header(screen)
        # The child wrote in its worktree: the work tree still has the old text.
        assert (workspace / "notes.txt").read_text() == "hello\n"

        await pilot.click("#apply")
        await wait_for(pilot, lambda: (workspace / "notes.txt").read_text() == "rewritten\n")
        await wait_for(pilot, lambda: "applied" in header(screen))
        assert apply.disabled and apply.display
        notices = [str(n.render()) for n in screen.query(Notice)]
        assert any(text.startswith("Applied 1 file changed, +1 −1") for text in notices)
        await app.action_quit()


async def test_apply_is_not_offered_for_a_child_sharing_the_work_tree(llm, make_app, workspace):
    make_repo(workspace)
    delegate(llm, "none")
    app = make_app(workspace)
    async with app.run_test(size=(140, 40)) as pilot:
        app.runtime.set_mode(Mode.YOLO)
        await type_and_send(pilot, "delegate")
        screen = await open_agent_screen(pilot, app)
        await wait_for(pilot, lambda: "completed" in header(screen))
        apply = screen.query_one("#apply", Button)
        assert not apply.display and apply.disabled
        assert "worktree" not in header(screen)
        assert (workspace / "notes.txt").read_text() == "rewritten\n"  # written in place
        await app.action_quit()
