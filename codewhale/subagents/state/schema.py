"""What a stored sub-agent record must look like before anything reads it.

Every reader (the app, `exec`, `codewhale agents`) checks each record against this
model: a record of the wrong shape (null, a list, a number where a name goes, an
unknown status) is skipped instead of crashing whatever touches it later. Fields a
newer CodeWhale added are allowed and kept. Building the model costs tens of
milliseconds, so the store imports this module only once it has records to check.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Strict, ValidationError, model_validator

from codewhale.subagents.lifecycle import ChildState


class _Strict(BaseModel):
    # Strict: "5" is not a number of steps; extra keys (a newer version's) are allowed.
    model_config = ConfigDict(strict=True, extra="allow")


class _Event(_Strict):
    seq: int
    ts_ms: int
    status: str
    message: str


class _Checkpoint(_Strict):
    transcript: str
    messages: int


class _Diff(_Strict):
    files_changed: int = 0
    added: int = 0
    deleted: int = 0
    files: list[dict[str, Any]] = []


class _Worktree(_Strict):
    path: str
    source: str
    git_dir: str
    base_commit: str
    head_commit: str | None
    created_at_ms: int
    scope: str = "."
    branch: str | None = None
    diff: _Diff | None = None
    applied_at_ms: int | None = None
    keep: bool | None = None
    removed_at_ms: int | None = None


class StoredRecord(_Strict):
    """One record as the state file holds it (records.WorkerRecord's fields)."""

    run_id: str
    agent_id: str
    name: str
    nickname: str = ""
    objective: str
    description: str = ""
    type: str
    role: str
    model: str
    workspace: str
    git_branch: str | None
    session_boot_id: str = ""
    status: Literal["pending", "running", "completed", "failed", "cancelled", "interrupted"]
    # The stored form is the enum's value: a string is what JSON holds.
    worker_status: Annotated[ChildState, Strict(False)]
    created_at_ms: int
    updated_at_ms: int
    started_at_ms: int | None = None
    finished_at_ms: int | None = None
    steps_taken: int = 0
    tool_calls: int = 0
    result: str | None = None
    error: str | None = None
    events: list[_Event] = []
    artifacts: dict[str, str] = {}
    usage: dict[str, int] = {}
    descendant_usage: dict[str, int] = {}
    verification: dict[str, Any] = {}
    report: dict[str, str | bool] | None = None
    checkpoint: _Checkpoint | None = None
    allowed_tools: list[str] = []
    color: str | None = None
    fork_context: bool = False
    max_depth: int = 0
    activity: str = ""
    owner_pid: int | None = None
    owner_start: str | None = None
    event_seq: int = 0
    session_id: str = ""
    parent_agent_id: str | None = None
    authority: dict[str, Any] = {}
    worktree: _Worktree | None = None
    runs: int = 1
    budget: dict[str, int | float] = {}

    @model_validator(mode="after")
    def _status_matches_state(self) -> StoredRecord:
        if self.status != self.worker_status.status:
            raise ValueError(
                f"status {self.status!r} does not match worker_status {self.worker_status.value!r}"
            )
        return self


def record_problem(data: object) -> str | None:
    """Why `data` is not a record we can read (None: it is one)."""
    if not isinstance(data, dict):
        return f"a record must be a JSON object, not {_kind(data)}"
    try:
        StoredRecord.model_validate(data)
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "record"
        return f"{data.get('agent_id', 'a record')!s:.40}: {where}: {first['msg']}"
    return None


def _kind(value: object) -> str:
    if value is None:
        return "null"
    return {list: "a list", str: "a string", bool: "a boolean"}.get(type(value), "a number")
