"""/diff: the session's file changes, made by real tool calls from the loopback model (the
parent's and a child's), listed file by file with their diffs."""

from __future__ import annotations

from rich.syntax import Syntax
from textual.widgets import OptionList, Static

from codewhale.permissions import Mode
from codewhale.tui.diff_screen import NO_CHANGES, DiffScreen
from codewhale.tui.transcript import Notice
from tests.support.git_repo import make_repo
from tests.support.llm_server import Reply, ToolCallSpec
from tests.tui.conftest import REPORT, is_child, type_and_send, wait_for


def script_edits(llm) -> None:
    """The parent edits notes.txt, creates two files and opens a child that writes one."""
    llm.enqueue(
        Reply(
            tool_calls=[
                ToolCallSpec(
                    "edit_file",
                    {"path": "notes.txt", "old_string": "hello", "new_string": "hello, world"},
                    id="c1",
                ),
                ToolCallSpec(
                    "write_file",
                    {"path": "src/app.py", "content": "def main():\n    return 42\n"},
                    id="c2",
                ),
                ToolCallSpec("write_file", {"path": "logo.bin", "content": "GIF\x00\x01"}, id="c3"),
                ToolCallSpec("agent_open", {"prompt": "add a readme"}, id="c4"),
            ]
        ),
        Reply(text="edited; the child writes the readme"),
    )
    llm.respond = lambda body: Reply(text="noted")
    readme = ToolCallSpec("write_file", {"path": "README.md", "content": "# Demo\n\nRun it.\n"})
    llm.route(is_child, Reply(tool_calls=[readme]), Reply(text=REPORT))


async def edit_and_open_diff(pilot, app, workspace) -> DiffScreen:
    app.runtime.set_mode(Mode.YOLO)  # the edits run without an approval dialog
    await type_and_send(pilot, "edit things")
    await wait_for(pilot, lambda: (workspace / "README.md").exists())
    await wait_for(
        pilot,
        lambda: not app.turn_running and all(a.status == "completed" for a in app.runtime.agents()),
    )
    await type_and_send(pilot, "/diff")
    await wait_for(pilot, lambda: isinstance(app.screen, DiffScreen))
    screen = app.screen
    assert isinstance(screen, DiffScreen)
    await pilot.pause()
    return screen


def rows(screen: DiffScreen) -> list[str]:
    files = screen.query_one("#diff-files", OptionList)
    return [str(files.get_option_at_index(i).prompt) for i in range(files.option_count)]


def shown_diff(screen: DiffScreen) -> str:
    """The right-hand pane's text: a diff (Rich Syntax) or the note (Rich Text)."""
    content = screen.query_one("#diff-body", Static).content
    return content.code if isinstance(content, Syntax) else str(content)


async def test_diff_lists_parent_and_child_changes_and_esc_returns_to_the_composer(
    llm, make_app, workspace
):
    script_edits(llm)
    app = make_app(workspace)
    async with app.run_test(size=(120, 30)) as pilot:
        screen = await edit_and_open_diff(pilot, app, workspace)
        assert rows(screen) == [
            "A README.md  Moby  +3 −0",
            "A logo.bin  parent  binary, 5 bytes",
            "M notes.txt  parent  +1 −1",
            "A src/app.py  parent  +2 −0",
        ]
        assert "Session changes · 4 files · +6 −1" in str(
            screen.query_one("#diff-header", Static).content
        )

        assert screen.query_one("#diff-files").has_focus
        await pilot.press("down", "down")
        await wait_for(pilot, lambda: "+hello, world" in shown_diff(screen))
        assert "-hello" in shown_diff(screen).splitlines()
        await pilot.press("up")
        await wait_for(pilot, lambda: "logo.bin: binary, 5 bytes" in shown_diff(screen))

        await pilot.press("escape")
        await wait_for(pilot, lambda: not isinstance(app.screen, DiffScreen))
        assert app.composer.has_focus
        await app.action_quit()


async def test_diff_with_no_changes_says_so_instead_of_opening(llm, make_app, workspace):
    app = make_app(workspace)
    async with app.run_test(size=(120, 30)) as pilot:
        await type_and_send(pilot, "/diff")
        await wait_for(pilot, lambda: any(NO_CHANGES in str(n.render()) for n in app.query(Notice)))
        assert not isinstance(app.screen, DiffScreen)
        await type_and_send(pilot, "/diff src")
        await wait_for(
            pilot, lambda: any("usage: /diff" in str(n.render()) for n in app.query(Notice))
        )
        await app.action_quit()


async def test_an_isolated_childs_changes_are_listed_once_applied(llm, make_app, workspace):
    make_repo(workspace)
    opened = {"prompt": "rewrite the notes", "isolation": "worktree"}
    llm.enqueue(Reply(tool_calls=[ToolCallSpec("agent_open", opened)]), Reply(text="delegated"))
    llm.respond = lambda body: Reply(text="noted")
    write = ToolCallSpec("write_file", {"path": "notes.txt", "content": "rewritten\n"})
    llm.route(is_child, Reply(tool_calls=[write]), Reply(text=REPORT))
    app = make_app(workspace)
    async with app.run_test(size=(120, 30)) as pilot:
        app.runtime.set_mode(Mode.YOLO)
        await type_and_send(pilot, "delegate")
        await wait_for(
            pilot,
            lambda: (
                not app.turn_running and [a.status for a in app.runtime.agents()] == ["completed"]
            ),
        )
        # Written in its worktree only: not yet a change to this work tree.
        assert await app.runtime.changes() == []

        await app.runtime.apply_agent(app.runtime.agents()[0].agent_id)
        assert (workspace / "notes.txt").read_text() == "rewritten\n"
        [change] = await app.runtime.changes()
        assert (change.path, change.authors, change.status) == ("notes.txt", ("Moby",), "modified")
        assert {"-hello", "+rewritten"} <= set(change.diff.splitlines())
        await app.action_quit()


def test_snapshot_diff_screen(snap_compare, llm, make_app, workspace):
    script_edits(llm)
    app = make_app(workspace)

    async def run_before(pilot):
        await edit_and_open_diff(pilot, app, workspace)
        await pilot.press("down", "down")
        await pilot.pause(0.1)

    assert snap_compare(app, terminal_size=(110, 24), run_before=run_before)
