"""An answer in the conversation, rendered as Markdown.

Apart from the transcript's other cells because Textual's Markdown widget (with
markdown-it) is a good share of the app's imports: it loads with the first answer, or
once the session is open, never before the first frame (tests/unit/test_startup.py).
"""

from __future__ import annotations

from textual.widgets import Markdown
from textual.widgets.markdown import MarkdownStream

from codewhale.sanitize import clean_text


class AssistantMessage(Markdown):
    """Streams with MarkdownStream instead of re-rendering the document per delta.

    Built with `text` (a replayed answer) it never streams, so it starts no stream task.
    """

    def __init__(self, text: str = "") -> None:
        super().__init__(clean_text(text))
        self.stream: MarkdownStream | None = None
        self.answer = text

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
