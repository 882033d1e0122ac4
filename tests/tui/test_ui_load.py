"""Keeping up with 20 streaming children: engine events applied to the main screen in
batches (in order, a child's stale stream tails skipped, redraws held while a batch runs,
held back while an agent screen covers it) and keystrokes that leave the completion hint
alone when it does not change."""

from __future__ import annotations

from textual.app import App

from codewhale.permissions import Mode
from codewhale.runtime import events
from codewhale.subagents.events import (
    AgentFinished,
    AgentProgress,
    AgentQueued,
    AgentStarted,
    AgentToolFinished,
    AgentToolStarted,
    AgentUsage,
)
from codewhale.tui import batches
from codewhale.tui.app import CodeWhaleApp, EngineEvent, superseded_by
from codewhale.tui.batches import Batches
from codewhale.tui.completion import CompletionMenu
from codewhale.tui.sidebar import AgentRow
from codewhale.tui.transcript import AgentCell
from tests.support.llm_server import Fault, Reply, ToolCallSpec
from tests.tui.conftest import REPORT, completion_rows, is_child, type_and_send, wait_for


class Recorder:
    """Applies items by writing down the item and whether the app's redraws were held."""

    def __init__(self, app: App) -> None:
        self.app = app
        self.applied: list[str] = []
        self.held: list[bool] = []

    async def __call__(self, item: str) -> None:
        self.applied.append(item)
        self.held.append(self.app._batch_count > 0)


async def test_a_batch_keeps_the_order_and_skips_what_a_later_item_supersedes():
    app = App()
    async with app.run_test():
        recorder = Recorder(app)
        queue = Batches(app, recorder)
        queue.add("tail a1", supersedes="a")
        queue.add("queued b")
        queue.add("tail a2", supersedes="a")
        queue.add("tail b1", supersedes="b")
        queue.add("finished c")
        await queue.applied()
        assert recorder.applied == ["queued b", "tail a2", "tail b1", "finished c"]
        assert all(recorder.held)


async def test_a_long_backlog_is_applied_over_several_batches_in_order(monkeypatch):
    monkeypatch.setattr(batches, "BATCH_SECS", 0.0)  # one item per batch
    app = App()
    async with app.run_test():
        recorder = Recorder(app)
        queue = Batches(app, recorder)
        for number in range(5):
            queue.add(f"item {number}")
        await queue.applied()
        assert recorder.applied == [f"item {number}" for number in range(5)]


async def test_items_wait_while_not_ready_and_come_on_resume():
    app = App()
    async with app.run_test() as pilot:
        recorder = Recorder(app)
        shown = False
        queue = Batches(app, recorder, ready=lambda: shown)
        queue.add("while hidden")
        await queue.applied()  # nothing to wait for while they cannot be applied
        await pilot.pause(0.1)
        assert recorder.applied == []
        shown = True
        queue.resume()
        await queue.applied()
        assert recorder.applied == ["while hidden"]


async def test_applied_waits_only_for_the_items_added_before_it():
    app = App()
    async with app.run_test() as pilot:
        recorder = Recorder(app)
        queue = Batches(app, recorder)
        queue.add("first")
        waiting = queue.applied()
        queue.add("second")
        await waiting
        assert recorder.applied[0] == "first"
        await pilot.pause()


def test_a_childs_later_event_replaces_only_one_that_marks_the_same_thing():
    key = superseded_by
    started = AgentStarted(seq=1, agent_id="a", message="")
    tool = AgentToolStarted(seq=2, agent_id="a", tool="read_file")
    tool_done = AgentToolFinished(seq=3, agent_id="a", tool="read_file", ok=True)
    tail = AgentProgress(seq=4, agent_id="a", message="writing", text_tail="line 1")
    status = AgentProgress(seq=5, agent_id="a", message="waiting for approval")
    usage = AgentUsage(seq=6, agent_id="a", input=1, output=1, cache_hit=0, cache_miss=1)
    # What it runs now: the footer shows the last tool started (a finished one does not
    # change it, so it replaces nothing of it).
    assert key(started) == key(tool) != key(tool_done)
    assert len({key(tool), key(tool_done), key(tail), key(status), key(usage)}) == 5
    assert key(tool) != key(AgentToolStarted(seq=7, agent_id="b", tool="read_file"))
    # Cells mounted and settled are never skipped.
    assert key(AgentQueued(seq=8, agent_id="a", message="")) is None
    assert key(AgentFinished(seq=9, agent_id="a", status="completed", message="")) is None
    assert key(events.TurnComplete(status="completed", steps=1, usage={})) is None


async def test_a_burst_of_stream_tails_shows_the_last_one(llm, make_app, workspace, monkeypatch):
    tails: list[str] = []
    apply = CodeWhaleApp._apply_engine_event

    async def counting(self: CodeWhaleApp, event: events.Event) -> None:
        if isinstance(event, AgentProgress) and event.text_tail.startswith("line"):
            tails.append(event.text_tail)
        await apply(self, event)

    monkeypatch.setattr(CodeWhaleApp, "_apply_engine_event", counting)
    llm.route(is_child, Reply(fault=Fault.stall(seconds=30)))
    llm.enqueue(Reply(tool_calls=[ToolCallSpec("agent_open", {"prompt": "wait"})]))
    llm.respond = lambda body: Reply(text="noted")
    app = make_app(workspace)
    async with app.run_test(size=(140, 40)) as pilot:
        await type_and_send(pilot, "delegate")
        await wait_for(pilot, lambda: bool(app.query(AgentRow)))
        agent_id = app.query_one(AgentRow).agent_id
        for seq in range(50):
            progress = AgentProgress(
                seq=20_000 + seq, agent_id=agent_id, message="writing", text_tail=f"line {seq}"
            )
            app.post_message(EngineEvent(progress))
        await wait_for(pilot, lambda: "│ line 49" in str(app.query_one(AgentCell).render()))
        # Posted together, they wait in one batch: the stale tails are never applied.
        assert tails[-1] == "line 49" and len(tails) < 50
        await app.action_quit()


async def test_typing_plain_words_leaves_the_completion_list_alone(make_app, workspace):
    app = make_app(workspace)
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_for(pilot, lambda: app.runtime is not None)
        menu = app.query_one(CompletionMenu)
        rebuilds: list[int] = []
        clear_options = menu.clear_options

        def counting() -> CompletionMenu:
            rebuilds.append(menu.option_count)
            return clear_options()

        menu.clear_options = counting  # type: ignore[method-assign]
        await pilot.click("#composer")
        for char in "plain words":
            await pilot.press(char if char != " " else "space")
        # The list was closed and stays closed: nothing is rebuilt or laid out.
        assert rebuilds == [] and not menu.display
        app.composer.clear()
        await pilot.press("slash")
        await wait_for(pilot, lambda: bool(completion_rows(app)))
        assert any(row.startswith("/help") for row in completion_rows(app))
        await app.action_quit()


async def test_the_main_screen_catches_up_when_an_agent_screen_closes(llm, make_app, workspace):
    from codewhale.tui.agent_screen import AgentScreen

    llm.route(is_child, Reply(text=REPORT, request_delay=0.5))
    llm.enqueue(Reply(tool_calls=[ToolCallSpec("agent_open", {"prompt": "job"})]))
    llm.respond = lambda body: Reply(text="noted")
    app = make_app(workspace)
    async with app.run_test(size=(140, 40)) as pilot:
        await type_and_send(pilot, "delegate")
        await wait_for(pilot, lambda: bool(app.query(AgentRow)))
        row = app.query_one(AgentRow)
        await pilot.click(f"#{row.id}")
        await wait_for(pilot, lambda: isinstance(app.screen, AgentScreen))
        header = app.screen.query_one("#agent-header")
        await wait_for(pilot, lambda: "completed" in str(header.render()))
        await pilot.pause(0.2)
        # Unseen under the agent screen, the main screen is left as it was...
        assert "✓" not in str(row.render())
        await pilot.press("escape")
        # ...and brought up to date once it shows again.
        await wait_for(pilot, lambda: "✓" in str(row.render()))
        cell = app.query_one(AgentCell)
        await wait_for(pilot, lambda: "└ completed" in str(cell.render()))
        await app.action_quit()


async def test_an_agent_screen_draws_a_burst_of_deltas_together_and_in_order(
    llm, make_app, workspace, monkeypatch
):
    from codewhale.tui.agent_screen import AgentScreen
    from codewhale.tui.answer import AssistantMessage
    from codewhale.tui.transcript import ToolCell

    (workspace / "notes.txt").write_text("hello\n")
    words = [f"w{number} " for number in range(40)]
    llm.route(
        is_child,
        # Streamed after the screen is open: forty deltas, then a tool call, then more text.
        Reply(
            text=words,
            tool_calls=[ToolCallSpec("read_file", {"path": "notes.txt"})],
            request_delay=1.0,
        ),
        Reply(text=["after ", "the read"]),
        Reply(text=REPORT),
    )
    llm.enqueue(Reply(tool_calls=[ToolCallSpec("agent_open", {"prompt": "job"})]))
    llm.respond = lambda body: Reply(text="noted")
    fragments: list[str] = []
    add_fragment = AssistantMessage.add_fragment

    async def recording(self, fragment: str) -> None:
        if isinstance(self.screen, AgentScreen):
            fragments.append(fragment)
        await add_fragment(self, fragment)

    monkeypatch.setattr(AssistantMessage, "add_fragment", recording)
    app = make_app(workspace)
    async with app.run_test(size=(140, 40)) as pilot:
        app.runtime.set_mode(Mode.YOLO)
        await type_and_send(pilot, "delegate")
        await wait_for(pilot, lambda: bool(app.query(AgentRow)))
        await pilot.click(f"#{app.query_one(AgentRow).id}")
        await wait_for(pilot, lambda: isinstance(app.screen, AgentScreen))
        screen = app.screen
        header = screen.query_one("#agent-header")
        await wait_for(pilot, lambda: "completed" in str(header.render()))
        await wait_for(pilot, lambda: len(screen.query(AssistantMessage)) >= 3)
        cells = [
            cell
            for cell in screen.query("#agent-transcript > *")
            if isinstance(cell, AssistantMessage | ToolCell)
        ]
        # All of it, in order, the tool call between the two answers...
        assert "".join(fragments).startswith("".join(words) + "after the read")
        assert [type(cell) for cell in cells[:3]] == [AssistantMessage, ToolCell, AssistantMessage]
        assert cells[0].source.strip() == "".join(words).strip()
        assert cells[2].source == "after the read"
        # ...and the burst drawn in fewer steps than it had deltas.
        assert len(fragments) < len(words)
        await app.action_quit()
