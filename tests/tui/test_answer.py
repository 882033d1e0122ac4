"""A replayed answer builds its Markdown blocks as it is composed (they mount with it), and
shows exactly what Textual's own Markdown shows for the same text."""

from __future__ import annotations

from textual.app import App, ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Markdown
from textual.widgets.markdown import MarkdownBlock, MarkdownFence

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


# A long answer: each section has a heading, a paragraph, lists, a fence, a table, a quote.
SECTION = """## Part {n}

Checked `calc_{n}.py` and **fixed** the rounding, which had drifted from the spec; the new \
code keeps *negative* values stable and says so in [the log](https://example.com/{n}).

- `round_half_up` now handles negatives
- the tests for part {n} pass
  - the nested case too

1. read the file
2. change the helper

```python
def helper_{n}(value):

    return int(value + 0.5)
```

| case | before | after |
|------|--------|-------|
| 2.5  | 2      | 3     |
| {n}  | {n}    | {n}   |

> Part {n} keeps the old behaviour behind a flag.

"""
LONG_ANSWER = "".join(SECTION.format(n=n) for n in range(12))


async def stream_into(answer: AssistantMessage, pilot, text: str, piece: int = 9) -> None:
    """Stream `text` in pieces, letting frames be drawn now and then, and finish it."""
    for count, at in enumerate(range(0, len(text), piece)):
        await answer.add_fragment(text[at : at + piece])
        if count % 25 == 0:
            await pilot.pause()
    await answer.finish()
    await settle(answer, pilot)


async def settle(answer: AssistantMessage, pilot) -> None:
    """Until the answer has measured and placed its blocks for the current view."""
    stream = answer.stream
    assert stream is not None
    for _ in range(50):
        await pilot.pause()
        if stream.settled:
            await pilot.pause()
            return
    raise AssertionError("the answer never settled")


async def pages(app: Holder, pilot, answer: Markdown | None = None) -> list[str]:
    """Screenshots of the whole answer, a view at a time from the top."""
    scroller = app.query_one(VerticalScroll)
    shots = []
    y = 0
    while True:
        scroller.scroll_to(y=y, animate=False, immediate=True)
        if isinstance(answer, AssistantMessage):
            await settle(answer, pilot)
        else:
            await pilot.pause()
        shots.append(app.export_screenshot())
        if y >= scroller.max_scroll_y:
            return shots
        y = min(y + scroller.size.height - 1, int(scroller.max_scroll_y))


async def test_a_long_streamed_answer_ends_up_as_textuals_markdown_of_the_whole_text():
    answer = AssistantMessage()
    app = Holder(answer)
    async with app.run_test(size=SIZE) as pilot:
        await stream_into(answer, pilot, LONG_ANSWER)
        assert answer.answer == answer.source == LONG_ANSWER
        # Only the blocks near the view are mounted; spacers stand for the rest...
        blocks = [child for child in answer.children if isinstance(child, MarkdownBlock)]
        assert answer.stream is not None
        assert len(blocks) < answer.stream.finished == 12 * 7
        # ...and scrolled through once (which measures what was only estimated)...
        await pages(app, pilot, answer)
        ours = await pages(app, pilot, answer)
    reference = Holder(Markdown(LONG_ANSWER))
    async with reference.run_test(size=SIZE) as pilot:
        textuals = await pages(reference, pilot)
    # ...every view of it is what Textual's Markdown shows for the whole text.
    assert len(ours) == len(textuals) > 10
    for page, (mine, theirs) in enumerate(zip(ours, textuals, strict=True)):
        assert mine == theirs, f"view {page} differs"


async def test_finished_blocks_are_not_parsed_or_built_again():
    text = "".join(SECTION.format(n=n) for n in range(3))
    answer = AssistantMessage()
    app = Holder(answer)
    async with app.run_test(size=(80, 150)) as pilot:  # the whole answer in view
        await stream_into(answer, pilot, text, piece=5)
        stream = answer.stream
        assert stream is not None
        # Parsed a block at a time: about a parse of the open block per frame, far less
        # than the whole text parsed again each frame (Markdown.append's way)...
        assert stream.splitter.parsed_chars < 40 * len(text)
        # ...and never a finished block's widget built twice: all 21 are mounted, built once.
        assert stream.rebuilt == 0
        assert stream.mounted == stream.finished == 21
        shown = app.export_screenshot()
    reference = Holder(Markdown(text))
    async with reference.run_test(size=(80, 150)) as pilot:
        await pilot.pause()
        assert shown == reference.export_screenshot()


async def test_a_fence_left_open_then_closed_renders_right():
    opened = "Before the code.\n\n```python\ndef f():\n\n    # not a heading\n\n    return 1\n"
    closed = opened + "```\n\nAfter the code.\n"
    shots = []
    answer = AssistantMessage()
    app = Holder(answer)
    async with app.run_test(size=SIZE) as pilot:
        await stream_into_open(answer, pilot, opened)
        shots.append(app.export_screenshot())
        assert len(answer.query(MarkdownFence)) == 1  # the blank lines are the fence's
        await answer.add_fragment(closed[len(opened) :])
        await answer.finish()
        await settle(answer, pilot)
        shots.append(app.export_screenshot())
    for text, shot in zip((opened, closed), shots, strict=True):
        reference = Holder(Markdown(text))
        async with reference.run_test(size=SIZE) as pilot:
            await pilot.pause()
            assert shot == reference.export_screenshot()


async def stream_into_open(answer: AssistantMessage, pilot, text: str) -> None:
    """Stream `text` a few characters at a time, and let it be drawn, unfinished."""
    for at in range(0, len(text), 4):
        await answer.add_fragment(text[at : at + 4])
        await pilot.pause()
    await settle(answer, pilot)


async def test_a_link_defined_after_its_use_is_a_link_once_the_answer_ends():
    text = "See [the spec][spec] first.\n\nThen the rest.\n\n[spec]: https://example.com/spec\n"
    answer = AssistantMessage()
    app = Holder(answer)
    async with app.run_test(size=SIZE) as pilot:
        await stream_into(answer, pilot, text, piece=3)
        shown = app.export_screenshot()
        assert "[the spec]" not in str(answer.children[0].render())
    reference = Holder(Markdown(text))
    async with reference.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert shown == reference.export_screenshot()
