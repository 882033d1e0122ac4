"""A replayed answer builds its Markdown blocks as it is composed (they mount with it), and
shows exactly what Textual's own Markdown shows for the same text."""

from __future__ import annotations

from textual.app import App, ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Markdown
from textual.widgets.markdown import MarkdownFence

from codewhale.tui.answer import AssistantMessage
from tests.tui.conftest import Layouts

ANSWER = """## Step 7

Checked `calc.py` and **fixed** the rounding:

- `round_half_up` now handles negatives
- the tests pass

```python
def round_half_up(x):
    return math.floor(x + 0.5)
```
"""
SIZE = (80, 24)


class Holder(App[None]):
    def __init__(self, cell: Markdown) -> None:
        super().__init__()
        self.cell = cell

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield self.cell


class Watched(AssistantMessage):
    def on_mount(self) -> None:
        # Runs before Markdown's own mount handler, which parsed and mounted the blocks.
        self.blocks_at_mount = len(self.children)


async def test_a_replayed_answer_mounts_with_its_blocks():
    answer = Watched(ANSWER)
    app = Holder(Markdown())
    async with app.run_test(size=SIZE):
        await app.query_one(VerticalScroll).mount(answer)
        # Built as it was composed: there when it mounts, not mounted after a parse.
        assert answer.blocks_at_mount == len(answer.children) > 0
        assert answer.query_one("MarkdownH2") is answer.children[0]
        assert answer.query(MarkdownFence)
        assert answer.source == ANSWER
        assert [title for _, title, _ in answer.table_of_contents] == ["Step 7"]


async def test_it_shows_what_textuals_markdown_shows():
    screens = []
    for cell in (AssistantMessage(ANSWER), Markdown(ANSWER)):
        app = Holder(cell)
        async with app.run_test(size=SIZE) as pilot:
            await pilot.pause()
            screens.append(app.export_screenshot())
    assert screens[0] == screens[1]


async def test_an_update_replaces_the_composed_blocks():
    answer = AssistantMessage(ANSWER)
    app = Holder(answer)
    async with app.run_test(size=SIZE) as pilot:
        await answer.update("Just **one** line now.")
        await pilot.pause()
        assert not answer.query(MarkdownFence) and not answer.query("MarkdownH2")
        assert answer.source == "Just **one** line now."
        assert "Just one line now." in str(answer.children[0].render())


async def test_a_streamed_answer_still_streams():
    answer = AssistantMessage()
    app = Holder(answer)
    async with app.run_test(size=SIZE) as pilot:
        assert not answer.children
        await answer.add_fragment("## Step 7\n\nfirst part")
        await answer.add_fragment(", second part")
        await answer.finish()
        await pilot.pause()
        assert answer.answer == "## Step 7\n\nfirst part, second part"
        assert answer.query("MarkdownH2")


async def streamed(cell: Markdown, words: list[str]) -> tuple[str, int]:
    """What the screen shows once `words` streamed into `cell`, and the layouts that took."""
    app = Holder(cell)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        layouts = Layouts(app.screen)
        stream = Markdown.get_stream(cell)
        for word in words:
            await stream.write(word)
            await pilot.pause()
        await stream.stop()
        await pilot.pause()
        return app.export_screenshot(), layouts.count


async def test_a_streaming_paragraph_lays_the_screen_out_only_when_it_gains_a_row():
    words = [f"word{i} " for i in range(60)]  # six rows at 80 columns
    ours, our_layouts = await streamed(AssistantMessage(), words)
    textuals, their_layouts = await streamed(Markdown(), words)
    # Every row it grew by is on the screen, as Textual's own Markdown shows it...
    assert ours == textuals
    # ...with a layout per row gained (and a few to start), not one per update.
    assert 3 * our_layouts < len(words) <= their_layouts
