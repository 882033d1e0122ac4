"""What every tool shares: its schema, its approval class, its context and its result."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from codewhale.approval_rules import ApprovalRule
from codewhale.authority import Authority
from codewhale.handles import HandleStore
from codewhale.hooks.session import Hooks
from codewhale.permissions import ApprovalClass, Mode, ModeSwitch, confine
from codewhale.redaction import Redactor
from codewhale.rules.ruleset import PermissionRules
from codewhale.tools.background import BackgroundTasks
from codewhale.tools.journal import ChangeJournal, PreImage
from codewhale.work_state import WorkState

if TYPE_CHECKING:
    # session_changes reads files with the file tools, which import this module.
    from codewhale.tools.session_changes import SessionChanges

# How long the dispatcher lets one call run (its approval prompt not included).
DEFAULT_TIMEOUT_SECS = 120.0


class ToolError(Exception):
    """A failure the model can act on; its message becomes the tool result."""


@dataclass
class ToolContext:
    """Everything a tool may use; one per engine (children get their own)."""

    workspace: Path
    session_id: str
    handles: HandleStore = field(default_factory=HandleStore)
    # Shared by the whole delegation tree: the session's mode, read at every call.
    modes: ModeSwitch = field(default_factory=ModeSwitch)
    work: WorkState = field(default_factory=WorkState)
    journal: ChangeJournal = field(default_factory=ChangeJournal)
    memory_file: Path | None = None
    memory_enabled: bool = False
    allow_private_network: bool = False
    # The session's secrets, replaced in every tool result; shared by the whole tree.
    redactor: Redactor = field(default_factory=Redactor)
    # What this conversation may do; checked by the dispatcher before any approval.
    authority: Authority = field(default_factory=Authority.full)
    # Rules granted by "always" answers, shared by the whole tree.
    always_allowed: set[ApprovalRule] = field(default_factory=set)
    # Lasting allow/ask/deny rules from config and Claude settings, shared by the whole tree.
    rules: PermissionRules = field(default_factory=PermissionRules)
    # The session's changes for /diff, shared by all writing in its work tree (None: not
    # recorded, e.g. a child in a worktree of its own).
    changes: SessionChanges | None = None
    # The session's background shell tasks, shared by the whole tree.
    background: BackgroundTasks = field(default_factory=BackgroundTasks)
    # The session's lifecycle hooks (docs/HOOKS.md), shared by the whole tree.
    hooks: Hooks = field(default_factory=Hooks)

    @property
    def mode(self) -> Mode:
        return self.modes.current

    def before_write(self, path: Path, image: PreImage | None) -> None:
        """Record what `path` held before a tool writes it: for revert_turn and for /diff."""
        self.journal.before_write(path, image)
        if self.changes is not None:
            self.changes.record(path, image, self.session_id)

    def after_write(self, path: Path, data: bytes | None) -> None:
        """Record what a tool's write left in `path` (None: deleted), for /rewind to tell
        a file changed by other means since."""
        if self.changes is not None:
            self.changes.wrote(path, data)

    def path(self, raw: Any) -> Path:
        """A workspace-confined path from a model-supplied string."""
        if not isinstance(raw, str) or not raw.strip():
            raise ToolError("path must be a non-empty string")
        try:
            return confine(self.workspace, raw.strip())
        except ValueError as error:
            raise ToolError(str(error)) from None
        except OSError as error:
            # Resolving reads each symlink on the way; one being swapped meanwhile fails.
            raise ToolError(
                f"{raw.strip()}: the path cannot be resolved ({error.strerror}); "
                "it may be changing, try again"
            ) from None


@dataclass(frozen=True)
class ToolResult:
    """`output` goes back to the model; `display` (e.g. a diff) is for the UI."""

    output: str
    ok: bool = True
    display: str | None = None


class Tool(ABC):
    """One model-callable function."""

    name: ClassVar[str]
    description: ClassVar[str]
    parameters: ClassVar[dict[str, Any]]
    approval: ClassVar[ApprovalClass] = ApprovalClass.AUTO
    # Plan-mode exception for tools that only write plan artifacts.
    plan_artifact: ClassVar[bool] = False
    # Auto-approved but order-sensitive (e.g. agent_open): never run alongside siblings.
    sequential: ClassVar[bool] = False
    # The tool caps its own output (handle_read): the dispatcher must not offload it into
    # another handle, or a projection could never return more than the offload threshold.
    bounded_output: ClassVar[bool] = False
    # The dispatcher ends a call still running after this long; a tool with a longer limit
    # of its own (exec_shell) sets this above it, so its own handling always comes first.
    timeout_secs: ClassVar[float] = DEFAULT_TIMEOUT_SECS

    def schema(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            },
        }

    def summary(self, arguments: Mapping[str, Any]) -> str:
        """The key argument, for compact display and approval prompts."""
        for key in ("path", "command", "url", "pattern", "query", "note"):
            if isinstance(arguments.get(key), str):
                return arguments[key]
        return ""

    def approval_text(self, arguments: Mapping[str, Any]) -> str:
        """What the user is shown when asked to approve this call."""
        return self.summary(arguments)

    def approval_preview(self, arguments: Mapping[str, Any], context: ToolContext) -> str:
        """What the call would change, worked out without writing: a unified diff for the
        file tools ('' for tools that change no files); ToolError when it would fail."""
        return ""

    def read_paths(self, arguments: Mapping[str, Any], context: ToolContext) -> list[Path]:
        """The workspace files or folders this call would show (confined, resolved); the
        dispatcher refuses the call when a permission rule denies reading one of them."""
        return []

    def written_paths(self, arguments: Mapping[str, Any], context: ToolContext) -> list[Path]:
        """The workspace files this call would create, change or delete (confined, resolved);
        the dispatcher asks before any of them is a protected path."""
        return []

    def sandboxed_read_only(self) -> bool:
        """Whether the OS sandbox keeps this tool from writing or reaching the network."""
        return False

    @abstractmethod
    async def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolResult:
        """Do the work; raise ToolError for anything the model should correct."""


_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "array": (list,),
    "object": (dict,),
}


def check_arguments(schema: Mapping[str, Any], arguments: Any) -> None:
    """Enough JSON-schema checking to give the model precise corrections."""
    if not isinstance(arguments, dict):
        raise ToolError("arguments must be a JSON object")
    missing = [key for key in schema.get("required", ()) if key not in arguments]
    if missing:
        raise ToolError(f"missing required field(s): {', '.join(missing)}")
    properties = schema.get("properties", {})
    for key, value in arguments.items():
        spec = properties.get(key)
        if spec is None:
            continue
        expected = spec.get("type")
        names = expected if isinstance(expected, list) else [expected] if expected else []
        allowed = tuple(t for name in names for t in _JSON_TYPES.get(name, ()))
        if names and "null" in names and value is None:
            continue
        if allowed and (
            not isinstance(value, allowed) or (isinstance(value, bool) and bool not in allowed)
        ):
            raise ToolError(f"field '{key}' must be {' or '.join(names)}, got {_kind(value)}")
        if "enum" in spec and value not in spec["enum"]:
            choices = ", ".join(map(str, spec["enum"]))
            raise ToolError(f"field '{key}' must be one of: {choices}")


def _kind(value: Any) -> str:
    return {
        bool: "boolean",
        int: "integer",
        float: "number",
        str: "string",
        list: "array",
        dict: "object",
        type(None): "null",
    }.get(type(value), type(value).__name__)
