"""The `/` and `@` completion lists over the composer, and long pastes folded to a token."""

from __future__ import annotations

import shutil
import tempfile
import threading
from pathlib import Path

import pytest
from textual import events

from codewhale.config import load_config
from codewhale.permissions import Mode
from codewhale.tui.app import CodeWhaleApp
from codewhale.tui.completion import CompletionMenu
from codewhale.tui.history import rebuild
from codewhale.tui.paste import PastedMessage, expand
from codewhale.tui.transcript import AssistantMessage, Notice, UserMessage
from tests.support.llm_server import Fault, Reply
from tests.support.settings import TEST_KEY
from tests.tui.conftest import completion_rows, wait_for

FIXED = Path(tempfile.gettempdir()) / "codewhale-snapshot-completion"
PASTE = "".join(f"line {number} of the log\n" for number in range(1, 201))


def highlighted(app: CodeWhaleApp) -> str:
    menu = app.query_one(CompletionMenu)
    assert menu.highlighted is not None
    return str(menu.get_option_at_index(menu.highlighted).prompt)


async def type_text(pilot, text: str) -> None:
    for char in text:
        await pilot.press(char if char != " " else "space")


def paste(app: CodeWhaleApp, text: str) -> None:
    """As a terminal pastes: to the app, which hands it to the focused widget."""
    app.post_message(events.Paste(text))


def add_files(root: Path, *paths: str) -> None:
    for path in paths:
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(f"{path}\n")


async def test_slash_lists_commands_with_their_help_and_enter_picks(make_app, workspace):
    app = make_app(workspace)
    async with app.run_test(size=(120, 30)) as pilot:
        await pilot.click("#composer")
        await pilot.press("/")
        await wait_for(pilot, lambda: len(completion_rows(app)) > 8)
        listed = completion_rows(app)
        assert any(r.startswith("/relay [focus]") and "hand" in r.lower() for r in listed)
        assert highlighted(app) == listed[0]
        await type_text(pilot, "re")
        await wait_for(
            pilot, lambda: completion_rows(app) and all("/re" in r for r in completion_rows(app))
        )
        first = highlighted(app)
        await pilot.press("down")
        assert highlighted(app) != first
        await pilot.press("up")
        assert highlighted(app) == first
        await pilot.press("down")
        chosen = highlighted(app).split()[0]
        await pilot.press("enter")
        assert app.composer.text == f"{chosen} "
        assert completion_rows(app) == []
        assert not app.query(UserMessage)  # picked, not sent
        await app.action_quit()


async def test_a_click_on_a_row_picks_it_and_the_composer_keeps_focus(make_app, workspace):
    app = make_app(workspace)
    async with app.run_test(size=(120, 30)) as pilot:
        await pilot.click("#composer")
        await type_text(pilot, "/re")
        await wait_for(pilot, lambda: len(completion_rows(app)) >= 2)
        second = completion_rows(app)[1].split()[0]
        await pilot.click(CompletionMenu, offset=(3, 2))  # below its top border: row two
        assert app.composer.text == f"{second} "
        assert app.focused is app.composer
        await app.action_quit()


async def test_filtering_narrows_the_list_and_a_full_name_runs_on_enter(make_app, workspace):
    app = make_app(workspace)
    async with app.run_test(size=(120, 30)) as pilot:
        await pilot.click("#composer")
        await type_text(pilot, "/mo")
        await wait_for(pilot, lambda: bool(completion_rows(app)))
        # Names starting with it first, then names holding it.
        assert [r.split()[0] for r in completion_rows(app)] == ["/mode", "/model", "/memory"]
        await type_text(pilot, "de")
        await wait_for(pilot, lambda: [r.split()[0] for r in completion_rows(app)][:1] == ["/mode"])
        await type_text(pilot, "x")  # nothing is called /modex: the list closes
        await wait_for(pilot, lambda: completion_rows(app) == [])
        await pilot.press("backspace")
        await wait_for(pilot, lambda: bool(completion_rows(app)))
        app.composer.clear()
        # Typed in full, the highlighted row is what is typed: Enter runs the command.
        await type_text(pilot, "/help")
        await wait_for(pilot, lambda: bool(completion_rows(app)))
        await pilot.press("enter")
        await wait_for(pilot, lambda: any("/relay" in str(n.render()) for n in app.query(Notice)))
        assert app.composer.text == ""
        await app.action_quit()


async def test_esc_closes_the_list_and_keeps_the_text_and_arrows_recall_history(
    make_app, workspace
):
    app = make_app(workspace)
    async with app.run_test(size=(120, 30)) as pilot:
        app.composer.prompt_history.append("an earlier prompt")
        await pilot.click("#composer")
        await type_text(pilot, "/he")
        await wait_for(pilot, lambda: bool(completion_rows(app)))
        await pilot.press("escape")
        assert completion_rows(app) == []
        assert app.composer.text == "/he"
        # Closed, the arrows recall history as before.
        await pilot.press("up")
        assert app.composer.text == "an earlier prompt"
        await pilot.press("down")
        assert app.composer.text == ""
        # Typing opens it again; so does Tab.
        await type_text(pilot, "/he")
        await wait_for(pilot, lambda: bool(completion_rows(app)))
        await pilot.press("escape")
        await pilot.press("tab")  # one match: picked
        await wait_for(pilot, lambda: app.composer.text == "/help ")
        await app.action_quit()


async def test_at_lists_matching_files_and_the_arrows_choose_one(make_app, workspace):
    add_files(workspace, "src/app.py", "src/application.py", "tests/test_app.py", "README.md")
    app = make_app(workspace)
    async with app.run_test(size=(120, 30)) as pilot:
        await pilot.click("#composer")
        await type_text(pilot, "look at @app")
        await wait_for(pilot, lambda: len(completion_rows(app)) == 3)
        assert set(completion_rows(app)) == {
            "src/app.py",
            "src/application.py",
            "tests/test_app.py",
        }
        assert "README.md" not in completion_rows(app)
        first = highlighted(app)
        await pilot.press("down")
        second = highlighted(app)
        assert second != first
        await pilot.press("enter")
        assert app.composer.text == f"look at @{second} "
        assert completion_rows(app) == []
        await app.action_quit()


async def test_tab_completes_the_common_prefix_then_picks(make_app, workspace):
    add_files(workspace, "docs/guide/intro.md", "docs/guide/install.md")
    app = make_app(workspace)
    async with app.run_test(size=(120, 30)) as pilot:
        await pilot.click("#composer")
        await type_text(pilot, "/ag")
        await wait_for(pilot, lambda: bool(completion_rows(app)))
        await pilot.press("tab")  # /agent and /agents share "agent"
        assert app.composer.text == "/agent"
        assert app.runtime.mode is Mode.AGENT  # Tab completed; it did not change the mode
        app.composer.clear()
        await type_text(pilot, "@docs/g")
        await wait_for(pilot, lambda: len(completion_rows(app)) == 2)
        await pilot.press("tab")
        assert app.composer.text == "@docs/guide/in"
        await pilot.press("s", "tab")  # one match left: Tab picks it
        assert app.composer.text == "@docs/guide/install.md "
        await app.action_quit()


async def test_a_long_paste_folds_in_composer_and_transcript_and_goes_out_in_full(
    llm, make_app, workspace
):
    llm.enqueue(Reply(text="read it"))
    app = make_app(workspace)
    async with app.run_test(size=(120, 30)) as pilot:
        await pilot.click("#composer")
        await type_text(pilot, "why does this fail? ")
        paste(app, PASTE)
        await wait_for(pilot, lambda: "[pasted 200 lines]" in app.composer.text)
        assert app.composer.text == "why does this fail? [pasted 200 lines]"
        await pilot.press("enter")
        await wait_for(pilot, lambda: not app.turn_running and app.query(AssistantMessage))
        sent = llm.requests[-1].json["messages"][-1]["content"]
        assert sent == "why does this fail? " + PASTE
        assert sent.count("of the log") == 200
        [cell] = app.query(PastedMessage)
        assert cell.render().plain == "› why does this fail? [pasted 200 lines]"
        await pilot.click(PastedMessage)
        assert "line 200 of the log" in cell.render().plain
        cell.focus()
        await pilot.press("enter")
        assert cell.render().plain == "› why does this fail? [pasted 200 lines]"
        await app.action_quit()


async def test_each_paste_has_its_own_token_and_a_deleted_token_drops_its_paste(
    llm, make_app, workspace
):
    llm.enqueue(Reply(text="ok"))
    long_line = "x" * 2500
    app = make_app(workspace)
    async with app.run_test(size=(120, 30)) as pilot:
        await pilot.click("#composer")
        for text in (PASTE, long_line, PASTE):
            paste(app, text)
            await pilot.pause()
        await wait_for(pilot, lambda: app.composer.text.count("[pasted") == 3)
        assert app.composer.text == (
            "[pasted 200 lines][pasted 2,500 characters][pasted 200 lines #2]"
        )
        # The first token is edited away: its paste is not sent.
        app.composer.text = app.composer.text.replace("[pasted 200 lines]", "short ")
        app.composer.move_cursor(app.composer.document.end)
        await pilot.press("enter")
        await wait_for(pilot, lambda: not app.turn_running and app.query(AssistantMessage))
        sent = llm.requests[-1].json["messages"][-1]["content"]
        assert sent == "short " + long_line + PASTE
        await app.action_quit()


async def test_a_paste_queued_or_steered_during_a_turn_goes_out_in_full(llm, make_app, workspace):
    # The answer streams until both are typed, however long that takes on a busy machine.
    typed = threading.Event()
    llm.enqueue(
        Reply(text=[f"w{i} " for i in range(10)], fault=Fault.hold(2, until=typed)),
        Reply(text="steered"),
        Reply(text="queued"),
    )
    app = make_app(workspace)
    async with app.run_test(size=(120, 30)) as pilot:
        await pilot.click("#composer")
        await type_text(pilot, "work")
        await pilot.press("enter")
        await wait_for(pilot, lambda: bool(app.query(AssistantMessage)))
        await type_text(pilot, "queue: ")
        paste(app, PASTE)
        await wait_for(pilot, lambda: "[pasted" in app.composer.text)
        assert app.turn_running
        await pilot.press("tab")
        await type_text(pilot, "steer: ")
        paste(app, PASTE)
        await wait_for(pilot, lambda: "[pasted 200 lines #2]" in app.composer.text)
        assert app.turn_running
        await pilot.press("enter")
        typed.set()
        await wait_for(pilot, lambda: len(llm.requests) == 3 and not app.turn_running)
        prompts = [r.json["messages"][-1]["content"] for r in llm.requests[1:]]
        assert prompts == ["steer: " + PASTE, "queue: " + PASTE]
        queued = [
            str(n.render()) for n in app.query(Notice) if str(n.render()).startswith("queued")
        ]
        assert queued == ["queued for after this turn: queue: [pasted 200 lines]"]
        await app.action_quit()


async def test_a_short_paste_is_inserted_as_it_is(make_app, workspace):
    app = make_app(workspace)
    async with app.run_test(size=(120, 30)) as pilot:
        await pilot.click("#composer")
        paste(app, "two\nlines")
        await wait_for(pilot, lambda: app.composer.text == "two\nlines")
        await app.action_quit()


def test_a_resumed_long_message_is_folded_after_its_first_line_and_unfolds_whole():
    typed = "why does this fail?\n" + PASTE
    [cell] = rebuild([{"role": "user", "content": typed}]).widgets
    assert isinstance(cell, PastedMessage)
    assert cell.typed == "why does this fail? [… 200 more lines]"
    assert expand(cell.typed, cell.pastes) == "why does this fail? " + "\n" + PASTE
    [short] = rebuild([{"role": "user", "content": "short\nmessage"}]).widgets
    assert not isinstance(short, PastedMessage)


# -- snapshots ---------------------------------------------------------------------------------


@pytest.fixture
def fixed_app(llm, monkeypatch):
    shutil.rmtree(FIXED, ignore_errors=True)
    FIXED.mkdir()
    add_files(FIXED, "notes.txt", "src/app.py", "src/application.py", "tests/test_app.py")
    monkeypatch.setenv("CODEWHALE_BASE_URL", llm.base_url)
    monkeypatch.setenv("DEEPSEEK_API_KEY", TEST_KEY)
    return lambda: CodeWhaleApp(load_config(workspace=FIXED), FIXED)


def test_snapshot_slash_list(snap_compare, fixed_app):
    app = fixed_app()

    async def run_before(pilot):
        await pilot.click("#composer")
        await type_text(pilot, "/re")
        await wait_for(pilot, lambda: bool(completion_rows(app)))
        await pilot.press("down")
        await pilot.pause(0.1)

    assert snap_compare(app, terminal_size=(100, 24), run_before=run_before)


def test_snapshot_at_list(snap_compare, fixed_app):
    app = fixed_app()

    async def run_before(pilot):
        await pilot.click("#composer")
        await type_text(pilot, "explain @app")
        await wait_for(pilot, lambda: len(completion_rows(app)) == 3)
        await pilot.pause(0.1)

    assert snap_compare(app, terminal_size=(100, 24), run_before=run_before)


def test_snapshot_folded_paste(snap_compare, llm, fixed_app):
    llm.enqueue(Reply(text="It fails at line 200."))
    app = fixed_app()

    async def run_before(pilot):
        await pilot.click("#composer")
        await type_text(pilot, "why? ")
        paste(app, PASTE)
        await wait_for(pilot, lambda: "[pasted" in app.composer.text)
        await pilot.press("enter")
        await wait_for(pilot, lambda: not app.turn_running and app.query(AssistantMessage))
        # A second paste waits in the composer, folded too.
        paste(app, PASTE)
        await wait_for(pilot, lambda: "[pasted" in app.composer.text)
        await pilot.pause(0.1)

    assert snap_compare(app, terminal_size=(100, 24), run_before=run_before)
