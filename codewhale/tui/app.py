"""The Textual application shell."""

from __future__ import annotations

from typing import ClassVar

from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.widgets import Footer, Header

from codewhale import __version__
from codewhale.config import LoadedConfig
from codewhale.tui.welcome import Welcome


class CodeWhaleApp(App[None]):
    """Full-screen CodeWhale: currently the welcome screen with provider status."""

    CSS_PATH = "app.tcss"
    TITLE = "CodeWhale"
    SUB_TITLE = __version__
    AUTO_FOCUS = "Welcome"
    BINDINGS: ClassVar = [Binding("ctrl+q", "quit", "Quit", priority=True)]

    def __init__(self, loaded: LoadedConfig) -> None:
        super().__init__()
        self.loaded = loaded
        if loaded.config.tui.theme in self.available_themes:
            self.theme = loaded.config.tui.theme

    def compose(self) -> ComposeResult:
        yield Header(show_clock=False)
        yield Welcome(self.loaded)
        yield Footer()
