"""An answer in the conversation, rendered as Markdown.

Apart from the transcript's other cells because Textual's Markdown widget (with
markdown-it) is a good share of the app's imports: it loads with the first answer, or
once the session is open, never before the first frame (tests/unit/test_startup.py).

A streamed answer is parsed a block at a time (tui/markdown_split.py): at most once a
frame, only the still open block is parsed again and its widget updated; a finished
block's widget is never rebuilt. Textual's own Markdown stream re-splits the whole text
on each update, and every mounted widget costs time in each layout of the screen, so
only the finished blocks near the view stay mounted (tui/block_column.py): a spacer of
their height stands for the others, which are built again from their source when the
view comes near them.
"""

from __future__ import annotations

from markdown_it.token import Token
from textual.app import ComposeResult
from textual.await_complete import AwaitComplete
from textual.content import Content
from textual.visual import VisualType
from textual.widget import AwaitMount, Widget
from textual.widgets import Markdown
from textual.widgets._markdown import (  # not exported; Markdown.BLOCKS's
    MarkdownHeader,
    MarkdownParagraph,
)
from textual.widgets.markdown import MarkdownBlock, MarkdownFence

from codewhale.sanitize import clean_text
from codewhale.tui.block_column import Column, estimate
from codewhale.tui.markdown_split import Block, BlockSplitter, parser
from codewhale.tui.sidebar import laid_out_size, lay_out_if_resized
from codewhale.tui.status import Coalescer


class StreamedParagraph(MarkdownParagraph):
    """A paragraph that has the screen laid out again only when its height changes.

    A streaming answer's last paragraph is updated every frame, mostly with a few words on
    the row it already has; a layout of the whole screen each time was most of what a
    screen showing one streaming child cost.
    """

    def update(self, content: VisualType = "", *, layout: bool = True) -> None:
        size = laid_out_size(self)
        super().update(content, layout=False)
        if layout:
            lay_out_if_resized(self, size)

    def _token_to_content(self, token: Token) -> Content:
        """In a transcript that keeps line breaks, a single newline is one (Markdown's soft
        break is a space: a report's SUMMARY, CHANGES, … lines ran into one paragraph)."""
        children = token.children
        if children and getattr(self._markdown.parent, "keep_line_breaks", False):
            token = token.copy()
            token.children = [
                child.copy(type="hardbreak") if child.type == "softbreak" else child
                for child in children
            ]
        return super()._token_to_content(token)


class Unmounted(Widget):
    """Stands for finished blocks that are not mounted, as tall as they are together."""

    DEFAULT_CSS = """
    Unmounted {
        width: 1fr;
        height: 0;
        margin: 0;
    }
    """


class AssistantMessage(Markdown):
    """An answer: built whole from `text` (a replayed answer), or streamed.

    Built with `text` it never streams, and its blocks are built as it is composed: they
    mount with the cell, in the batch that mounts it, not in a second mount (and layout)
    after a parse in a thread.
    """

    BLOCKS: dict[str, type[MarkdownBlock]] = {  # noqa: RUF012 (declared so by Markdown)
        **Markdown.BLOCKS,
        "paragraph_open": StreamedParagraph,
    }

    def __init__(self, text: str = "") -> None:
        super().__init__(clean_text(text))
        self._answer = [text]  # as it came; joined when asked for
        # The source composed blocks show; "" for a streamed answer, so that Markdown's
        # mount (an update with the empty text) leaves its streamed blocks alone.
        self._composed: str | None = self._initial_markdown
        self._stream: Stream | None = None

    @property
    def answer(self) -> str:
        if len(self._answer) > 1:
            self._answer = ["".join(self._answer)]
        return self._answer[0]

    @property
    def source(self) -> str:
        return self._stream.source if self._stream is not None else super().source

    @property
    def stream(self) -> Stream | None:
        """The streamed answer's blocks (None: built whole, or nothing streamed yet)."""
        return self._stream

    def compose(self) -> ComposeResult:
        source = self._initial_markdown
        if source:
            yield from self._build_from_source(source)

    def update(self, markdown: str) -> AwaitComplete:
        composed, self._composed = self._composed, None
        if composed is not None and markdown == composed:
            # Markdown's mount shows its source: here, what compose built already (for a
            # streamed answer, nothing), whether or not the stream has begun.
            return AwaitComplete(self._composed_update(markdown))
        if self._stream is not None:  # shown as a streamed answer is, in one piece
            return AwaitComplete(self._stream.replace(markdown))
        return super().update(markdown)

    async def _composed_update(self, markdown: str) -> None:
        """What Markdown.update leaves behind, but the blocks, which are there. (Textual's
        Markdown internals as of 8.x; tests/tui/test_answer.py compares the result with
        Textual's own rendering.)"""
        self._theme = self.app.theme
        self._markdown = markdown
        self._table_of_contents = None
        lines = markdown.splitlines()
        self._last_parsed_line = len(lines) - (1 if lines and lines[-1] else 0)
        self.post_message(
            Markdown.TableOfContentsUpdated(self, self.table_of_contents).set_sender(self)
        )

    async def add_fragment(self, fragment: str) -> None:
        # Not `append`: that is Markdown's, which re-splits the whole text each time.
        if self._stream is None:
            self._stream = Stream(self)
        self._answer.append(fragment)
        self._stream.feed(clean_text(fragment))

    async def finish(self, suffix: str = "", *, content: str | None = None) -> None:
        """End the stream; `content` (the whole answer) replaces what streamed if they differ."""
        if self._stream is None:
            self._stream = Stream(self)
        if content and content != self.answer:
            # Deltas were missed (an agent screen opened mid-answer): show the whole answer.
            self._answer = [content]
            await self._stream.replace(clean_text(content) + suffix)
            return
        self._stream.feed(suffix)
        await self._stream.close()

    def on_resize(self) -> None:
        if self._stream is not None:
            self._stream.place_soon()


class Stream:
    """The blocks of a streamed answer: finished ones, mounted or not, and the open ones."""

    def __init__(self, cell: AssistantMessage) -> None:
        self._cell = cell
        self._shown: list[str] = []  # the text shown; joined when asked for
        self._renders = Coalescer(cell, self._render)
        self._placing = False
        self._watched: Widget | None = None
        self.rebuilt = 0  # finished blocks built again from their source, for the tests
        self._reset(BlockSplitter(), {})

    def _reset(self, splitter: BlockSplitter, references: dict) -> None:
        self._splitter = splitter
        self._references = references
        self._open: list[MarkdownBlock] = []
        # Finished blocks: their source and first line, where they sit, which are mounted.
        self._sources: list[tuple[str, int]] = []
        self._prefix = ("", 0)  # source (and its line) of blocks that show nothing, so far
        self._column = Column()
        self._mounted: dict[int, MarkdownBlock] = {}
        self._spacers: list[Widget] = []
        self._spacer_heights: list[int] = []
        self._runs: list[tuple[int, int]] = []  # the finished blocks each spacer stands for

    @property
    def source(self) -> str:
        if len(self._shown) > 1:
            self._shown = ["".join(self._shown)]
        return self._shown[0] if self._shown else ""

    @property
    def splitter(self) -> BlockSplitter:
        return self._splitter

    @property
    def finished(self) -> int:
        """How many finished blocks there are, mounted or not."""
        return len(self._sources)

    @property
    def mounted(self) -> int:
        """How many finished blocks are mounted."""
        return len(self._mounted)

    @property
    def settled(self) -> bool:
        """Whether the mounted blocks are measured and placed for the current view."""
        return not self._placing and all(self._column.measured[at] for at in self._mounted)

    def feed(self, text: str) -> None:
        if text:
            self._shown.append(text)
            self._splitter.feed(text)
            self._renders.request()

    def _render(self) -> None:
        """Freeze the blocks finished since the last frame; show the open ones anew."""
        if self._splitter.changed and self._cell.is_mounted:
            self._show(*self._splitter.split())

    async def close(self) -> None:
        """Every block is finished: the text is complete."""
        self._renders.drawn()
        if self._splitter.saw_references:
            # Definitions apply to the blocks before them too: parse once more, all known.
            env: dict = {}
            parser().parse(self.source, env)
            await self.replace(self.source, env.get("references", {}))
            return
        await self._show(self._splitter.close(), [])

    async def replace(self, text: str, references: dict | None = None) -> None:
        """Show `text` instead of what streamed, as if it had come in one piece."""
        self._renders.drawn()
        await self._cell.remove_children()
        self._shown = [text]
        self._reset(BlockSplitter(references), references or {})
        self._splitter.feed(text)
        await self._show(self._splitter.close(), [])

    def _show(self, finished: list[Block], open_tokens: list[Token]) -> AwaitMount:
        """Add the blocks finished since the last frame (mounting those near the view) and
        show the open ones anew, keeping each widget that can take its successor's content."""
        width = self._cell.size.width or self._cell.app.size.width
        first_new = len(self._sources)
        tokens: dict[int, tuple[list[Token], int]] = {}
        for block in finished:
            prefix, line = self._prefix
            if block.tokens[0].type == "html_block":  # Markdown shows no widget for it
                self._prefix = (prefix + block.source, line if prefix else block.line)
                continue
            tokens[len(self._sources)] = (block.tokens, block.base)
            self._sources.append((prefix + block.source, line if prefix else block.line))
            self._column.add(*estimate(block.tokens, width))
            self._prefix = ("", 0)
        new_open = list(self._cell._parse_markdown(open_tokens))
        for widget in new_open:
            shift(widget, self._splitter.base)
        first, last = self._window(estimate(open_tokens, width)[0] if open_tokens else 0)
        shown_new = [index for index in range(max(first, first_new), last) if index in tokens]
        built = [self._build(*tokens[index]) for index in shown_new]
        shown, mounting = self._replace(self._open, [*built, *new_open])
        self._mounted.update(zip(shown_new, shown, strict=False))
        self._open = shown[len(built) :]
        if len(shown_new) < len(tokens) or self._runs:
            self._lay_spacers()
        self.place_soon()
        return mounting

    def _build(self, tokens: list[Token], base: int) -> MarkdownBlock:
        """The widget of one top-level block."""
        built = next(iter(self._cell._parse_markdown(tokens)))
        shift(built, base)
        return built

    def _replace(
        self, old: list[MarkdownBlock], new: list[MarkdownBlock]
    ) -> tuple[list[MarkdownBlock], AwaitMount]:
        """Show `new` where `old` are, the last widgets of the answer."""
        cell = self._cell
        shown: list[MarkdownBlock] = []
        mounted: list[MarkdownBlock] = []
        gone: list[MarkdownBlock] = []
        for index, block in enumerate(new):
            current = old[index] if index < len(old) else None
            if current is not None and took_content(current, block):
                shown.append(current)
                continue
            if current is not None:
                cell.mount(block, before=current)
                gone.append(current)
            else:
                cell.mount(block)
            mounted.append(block)
            shown.append(block)
        gone += old[len(new) :]
        if gone:
            cell.remove_children(gone)
        return shown, AwaitMount(cell, mounted)

    # -- keeping only the blocks near the view mounted ------------------------------------

    def place_soon(self) -> None:
        if not self._placing:
            self._placing = True
            self._cell.call_after_refresh(self._place)

    def _place(self) -> None:
        """Measure the mounted finished blocks; mount those near the view, unmount the rest."""
        self._placing = False
        cell = self._cell
        if not cell.is_mounted:
            return
        column = self._column
        view = self._view()
        # The block at the top of the view stays where it is when blocks above it turn
        # out taller or shorter than estimated.
        kept = column.span(view[0], view[0])[0] if view and len(column) else None
        kept_y = column.y(kept) if kept is not None else 0
        changed = False
        for index, widget in self._mounted.items():
            size = widget.outer_size
            if size.width:  # laid out
                margin = widget.styles.margin
                changed |= column.measure(index, size.height, margin.top, margin.bottom)
        first, last = self._window(sum(block.outer_size.height for block in self._open))
        wanted = set(range(first, last)) | {
            index for index in self._mounted if not column.measured[index]
        }
        gone = [index for index in self._mounted if index not in wanted]
        new = sorted(index for index in wanted if index not in self._mounted)
        if gone:
            cell.remove_children([self._mounted.pop(index) for index in gone])
        for index in reversed(new):
            self._mounted[index] = self._rebuild(index)
            cell.mount(self._mounted[index], before=self._next_widget(index))
        if gone or new or changed:
            self._lay_spacers()
        if new:
            self.place_soon()  # to measure them
        scroller = self._scroller()
        shift_by = column.y(kept) - kept_y if kept is not None else 0
        if shift_by and scroller is not None and not self._following(scroller):
            cell.call_after_refresh(scroller.scroll_relative, y=shift_by, animate=False)

    def _rebuild(self, index: int) -> MarkdownBlock:
        self.rebuilt += 1
        source, line = self._sources[index]
        env: dict = {"references": dict(self._references)} if self._references else {}
        return self._build(parser().parse(source, env), line)

    def _next_widget(self, index: int) -> Widget | None:
        following = [at for at in self._mounted if at > index]
        if following:
            return self._mounted[min(following)]
        return self._open[0] if self._open else None

    def _lay_spacers(self) -> None:
        """One spacer for each run of unmounted finished blocks, as tall as they are."""
        runs = []
        start = 0
        for index in [*sorted(self._mounted), len(self._sources)]:
            if index > start:
                runs.append((start, index))
            start = index + 1
        next_top = self._open_top()
        heights = [self._column.gap(first, last, next_top) for first, last in runs]
        if runs != self._runs:
            self._cell.remove_children(self._spacers)
            self._spacers = []
            for _, last in runs:
                self._spacers.append(Unmounted())
                self._cell.mount(self._spacers[-1], before=self._next_widget(last - 1))
            self._runs = runs
            self._spacer_heights = [-1] * len(runs)
        for spacer, height, was in zip(self._spacers, heights, self._spacer_heights, strict=True):
            if height != was:
                spacer.styles.height = height
        self._spacer_heights = heights

    def _open_top(self) -> int | None:
        """The top margin of the first open block (None: there is none)."""
        if not self._open:
            return None
        block = self._open[0]
        if block.is_mounted:
            return block.styles.margin.top
        return estimate([block._token], 1)[1]

    def _scroller(self) -> Widget | None:
        scroller = self._cell.parent
        if not isinstance(scroller, Widget) or not scroller.is_scrollable:
            return None
        if self._watched is not scroller:
            self._watched = scroller
            self._cell.watch(scroller, "scroll_y", self.place_soon, init=False)
        return scroller

    def _following(self, scroller: Widget) -> bool:
        """Whether the view is at the end of the answer, and stays there as it grows."""
        return scroller.scroll_y >= scroller.max_scroll_y and scroller.children[-1] is self._cell

    def _view(self) -> tuple[int, int] | None:
        """The rows of this answer in view (None: all of it is)."""
        scroller = self._scroller()
        if scroller is None or not (height := scroller.scrollable_content_region.height):
            return None
        top = round(scroller.scroll_y) - self._cell.virtual_region.y
        top -= self._cell.styles.gutter.top
        return top, top + height

    def _window(self, open_rows: int) -> tuple[int, int]:
        """The finished blocks to keep mounted: those in view, or half a view from it;
        `open_rows` is how tall the open blocks are (or will be, this frame)."""
        view = self._view()
        scroller = self._scroller()
        if view is None or scroller is None:
            return 0, len(self._sources)
        top, bottom = view
        height = bottom - top
        if self._following(scroller):  # after this frame, at the end of the open blocks
            bottom = self._column.end(self._open_top()) + open_rows
            top = bottom - height
        return self._column.span(top - height // 2, bottom + height // 2)


def took_content(widget: MarkdownBlock, block: MarkdownBlock) -> bool:
    """Give `widget` the content of `block`, built anew from more text, if it can take it
    in place (a paragraph, a heading, a code block); False if it must be replaced."""
    if type(widget) is not type(block):
        return False
    if isinstance(block, MarkdownFence):
        widget._copy_context(block)
        widget.set_content(block._highlighted_code)
    elif isinstance(block, MarkdownParagraph | MarkdownHeader):
        widget._copy_context(block)
        widget.set_content(block._content)
    else:
        return False
    widget.source_range = block.source_range
    return True


def shift(block: MarkdownBlock, base: int) -> None:
    """Make a block's source lines count from the start of the whole answer."""
    start, end = block.source_range
    block.source_range = (start + base, end + base)
