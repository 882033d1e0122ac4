"""An answer in the conversation, rendered as Markdown.

Apart from the transcript's other cells because Textual's Markdown widget (with
markdown-it) is a good share of the app's imports: it loads with the first answer, or
once the session is open, never before the first frame (tests/unit/test_startup.py).
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.await_complete import AwaitComplete
from textual.visual import VisualType
from textual.widgets import Markdown
from textual.widgets._markdown import MarkdownParagraph  # not exported; Markdown.BLOCKS's
from textual.widgets.markdown import MarkdownBlock, MarkdownStream

from codewhale.sanitize import clean_text
from codewhale.tui.sidebar import laid_out_size, lay_out_if_resized


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


class AssistantMessage(Markdown):
    """Streams with MarkdownStream instead of re-rendering the document per delta.

    Built with `text` (a replayed answer) it never streams, so it starts no stream task,
    and its blocks are built as it is composed: they mount with the cell, in the batch
    that mounts it, not in a second mount (and layout) after a parse in a thread.
    """

    BLOCKS: dict[str, type[MarkdownBlock]] = {  # noqa: RUF012 (declared so by Markdown)
        **Markdown.BLOCKS,
        "paragraph_open": StreamedParagraph,
    }

    def __init__(self, text: str = "") -> None:
        super().__init__(clean_text(text))
        self.stream: MarkdownStream | None = None
        self.answer = text
        self._composed: str | None = None  # the source the composed blocks show

    def compose(self) -> ComposeResult:
        source = self._initial_markdown
        if source:
            self._composed = source
            yield from self._build_from_source(source)

    def update(self, markdown: str) -> AwaitComplete:
        composed, self._composed = self._composed, None
        if composed is None or markdown != composed:
            return super().update(markdown)
        # Markdown's mount shows its source: here, what compose built already.
        return AwaitComplete(self._composed_update(markdown))

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
        # Not `append`: MarkdownStream calls Markdown.append to render.
        if self.stream is None:
            self.stream = Markdown.get_stream(self)
        self.answer += fragment
        await self.stream.write(clean_text(fragment))

    async def finish(self, suffix: str = "", *, content: str | None = None) -> None:
        """End the stream; `content` (the whole answer) replaces what streamed if they differ."""
        if suffix and self.stream is not None:
            await self.stream.write(suffix)
        if self.stream is not None:
            await self.stream.stop()
        if content and content != self.answer:
            # Deltas were missed (an agent screen opened mid-answer): show the whole answer.
            self.answer = content
            await self.update(clean_text(content) + suffix)
