"""The Textual application: one handler applies engine events to the widgets."""

from __future__ import annotations

import asyncio
import time
from collections import deque
from dataclasses import dataclass, replace
from functools import cached_property, partial
from importlib import import_module
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, assert_never

from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.css.query import NoMatches
from textual.events import Event, InputEvent, Key, Paste
from textual.message import Message
from textual.screen import ModalScreen, Screen
from textual.widgets import Footer, Static

# Only what the first frame needs is imported here; the engine, the provider client
# and the config models load after it (`_start_session`), and
# tests/unit/test_startup.py keeps it that way.
from codewhale import __version__
from codewhale.permissions import Mode
from codewhale.providers.local_model import status_limits
from codewhale.tui.batches import Batches
from codewhale.tui.commands import CommandRegistry, SlashCommandProvider, split_command
from codewhale.tui.completion import Completion, CompletionMenu
from codewhale.tui.composer import Composer
from codewhale.tui.escape_twice import EscapeTwice
from codewhale.tui.frame_clock import FramedScreen
from codewhale.tui.launch_receipt import Appearance, OpeningStatus, remember_opening_status
from codewhale.tui.paste import expand
from codewhale.tui.sidebar import AgentRow, WorkSidebar
from codewhale.tui.startup import StartupGate
from codewhale.tui.status import StatusLine
from codewhale.tui.task_rows import TaskRow
from codewhale.tui.transcript import Notice, Transcript, welcome
from codewhale.tui.waiting import ChildWait

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Sequence

    from textual.app import AutopilotCallbackType
    from textual.driver import Driver
    from textual.pilot import Pilot
    from textual.widget import Widget

    from codewhale.config import LoadedConfig
    from codewhale.runtime import Runtime, TurnResult, events
    from codewhale.tui.approval import ApprovalScreen
    from codewhale.tui.early_history import EarlyResume

NARROW_COLUMNS = 100
NO_SESSION = "No session is open: fix the error above (config, endpoint or session id) and restart."
# Shorter retries pass unremarked; a longer wait is said, so a stalled-looking turn is explained.
LONG_RETRY_SECS = 5.0
# Ctrl+C twice within this many seconds quits, as in other terminal agents.
DOUBLE_PRESS_SECS = 1.0


def superseded_by(event: events.Event) -> tuple[str, str] | None:
    """The key under which a later event of the same child replaces `event`, if any."""
    from codewhale.runtime import events  # with the session (the first frame is without)

    if not isinstance(event, events.AnyAgentEvent):
        return None
    # A child's events whose mark on the main screen the next one of the same group
    # replaces (the Work sidebar reads the child's snapshot in any case): what it is
    # running, its status, its token counts; a progress event with a tail (the end of all
    # the child has written) replaces an earlier tail. Waiting for the main screen, only
    # the last counts.
    match event:
        case events.AgentStarted() | events.AgentToolStarted():
            group = "running"
        case events.AgentToolFinished():
            group = "tool done"
        case events.AgentProgress():
            group = "tail" if event.text_tail else "status"
        case events.AgentUsage():
            group = "usage"
        case events.AgentQueued() | events.AgentSpawned() | events.AgentFinished():
            return None  # each is shown
        case _:
            assert_never(event)
    return (group, event.agent_id)


@dataclass
class EngineEvent(Message):
    """An engine event, delivered to the UI through the message queue."""

    event: events.Event


class CodeWhaleApp(App[None]):
    CSS_PATH = "app.tcss"
    TITLE = "CodeWhale"
    SUB_TITLE = __version__
    AUTO_FOCUS = "#composer"
    COMMANDS: ClassVar = App.COMMANDS | {SlashCommandProvider}
    BINDINGS: ClassVar = [
        Binding("ctrl+q", "quit", "Quit", priority=True),
        # priority: otherwise the focused composer's copy (or Textual's quit hint) takes it.
        Binding("ctrl+c", "interrupt", "Interrupt", priority=True, show=False),
        Binding("ctrl+b", "toggle_sidebar", "Work"),
        # Claude Code's Shift+Tab posture; Shift+Tab moves focus here, Tab toggles Plan/Agent.
        Binding("ctrl+t", "toggle_accept_edits", "Accept edits", show=False),
    ]

    def __init__(
        self,
        loaded: LoadedConfig | Appearance,
        workspace: Path,
        *,
        resume: str | None = None,
        continue_latest: bool = False,
        overrides: dict[str, str] | None = None,
        initial_prompt: str | None = None,
        mode: Mode | None = None,
        on_first_frame: Callable[[], None] = lambda: None,
    ) -> None:
        """`loaded`: the config read with `overrides` (the first session opens with it), or
        when a launch receipt vouched for the config, only what the first frame takes from
        it; the config is then read with the session, after the first frame. `mode`: the
        `--mode` flag's (YOLO only once confirmed in the app). `on_first_frame` is called
        once the first frame is on screen."""
        super().__init__()
        self._on_first_frame = on_first_frame
        # The config the session runs with; set when it opens if not given here.
        self.loaded: LoadedConfig
        self._checked_config: LoadedConfig | None = None
        if isinstance(loaded, Appearance):
            appearance = loaded
        else:
            self.loaded = self._checked_config = loaded
            appearance = Appearance.guessed(loaded)
        self.workspace = workspace
        self.resume = resume
        self.continue_latest = continue_latest
        # A new session's status line as its launch receipt remembers it, drawn in the first
        # frame (a resumed session's counters are only known once it is read).
        new_session = resume is None and not continue_latest
        # The mode sessions open in; `--mode yolo` opens in Agent and asks first, once.
        self._confirm_yolo = mode is Mode.YOLO
        self.start_mode: Mode = Mode.AGENT if mode is None or mode is Mode.YOLO else mode
        status = appearance.status
        if status is not None:
            status = replace(status, mode=self.start_mode)
        self._opening_status = status if new_session else None
        # A resumed session's, drawn with its conversation once that is read from its file.
        resumed = appearance.for_resume()
        if resumed is not None and not new_session:
            self._resumed_status: OpeningStatus | None = replace(resumed, mode=self.start_mode)
        else:
            self._resumed_status = None
        self._welcomed = False  # the welcome line is shown once, on a new session's screen
        # A resumed conversation drawn from its file before the session opened, until it has.
        self._early_history: list[dict] | None = None
        # The welcome line drawn in the first frame from the receipt, and what it named.
        self._early_welcome: tuple[Notice, str, str] | None = None
        # --model / --provider / --base-url: they win over config for every runtime we open.
        self.overrides = dict(overrides or {})
        # `codewhale "task"`: sent as the first turn once a session is open, then forgotten.
        self.initial_prompt = (initial_prompt or "").strip() or None
        self._ctrl_c_at = 0.0  # when Ctrl+C was last pressed: a second within 1 s quits
        self.runtime: Runtime | None = None
        self.closed_session: Runtime | None = None  # the one open when the app ended
        # Filled in `_start_session`: the handlers import the runtime (engine, provider client).
        self.registry = CommandRegistry()
        # Set once the first session has opened (or failed to); the composer's messages
        # wait for it in the StartupGate, so a prompt sent earlier is kept, not refused.
        self.session_ready = asyncio.Event()
        self.turn_running = False
        self.sidebar_wanted = appearance.sidebar
        self.sidebar_forced = False  # shown on a narrow terminal because the user asked
        self._approvals: deque[events.ApprovalRequested] = deque()
        self._approval_open = False
        self._approval_screen: ApprovalScreen | None = None  # the dialog on screen, if any
        # The turn held open for its children: what it waits on, and what wakes it.
        self.child_wait = ChildWait()
        if appearance.theme in self.available_themes:
            self.theme = appearance.theme

    def get_driver_class(self) -> type[Driver]:
        from codewhale.tui.hangup import driver_for

        # One that outlives a hangup of its terminal, so closing it still saves the session.
        return driver_for(super().get_driver_class())

    def get_default_screen(self) -> Screen:
        # A keystroke's echo is drawn as soon as the frame rate allows (tui/frame_clock.py).
        return FramedScreen(id="_default")

    # -- layout --------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield StatusLine()
        with Horizontal(id="body"):
            yield Transcript()
            yield WorkSidebar()
        yield Static("", id="hint", markup=False)
        yield StartupGate(Composer(), ready=self.session_ready)
        yield CompletionMenu(on_pick=lambda index: self.completion.pick(index))
        yield Footer()

    # The main screen's widgets live as long as the app and are reached on every engine
    # event and keystroke: looked up once, then kept.

    @cached_property
    def transcript(self) -> Transcript:
        return self.query_one(Transcript)

    @cached_property
    def sidebar(self) -> WorkSidebar:
        return self.query_one(WorkSidebar)

    @cached_property
    def composer(self) -> Composer:
        return self.query_one(Composer)

    @cached_property
    def completion(self) -> Completion:
        return Completion(
            self.composer, self.query_one(CompletionMenu), lambda: self.registry, self._path_matches
        )

    @cached_property
    def status_line(self) -> StatusLine:
        return self.query_one(StatusLine)

    @cached_property
    def hint(self) -> Static:
        return self.query_one("#hint", Static)

    async def on_mount(self) -> None:
        from codewhale.tui.hangup import quit_on_stop_signals

        # Closing the terminal (SIGHUP) or SIGTERM saves the session and quits, unasked.
        quit_on_stop_signals(self, self._close_session)
        self.composer.completion = self.completion
        self._apply_sidebar()
        self.sidebar.show_work({})
        if self._opening_status is not None:
            # The screen as it stays: the session opens behind it, held input waits for it.
            status = self._opening_status
            self._show_opening_status(status)
            line = welcome(self.workspace, status.model, status.mode.value)
            self._welcomed, self._early_welcome = True, (line, status.model, status.mode.value)
            self.transcript.add_all([line])
        else:
            self.query_one(StatusLine).update(Text("CodeWhale  starting…", style="dim"))
        # Paint first: the session opens once the first frame is on screen.
        painted = asyncio.Event()
        self.call_after_refresh(self._first_frame_drawn, painted)
        self.run_worker(self._start_session(painted), group="session")

    def _first_frame_drawn(self, painted: asyncio.Event) -> None:
        painted.set()
        self._on_first_frame()

    def _show_opening_status(
        self, status: OpeningStatus, resumed: EarlyResume | None = None
    ) -> None:
        """What `refresh_status` shows for a session just opened, from the receipt (and
        for a `resumed` one, its file)."""
        from codewhale.providers.types import Usage

        sidebar = self.sidebar
        self.query_one(StatusLine).show(
            workspace=self.workspace,
            mode=status.mode,
            model=status.model,
            usage=Usage() if resumed is None else resumed.figures.usage,
            cost=None if resumed is None else resumed.figures.cost,
            running=False,
            limits=status.limits,
            sandboxed=status.sandboxed,
            children=None if sidebar.display else sidebar.child_counts(),
            context=status.context if resumed is None else resumed.context(status),
        )

    async def _drop_early_welcome(self, unless: tuple[str, str] | None = None) -> None:
        """Remove the welcome line drawn from the receipt, unless it named `unless`
        (the model and mode the session opened with)."""
        early, self._early_welcome = self._early_welcome, None
        if early is not None and early[1:] != unless:
            await early[0].remove()
            self._welcomed = False

    async def _start_session(self, painted: asyncio.Event) -> None:
        """Load the command handlers and open the session, then let held input through.

        Started at mount rather than after the first frame, so that quitting before that
        frame cancels it and its `finally` still releases the StartupGate.
        """
        opening: OpeningStatus | None = None
        resumed = False
        # A resumed conversation is read while the first frame is drawn (the thread mostly
        # imports the cells' modules).
        early = self.resume is not None or self.continue_latest
        reading = asyncio.create_task(self._read_early_history()) if early else None
        try:
            await painted.wait()
            if reading is not None:
                await self._draw_early_history(await reading)
                # Painted before the handlers' imports start in a thread: sharing the GIL
                # with them, the painting took up to twice as long.
                await self.screen.wait_for_refresh()
            # The handlers import the runtime, engine and config: off the event loop.
            await asyncio.to_thread(import_module, "codewhale.tui.command_handlers")
            from codewhale.tui.command_handlers import build_registry

            self.registry = build_registry()
            await self.open_runtime(self._checked_config)
            if self.runtime is not None:
                self._add_skill_commands()
            if self.runtime is None:  # the error is in the transcript
                self.query_one(StatusLine).update(Text("CodeWhale  no session", style="dim"))
            elif self._opened_as_remembered():
                opening = OpeningStatus.of(self.runtime)
                resumed = self.runtime.resumed
            # What opening put up (history, status, a dialog) is drawn before held input runs.
            await self.screen.wait_for_refresh()
        finally:
            if reading is not None:
                reading.cancel()  # quit before it was drawn: nothing waits for it
            self.session_ready.set()
        # The answer cell (Textual's Markdown, markdown-it) is loaded now, in a thread, not
        # on the loop when the first answer starts to stream.
        # A function, not a coroutine: one the app quits before starting is never awaited.
        self.run_worker(
            partial(import_module, "codewhale.tui.answer"), thread=True, group="preload"
        )
        remembered = self._resumed_status if resumed else self._opening_status
        if opening is not None and opening != remembered:
            # For the next start with this setup's receipt; after the held input, in a thread.
            await asyncio.to_thread(
                partial(remember_opening_status, resumed=resumed),
                self.workspace,
                self.overrides,
                opening,
            )

    async def _read_early_history(self) -> EarlyResume | None:
        """The conversation `--continue`/`--resume` will open, read from its file."""

        def read() -> EarlyResume | None:
            # Imported here, in the thread: the store's loader and its modules with it.
            from codewhale.tui.early_history import read_resumed

            return read_resumed(self.workspace, self.resume)

        return await asyncio.to_thread(read)

    async def _draw_early_history(self, early: EarlyResume | None) -> None:
        """Draw the conversation being resumed, read from its file, before it opens, and
        the status line it will open with where the receipt says enough to tell."""
        if early is None:
            return
        status = self._resumed_status
        if status is not None and early.context(status) is not None:
            self._show_opening_status(status, early)
        self._early_history = early.messages
        await self.replay_history(early.messages)

    async def _keep_early_history(self, opened: Runtime | None) -> bool:
        """Whether the history drawn before the session opened stands for `opened`'s
        conversation (None: it failed to open); if not, it is taken down."""
        from codewhale.tui.early_history import same_conversation

        drawn, self._early_history = self._early_history, None
        if drawn is None:
            return False
        # A sub-agent cell was drawn without the child's record, which may settle it.
        if (
            opened is not None
            and same_conversation(drawn, opened.messages)
            and not any(self.transcript.has_agent(s.agent_id) for s in opened.agents())
        ):
            return True
        await self.transcript.reset()
        return False

    def _opened_as_remembered(self) -> bool:
        """A session before any turn (a `codewhale "task"` prompt's is running), in the
        mode a start without `--mode` has: what a launch receipt's status line shows."""
        runtime = self.runtime
        return not self.turn_running and runtime is not None and runtime.mode is Mode.AGENT

    async def run_async(
        self, *, auto_pilot: AutopilotCallbackType | None = None, **options: Any
    ) -> None:
        """An autopilot (snapshot tests, TEXTUAL_PRESS) starts once the session is open,
        as run_test's pilot does (it waits for the StartupGate), not at the first frame."""
        if auto_pilot is None:
            return await super().run_async(**options)
        steer = auto_pilot

        async def after_opening(pilot: Pilot[object]) -> None:
            await self.session_ready.wait()
            await steer(pilot)

        return await super().run_async(auto_pilot=after_opening, **options)

    async def open_runtime(self, loaded: LoadedConfig | None = None) -> None:
        """Open (or reopen) the session; `loaded` is config already read for it, if any."""
        if self.runtime is not None:
            await self.runtime.close()
            self.runtime = None
        await self.query("#storage-problem").remove()  # the closed session's

        def emit(event: events.Event) -> None:
            self.post_message(EngineEvent(event))

        def open_session() -> Runtime | str:
            # In a thread: opening reads agent definitions and runs git and a sandbox probe
            # (and the first time imports what the engine needs); the UI keeps drawing.
            from codewhale.config import ConfigError
            from codewhale.runtime import RuntimeSetupError, open_runtime

            try:
                runtime = open_runtime(
                    workspace=self.workspace,
                    loaded=loaded,
                    overrides=self.overrides,
                    emit=emit,
                    resume=self.resume,
                    continue_latest=self.continue_latest,
                    mode=self.start_mode,
                )
            except (RuntimeSetupError, ConfigError) as error:
                return str(error)
            # The status line's context use: its first look estimates every message whose
            # size the session file did not give (all of them, for a new session's
            # prompt), later ones only what is new. Here, not on the loop.
            runtime.context_use()
            return runtime

        opened = await asyncio.to_thread(open_session)
        if isinstance(opened, str):
            await self._drop_early_welcome()  # no session to welcome to
            await self._keep_early_history(None)
            await self.transcript.notice(opened, "error")
            return
        self.runtime = opened
        self.loaded = opened.loaded
        self.sidebar.lookups.last_output = opened.agent_last_output
        self.sidebar.lookups.cost = opened.agent_cost
        self.sidebar.tasks.source = opened.background_tasks
        from codewhale.tui.hooks_trust import shown_warnings

        above = [Notice(warning, "warning") for warning in shown_warnings(opened)]
        await self._drop_early_welcome(unless=(opened.model, opened.mode.value))
        if not (opened.resumed or self._welcomed):
            self._welcomed = True
            above.insert(0, welcome(self.workspace, opened.model, opened.mode.value))
        if await self._keep_early_history(opened):
            if above:  # above the drawn history, where replaying it would have put them
                first = next(iter(self.transcript.children), None)
                await self.transcript.mount_all(above, before=first)
        else:
            await self.replay_history(self.runtime.messages, above=above)
        for problem in self.runtime.storage_problems():  # the session file cannot be opened
            await self.show_storage_problem(problem)
        for snapshot in self.runtime.agents():
            self.sidebar.show_agent(snapshot)
        self.sidebar.tasks.show_tasks(self.runtime.background_tasks())
        self.refresh_status()

        async def send_initial_prompt() -> None:
            if self._confirm_yolo:  # the prompt runs in the mode the answer gives
                await self._confirm_starting_in_yolo(then=send_initial_prompt)
                return
            prompt, self.initial_prompt = self.initial_prompt, None
            if prompt is not None and self.runtime is not None:
                await self.start_turn(prompt)

        from codewhale.providers.key_help import lacks_key

        missing_key = lacks_key(self.runtime.settings)
        if missing_key or self.runtime.loaded.offline_fallback:
            from codewhale.tui import onboarding

            # A missing key asks every time; the offline model's dialog once per machine.
            if missing_key or onboarding.first_offline_launch():

                async def onboarded(saved: bool | None) -> None:
                    self._after_onboarding(saved)
                    if not saved:  # a saved key reopens the session, which sends the prompt
                        await send_initial_prompt()

                await self.push_screen(onboarding.OnboardingScreen(self.loaded), onboarded)
                return
        await send_initial_prompt()

    async def _confirm_starting_in_yolo(self, then: Callable[[], Awaitable[None]]) -> None:
        """`--mode yolo`: the session opened in Agent mode and switches once the user says
        yes in the app, as `/mode yolo` asks; `then` runs after the answer."""
        from codewhale.tui.yolo_confirm import YoloConfirmScreen  # loaded on first use

        self._confirm_yolo = False  # asked once per app, not again for a reopened session
        assert self.runtime is not None

        async def answered(yolo: bool | None) -> None:
            if self.runtime is None:
                return
            if yolo:
                self.runtime.set_mode(Mode.YOLO)
                self.start_mode = Mode.YOLO
                self.refresh_status()
            shown = "mode: yolo" if yolo else f"mode: {self.runtime.mode.value} (YOLO not entered)"
            await self.transcript.notice(shown)
            await then()

        await self.push_screen(YoloConfirmScreen(self.runtime.mode.value), answered)

    async def replay_history(self, messages: list[dict], above: Sequence[Widget] = ()) -> None:
        """Show a resumed conversation with the cells a live turn makes: its last screenful
        in one batch (under `above`), earlier ones as the user scrolls up."""
        if all(message.get("role") == "system" for message in messages):
            # A new session: nothing to rebuild (nor the history cells' imports to load).
            if above:
                await self.transcript.add_all(above)
            return
        from codewhale.tui.history import Backlog  # loaded on first use (cold start)

        def agents() -> dict:
            # Read per batch: history drawn before the session opened settles later
            # batches with its children's records.
            runtime = self.runtime
            return {s.agent_id: s for s in runtime.agents()} if runtime is not None else {}

        backlog = Backlog(messages, agents)
        # One layout and paint for the whole batch (answers build their blocks as they mount).
        with self.batch_update():
            await self.transcript.show_history(backlog, above)
            if not backlog.exhausted:
                # More above, so it scrolls: laid out beside its scrollbar and at its end at
                # once, not a second time when that is found out (the transcript corrects both).
                self.transcript.show_vertical_scrollbar = True
                self.transcript.anchor()

    async def resume_session(self, session_id: str) -> None:
        await self.transcript.reset()
        self.resume, self.continue_latest = session_id, False
        await self.open_runtime()
        await self.transcript.notice(f"Resumed {session_id}.")

    def _after_onboarding(self, saved: bool | None) -> None:
        if saved:
            self.run_worker(self.open_runtime(), group="session")

    def on_text_area_changed(self, event) -> None:
        """Typing `/…` or `@…` opens the completion list (tui/completion.py) and filters it."""
        try:
            composer = self.composer
        except NoMatches:  # quitting: a last keystroke can arrive after the widgets are gone
            return
        if event.text_area is composer and composer.is_attached:
            self.completion.sync()

    def on_resize(self, event) -> None:
        # This handler runs before App._on_resize stores the new size: self.size is the
        # old one here, so the event's size decides.
        width = event.size.width
        self.set_class(width < NARROW_COLUMNS, "narrow")
        self._apply_sidebar(width)
        if any(menu.display for menu in self.query(CompletionMenu)):  # the composer moves
            self.call_after_refresh(self.completion.place)

    def _apply_sidebar(self, width: int | None = None) -> None:
        """The Work sidebar folds away on narrow terminals unless the user asked for it."""
        narrow = (self.size.width if width is None else width) < NARROW_COLUMNS
        self.sidebar.display = self.sidebar_wanted and (not narrow or self.sidebar_forced)
        self.refresh_status()  # a hidden sidebar's running children move to the status line

    def refresh_status(self, *, soon: bool = False) -> None:
        """Redraw the status line; `soon` (engine events, which come by the hundred each
        second while children stream) draws it at most once a frame, with the latest."""
        runtime = self.runtime
        if runtime is None:
            return
        try:
            line, sidebar = self.status_line, self.sidebar
        except NoMatches:  # the app is shutting down
            return
        if not line.is_attached:  # the same, once they were looked up
            return
        if soon:
            line.show_soon(self.refresh_status)
            return
        settings = runtime.settings
        line.show(
            workspace=self.workspace,
            mode=runtime.mode,
            model=runtime.model,
            usage=runtime.usage,
            cost=runtime.cost_usd,
            running=self.turn_running,
            waiting_on=self.child_wait.remaining,
            limits=status_limits(settings.provider, settings.offer_tools),
            sandboxed=runtime.sandboxed,
            accept_edits=runtime.accept_edits,
            children=None if sidebar.display else sidebar.child_counts(),
            context=runtime.context_use(),
        )

    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity="information",
        timeout: float | None = None,
        markup: bool = True,
    ) -> None:
        """On a small terminal a toast would cover the transcript or the Work sidebar, so the
        status line shows the notification instead (when it is on screen)."""
        from codewhale.tui.status import toasts_fit

        lines = self.query(StatusLine)
        if toasts_fit(*self.size) or not lines or not lines.first().screen.is_current:
            super().notify(message, title=title, severity=severity, timeout=timeout, markup=markup)
            return
        lines.first().flash(
            message,
            title=title,
            severity=severity,
            timeout=self.NOTIFICATION_TIMEOUT if timeout is None else timeout,
            markup=markup,
        )

    # -- composer --------------------------------------------------------------------------

    async def on_event(self, event: Event) -> None:
        # Decided before the key is routed to what has the focus (tui/typing_target.py).
        if isinstance(event, Key | Paste) and not event.is_forwarded:
            self._redirect_typing(event)
        if (
            isinstance(event, InputEvent | Paste)
            and self.screen_stack
            and isinstance(screen := self.screen_stack[-1], FramedScreen)
        ):
            screen.input_arrived()  # what it changes is drawn in the next frame
        await super().on_event(event)

    def _redirect_typing(self, typed: Key | Paste) -> None:
        """Text typed or pasted on a cell, a sidebar row or an agent screen's buttons goes
        to the screen's text box: the composer, or the agent screen's message box."""
        from codewhale.tui.typing_target import TypesInto, redirect_typing

        if not self.screen_stack:  # the app is ending
            return
        screen = self.screen
        if screen is self.screen_stack[0]:  # the main screen
            redirect_typing(screen, typed, self.composer)
        elif isinstance(screen, TypesInto):
            redirect_typing(screen, typed, screen.typing_target())

    async def on_composer_submitted(self, message: Composer.Submitted) -> None:
        text = message.text
        # Folded pastes go out in full; the transcript keeps them folded.
        pastes = self.composer.pastes.used_in(text)
        if text.strip().startswith("/"):
            await self.run_command(expand(text, pastes))
            return
        if self.runtime is None:
            await self.transcript.notice(NO_SESSION, "error")
            return
        from asyncio import to_thread

        from codewhale.tui.attachment_format import with_attachments
        from codewhale.tui.attachments import collect

        # `@path` words attach those files for the model; the transcript shows chips.
        rules = self.runtime.permission_rules
        attachments = await to_thread(collect, self.workspace, text, rules) if "@" in text else []
        prompt = with_attachments(expand(text, pastes), attachments)
        if self.turn_running:
            self.runtime.steer(prompt)
            await self.transcript.user(text, steer=True, pastes=pastes)
        else:
            await self.start_turn(prompt, shown=text, pastes=pastes)
        for attachment in attachments:
            await self.transcript.notice(attachment.chip(), "attachment")

    async def start_turn(
        self,
        prompt: str,
        shown: str | None = None,
        pastes: dict[str, str] | None = None,
        then: Callable[[TurnResult], Awaitable[None]] | None = None,
    ) -> None:
        """`then` runs with the turn's result once it is on screen (/relay saves it)."""
        await self.transcript.user(shown or prompt, pastes=pastes)
        self.turn_running = True
        self.refresh_status()
        self.run_worker(self._turn(prompt, then), group="turn", exclusive=False)

    async def _turn(
        self, prompt: str, then: Callable[[TurnResult], Awaitable[None]] | None = None
    ) -> None:
        assert self.runtime is not None
        started = time.monotonic()
        try:
            result = await self.runtime.submit(prompt)
        finally:
            task = asyncio.current_task()
            # Quitting (`_close_session` has taken the runtime) draws nothing more, and the
            # app's loop, which applies the events, is busy closing this very turn: waiting
            # for it there would never end.
            quitting = self.runtime is None
            if task is not None and not task.cancelling() and not quitting:
                # What the turn did is on screen before it is said to be over (the
                # events are applied a frame's worth at a time).
                await self._engine_events.applied()
            self.turn_running = False
            self.refresh_status()
        if self.runtime is None:
            return  # quitting, and closing waits for this turn: nothing more to show or say
        if then is not None:
            await then(result)
        said = result.final_text.strip().splitlines()
        self.signal_finished(
            f"turn {result.status}", said[0] if said else "", time.monotonic() - started
        )

    def signal_finished(self, title: str, body: str, elapsed_secs: float) -> None:
        """Ring the bell or ask for a desktop notification, as [tui] notify says, when
        work of `elapsed_secs` ended while the user looked elsewhere."""
        from os import environ

        from codewhale.tui.notify import notification

        runtime, driver = self.runtime, self._driver
        if runtime is None or driver is None:
            return
        settings = runtime.loaded.config.tui
        sequence = notification(
            settings.notify,
            settings.notify_when,
            focused=self.app_focus,
            elapsed_secs=elapsed_secs,
            title=f"CodeWhale: {title}",
            body=body,
            term=environ.get("TERM", ""),
        )
        if sequence is not None:
            driver.write(sequence)

    async def on_composer_tab_pressed(self, message: Composer.TabPressed) -> None:
        text = message.text
        if not text.strip():
            if self.runtime is not None:
                self.runtime.set_mode(self.runtime.mode.toggled())
                self.refresh_status()
        elif self.turn_running and self.runtime is not None:
            # Folded pastes are queued in full; the notice keeps them folded.
            self.runtime.queue(expand(text, self.composer.pastes.used_in(text)))
            self.composer.clear()
            await self.transcript.notice(f"queued for after this turn: {text.strip()}", "steer")
        else:
            # Only a list closed with Esc leaves Tab to here: it opens it again.
            self.completion.reopen()

    def _path_matches(self, query: str, limit: int) -> list[str] | None:
        """The best workspace paths for `query`; None until the first listing is made."""
        from textual.widgets import TextArea

        from codewhale.tui.file_index import index_for

        index = index_for(self.workspace)
        composer = self.composer
        # Listed in a thread when missing or stale; once it lands, the completion list is
        # worked out again from what the composer then holds (post_message is thread-safe).
        index.refresh(on_done=lambda: composer.post_message(TextArea.Changed(composer)))
        return index.matches(query, limit) if index.ready else None

    async def on_composer_escape_pressed(self, message: Composer.EscapePressed) -> None:
        if self.turn_running and self.runtime is not None:
            self.runtime.cancel_turn()
        elif self._escape_twice.pressed(empty=not self.composer.text) and self.runtime:
            await self.run_command("/rewind")
        else:
            self.composer.clear()

    @cached_property
    def _escape_twice(self) -> EscapeTwice:
        """Esc twice on an empty composer opens /rewind's picker."""
        return EscapeTwice()

    def _add_skill_commands(self) -> None:
        """`/<skill>` for the user's skills; a built-in command of the same name stays."""
        from codewhale.tui.command_handlers import skill_commands

        assert self.runtime is not None
        for command in skill_commands(self.runtime.skills):
            if self.registry.find(command.name) is None:
                self.registry.add(command)

    async def run_command(self, text: str) -> None:
        name, arguments = split_command(text)
        command = self.registry.find(name)
        if command is None:
            await self.transcript.notice(self.registry.unknown_message(name), "error")
            return
        if command.needs_session and self.runtime is None:
            await self.transcript.notice(NO_SESSION, "error")
            return
        await command.handler(self, arguments)

    # -- engine events -----------------------------------------------------------------------

    @cached_property
    def _engine_events(self) -> Batches[events.Event]:
        """What engine events change on the main screen, applied a frame's worth at a
        time (`tui/batches.py`), and only while the main screen is in view: under an
        agent screen Textual still lays it out and redraws it, unseen."""
        batches = Batches(self, self._apply_engine_event, ready=self._main_screen_shown)
        self.screen_change_signal.subscribe(self, lambda _screen: batches.resume())
        return batches

    def _main_screen_shown(self) -> bool:
        """Only dialogs, which leave it in view, cover the main screen."""
        return all(isinstance(screen, ModalScreen) for screen in self.screen_stack[1:])

    async def on_engine_event(self, message: EngineEvent) -> None:
        # Events come from an open session, which has loaded them; the first frame has not.
        from codewhale.runtime import events

        if self.runtime is None:
            # Quitting: events posted before the session closed arrive after the
            # widgets are gone and have nowhere to go.
            return
        event = message.event
        # What the screen on top shows is handled at once: a dialog, a notification, an
        # agent screen following its child.
        if isinstance(event, events.ApprovalRequested):
            self._approvals.append(event)
            self._next_approval()
            if (screen := self._approval_screen) is not None:
                # The open dialog offers "approve all N" for its requester's queued ones.
                screen.set_queued(len(self._queued_from(screen.request.requester)))
            return
        if isinstance(event, events.StorageError | events.StateWriteFailed):
            await self.show_storage_problem(event.message)
            return
        if isinstance(event, events.AnyAgentEvent):
            await self._agent_event_on_top(event)
        if isinstance(event, events.Retrying) and event.delay >= LONG_RETRY_SECS:
            self.notify(
                f"Retrying in {event.delay:.0f} s: {event.reason}",
                timeout=min(event.delay, 10),
            )
        self._engine_events.add(event, supersedes=superseded_by(event))

    async def show_storage_problem(self, problem: str) -> None:
        """A file the session could not write, said above the composer until the session
        closes (a toast would vanish unread); the conversation goes on in memory."""
        text = (
            f"Not saved: {problem}. The conversation goes on in memory; what was saved "
            "before it stays loadable."
        )
        shown = self.query("#storage-problem")
        if shown:
            earlier = str(shown.first(Static).content)
            if problem in earlier:
                return
            text = f"{earlier}\n{text}"  # another file: both are said
            await shown.remove()
        notice = Notice(text, "error")
        notice.id = "storage-problem"
        await self.mount(notice, before=self.hint)

    async def _apply_engine_event(self, event: events.Event) -> None:
        """The main screen's part: transcript, Work sidebar, status line."""
        from codewhale.runtime import events

        if self.runtime is None:
            return
        if isinstance(event, events.AnyAgentEvent):
            self.child_wait.saw(event)
            self._agent_event(event)
            return
        if isinstance(event, events.WaitStarted):
            self.child_wait.start(self.runtime.children_waited_on(event.ts))
            self.refresh_status()
        elif isinstance(event, events.WaitEnded):
            if marker := self.child_wait.end():
                await self.transcript.notice(marker, "wake")
            self.refresh_status()
        await self.transcript.apply(event)
        if isinstance(event, events.ToolCallFinished) and event.name in (
            "checklist_write",
            "update_plan",
        ):
            self.sidebar.show_work(self.runtime.work())
        if isinstance(event, events.ToolCallFinished) and event.name.startswith("rlm_"):
            self.sidebar.show_rlm(self.runtime.rlm_summaries())
        if isinstance(event, events.BackgroundTaskChanged):
            self.sidebar.tasks.show_tasks(self.runtime.background_tasks())
        if isinstance(event, events.UsageEvent | events.TurnComplete | events.ContextCompacted):
            self.refresh_status(soon=True)

    async def _agent_event_on_top(self, event: events.AnyAgentEvent) -> None:
        from codewhale.runtime.events import AgentFinished
        from codewhale.tui.agent_screen import AgentScreen  # loaded on first use (cold start)

        # Every open agent screen, not only the top one: an approval may cover it. One
        # still mounting reads its child's state as it mounts.
        for screen in self.screen_stack:
            if isinstance(screen, AgentScreen) and screen.is_mounted:
                await screen.agent_event(event)
        if isinstance(event, AgentFinished):
            runtime = self.runtime
            snapshot = runtime.agent_snapshot(event.agent_id) if runtime else None
            name = snapshot.nickname if snapshot else event.agent_id
            self.notify(f"{name} {event.status}", title="sub-agent")
            if snapshot is not None:
                self.signal_finished(
                    f"{name} {event.status}",
                    snapshot.description,
                    snapshot.elapsed_ms / 1000,
                )

    def _agent_event(self, event: events.AnyAgentEvent) -> None:
        from codewhale.tui.transcript import agent_heading

        if self.runtime is None:
            return
        snapshot = self.runtime.agent_snapshot(event.agent_id)
        if snapshot is not None:
            self.sidebar.show_agent(snapshot)
            title = agent_heading(snapshot.nickname, snapshot.type, snapshot.description)
            self.transcript.agent_event(event, title, snapshot.summary)
        self.refresh_status(soon=True)

    def _next_approval(self) -> None:
        from codewhale.tui.approval import ApprovalScreen, covers  # loaded on first use

        if self._approval_open or not self._approvals:
            return
        request = self._approvals.popleft()
        if request.file_change and self.runtime is not None and self.runtime.accept_edits:
            # Queued before "accept edits" was turned on: it no longer asks.
            request.resolve("approve")
            self._next_approval()
            return
        self._approval_open = True
        screen = ApprovalScreen(request, queued=len(self._queued_from(request.requester)))
        self._approval_screen = screen

        def answered(decision: str | None) -> None:
            self._approval_screen = None
            if decision == "approve_batch":
                # The requester's requests waiting now: the N its label showed.
                for waiting in [request, *self._queued_from(request.requester)]:
                    self._answer_queued(waiting, "approve")
            else:
                request.resolve(decision or "deny", screen.message)
                for waiting in [r for r in self._approvals if covers(decision or "", request, r)]:
                    self._answer_queued(waiting, "approve")
            self._approval_open = False
            self._next_approval()

        self.push_screen(screen, answered)

    def _queued_from(self, requester: str) -> list[events.ApprovalRequested]:
        return [waiting for waiting in self._approvals if waiting.requester == requester]

    def _answer_queued(self, request: events.ApprovalRequested, decision: str) -> None:
        """Answer a request without its dialog (it may still be waiting in the queue)."""
        if request in self._approvals:
            self._approvals.remove(request)
        request.resolve(decision)

    # -- actions ---------------------------------------------------------------------------------

    def action_toggle_accept_edits(self) -> None:
        """Accept edits on or off: file changes run unasked (in Agent mode) while it is on."""
        from codewhale.permissions import Mode

        runtime = self.runtime
        if runtime is None:
            return
        runtime.set_accept_edits(not runtime.accept_edits)
        self.refresh_status()
        if runtime.accept_edits and runtime.mode is not Mode.AGENT:
            self.notify("Accept edits is on; it applies in Agent mode.")

    def fill_composer(self, text: str) -> None:
        self.composer.text = text
        self.composer.move_cursor(self.composer.document.end)
        self.composer.focus()

    def action_toggle_sidebar(self) -> None:
        showing = self.sidebar.display
        self.sidebar_wanted = not showing
        self.sidebar_forced = not showing
        self._apply_sidebar()

    def on_agent_row_selected(self, message: AgentRow.Selected) -> None:
        from codewhale.tui.agent_screen import AgentScreen

        # From a sidebar row, a sub-agent cell, or a grandchild's cell on an agent screen.
        if not (isinstance(self.screen, AgentScreen) and self.screen.agent_id == message.agent_id):
            self.push_screen(AgentScreen(message.agent_id), self._back_from_agent_screen)

    def on_task_row_selected(self, message: TaskRow.Selected) -> None:
        from codewhale.tui.task_screen import TaskScreen  # loaded on first use

        self.push_screen(TaskScreen(message.task_id), self._back_from_agent_screen)

    def _back_from_agent_screen(self, _result: None) -> None:
        """Back on the main screen, the composer has the focus, not the row or cell that
        opened the agent screen: typing goes on there, and Enter sends, not reopens."""
        self.composer.screen.set_focus(self.composer)

    async def action_quit(self) -> None:
        """Quit; with sub-agents or background tasks running, ask first: quitting stops them.

        Asked again while the question is open (Ctrl+Q, Ctrl+C twice), it quits.
        """
        from codewhale.tui.quit_confirm import QuitScreen  # loaded on first use (cold start)

        async def leave() -> None:
            await self._close_session()
            self.exit()

        running = self.runtime.live_children() if self.runtime is not None else 0
        tasks = self.runtime.background_tasks() if self.runtime is not None else []
        tasks = [task for task in tasks if task.running]  # stopped with the session
        if (running or tasks) and not isinstance(self.screen, QuitScreen):

            async def answered(quit_app: bool | None) -> None:
                if quit_app:
                    await leave()

            self.push_screen(QuitScreen(running, tasks), answered)
            return
        await leave()

    async def action_interrupt(self) -> None:
        """Ctrl+C: interrupt the running turn (sub-agents keep running); twice in 1 s quits."""
        now = time.monotonic()
        if now - self._ctrl_c_at < DOUBLE_PRESS_SECS:
            self._ctrl_c_at = 0.0  # a third press starts a new pair instead of confirming
            await self.action_quit()
            return
        self._ctrl_c_at = now
        if self.turn_running and self.runtime is not None:
            self.runtime.cancel_turn()
        self.notify("Press Ctrl+C again to quit", timeout=DOUBLE_PRESS_SECS)

    async def on_unmount(self) -> None:
        # However the app ends, the session closes: a running turn is recorded as
        # interrupted, children stop, and the offline model server exits.
        await self._close_session()

    async def _close_session(self) -> None:
        runtime, self.runtime = self.runtime, None
        if runtime is not None:
            await runtime.close()
            self.closed_session = runtime  # its id and spend are printed once the app is gone

    def on_worker_state_changed(self, event) -> None:
        """Each time a session has opened (at start, after onboarding, on /sessions), its
        MCP servers start in the background, after the session's first frame, and the
        project's untrusted servers and hooks are asked about, one dialog after the other."""
        from textual.worker import WorkerState

        opened = event.worker.group == "session" and event.state is WorkerState.SUCCESS
        if opened and self.runtime is not None:
            # Loaded on first use.
            from codewhale.tui.hooks_trust import hooks_question
            from codewhale.tui.mcp_view import start_servers, trust_question
            from codewhale.tui.trust_screen import ask_in_turn

            runtime = self.runtime
            ask_in_turn(self, [trust_question(self, runtime), hooks_question(self, runtime)])
            start_servers(self, runtime)
