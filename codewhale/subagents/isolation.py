"""Isolated children in the manager's hands: their worktrees made, named, summarised,
applied, kept or deleted, and pruned; each change lands in the record's `worktree`
field, which is persisted with it, so all of this works after a restart too.

git work that can take long (a checkout, a merge, a deletion, the diff summary of a child
that ran to its end) runs in a thread; naming a branch is quick and runs where it is
called, as does the summary of a child stopped from outside (cancelled, interrupted).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any

from codewhale.subagents import worktree
from codewhale.subagents.records import WorkerRecord, now_ms
from codewhale.subagents.spawn import SpawnError
from codewhale.subagents.worktree import DiffSummary, Prepared, Worktree, WorktreeError

# Finished for good. An interrupted child may still be continued in its worktree, so
# age alone never deletes that one; closing it (cancelled) does start its clock.
FINISHED = frozenset({"completed", "failed", "cancelled"})
HOUR_MS = 3_600_000


def tree_of(record: WorkerRecord) -> Worktree | None:
    return Worktree.from_json(record.worktree) if record.worktree else None


def delete_hint(record: WorkerRecord, tree: Worktree) -> str:
    return (
        f'agent_close {{"agent_id": "{record.agent_id}", "keep_worktree": false}}, or '
        f"`git worktree remove --force {tree.path}"
        + (f" && git branch -D {tree.branch}`" if tree.branch else "`")
    )


class WorktreeKeeper:
    def __init__(self, *, keep_hours: int, persist: Callable[[WorkerRecord], None]) -> None:
        self.keep_hours = keep_hours
        # Schedules the state-file write of a record whose worktree field changed.
        self.persist = persist
        # One merge into the work tree at a time: each must see the one before it.
        self._applying = asyncio.Lock()
        # Removals of worktrees whose open was cancelled while they were being made.
        self._orphans: set[asyncio.Task[None]] = set()
        # Children whose run summarised them already, until their final move is seen.
        self._summarized: set[str] = set()

    # -- opening ---------------------------------------------------------------------------

    def prepare(self, directory: Path) -> Prepared:
        """The worktree for a child that would start in `directory` (blocking: seconds on a
        large repository)."""
        try:
            return worktree.create(directory)
        except WorktreeError as error:
            raise SpawnError(str(error)) from None

    async def prepare_in_thread(self, directory: Path) -> Prepared:
        """`prepare` off the event loop. Cancelled meanwhile (Esc), the checkout still
        finishes in its thread; what it made is then removed, never left unrecorded."""
        made = asyncio.ensure_future(asyncio.to_thread(self.prepare, directory))
        try:
            return await asyncio.shield(made)
        except asyncio.CancelledError:
            made.add_done_callback(self._remove_orphan)
            raise

    def _remove_orphan(self, made: asyncio.Future[Prepared]) -> None:
        if made.cancelled() or made.exception() is not None:
            return
        removal = asyncio.get_running_loop().create_task(
            asyncio.to_thread(self.discard, made.result())
        )
        self._orphans.add(removal)
        removal.add_done_callback(self._orphans.discard)

    def adopt(self, record: WorkerRecord, prepared: Prepared) -> None:
        """Name the worktree's branch after the child and keep the worktree in its record."""
        try:
            tree = worktree.name_branch(prepared.tree, record.nickname)
        except WorktreeError as error:
            raise SpawnError(f"isolation: {error}") from None
        record.worktree = tree.to_json()
        record.git_branch = tree.branch

    def discard(self, prepared: Prepared) -> None:
        """A worktree made for a child that did not open after all (blocking)."""
        worktree.remove(prepared.tree)

    # -- a child ended ---------------------------------------------------------------------

    def summarize(self, record: WorkerRecord) -> None:
        """What an ended isolated child changed, for its completion event and projection;
        nothing when its run already summarised it in a thread (`summarize_in_thread`)."""
        if record.agent_id in self._summarized:
            self._summarized.discard(record.agent_id)
            return
        self._store(record, self._diff(record))

    async def summarize_in_thread(self, record: WorkerRecord) -> None:
        """`summarize` for a child whose turn has ended, before its final move: git diff on
        a large repository takes tens of milliseconds, which would stall every stream."""
        diff = await asyncio.to_thread(self._diff, record)
        self._store(record, diff)
        self._summarized.add(record.agent_id)

    def _diff(self, record: WorkerRecord) -> tuple[Worktree, DiffSummary] | None:
        tree = tree_of(record)
        if tree is None or tree.removed_at_ms is not None:
            return None
        try:
            return tree, worktree.summarize(tree)
        except WorktreeError:
            return None  # its worktree was removed by hand: nothing left to summarise

    def _store(self, record: WorkerRecord, found: tuple[Worktree, DiffSummary] | None) -> None:
        if found is not None:
            tree, diff = found
            record.worktree = replace(tree, diff=diff).to_json()
            self.persist(record)

    # -- agent_apply -----------------------------------------------------------------------

    async def apply(self, record: WorkerRecord) -> dict[str, Any]:
        """Merge a finished isolated child's changes into the work tree it came from."""
        async with self._applying:
            tree = self._applicable(record)
            try:
                outcome = await asyncio.to_thread(worktree.apply, tree)
            except WorktreeError as error:
                raise SpawnError(f"agent_apply: {error}") from None
            if outcome.applied:
                tree = replace(tree, diff=outcome.changes, applied_at_ms=now_ms())
            else:
                tree = replace(tree, diff=outcome.changes)
            record.worktree = tree.to_json()
            self.persist(record)
        reply: dict[str, Any] = {
            "agent_id": record.agent_id,
            "name": record.name,
            "nickname": record.nickname,
            "branch": tree.branch,
            "applied": outcome.applied,
            "changes": outcome.changes.to_json(),
        }
        if outcome.applied:
            reply["message"] = (
                f"Applied {outcome.changes.line()} to {tree.source} (not staged, not committed)."
            )
        elif outcome.conflicts:
            reply["conflicts"] = list(outcome.conflicts)
            reply["message"] = (
                f"Not applied: {', '.join(outcome.conflicts)} changed in the work tree since "
                "the sub-agent started, in ways that conflict with its changes. Nothing was "
                f"changed. Its version stays on branch {tree.branch} ({tree.path}); merge "
                "those files by hand, or open a new sub-agent on the current tree."
            )
        else:
            reply["message"] = f"Not applied: {outcome.detail}. Nothing was changed."
        if outcome.detail and outcome.conflicts:
            reply["detail"] = outcome.detail
        return reply

    def targets(self, record: WorkerRecord) -> list[Path]:
        """The source work tree's files that applying `record`'s changes would write."""
        tree = self._applicable(record)
        try:
            return worktree.changed_files(tree)
        except WorktreeError as error:
            raise SpawnError(f"agent_apply: {error}") from None

    def _applicable(self, record: WorkerRecord) -> Worktree:
        tree = tree_of(record)
        who = f"{record.nickname} ({record.agent_id})"
        if tree is None:
            raise SpawnError(
                f"{who} was not opened with isolation: worktree; its changes are already in "
                "the work tree"
            )
        if not record.terminal:
            raise SpawnError(
                f"{who} is still {record.status}; apply it once it has finished "
                "(agent_eval with block: true waits for it)"
            )
        if tree.applied_at_ms is not None:
            raise SpawnError(
                f"{who}'s changes were already applied (at {_clock(tree.applied_at_ms)}); "
                "they are applied only once"
            )
        if tree.removed_at_ms is not None:
            raise SpawnError(f"{who}'s worktree was deleted; there is nothing left to apply")
        return tree

    # -- agent_close -----------------------------------------------------------------------

    async def close(self, record: WorkerRecord, keep: bool | None) -> dict[str, Any]:
        """Keep (`keep` None or True) or delete (False) a closed child's worktree."""
        tree = tree_of(record)
        assert tree is not None
        where = {"path": tree.path, "branch": tree.branch}
        if tree.removed_at_ms is not None:
            return {**where, "kept": False, "message": "Its worktree was already deleted."}
        if tree.applied_at_ms is not None:
            pending = "its changes were applied"
        elif tree.diff is not None and tree.diff.files_changed:
            pending = f"{tree.diff.line()}, not applied"
        else:
            pending = "no changes"
        if keep is False:
            try:
                await asyncio.to_thread(worktree.remove, tree)
            except WorktreeError as error:
                raise SpawnError(f"its worktree could not be deleted: {error}") from None
            record.worktree = replace(tree, removed_at_ms=now_ms()).to_json()
            self.persist(record)
            return {
                **where,
                "kept": False,
                "message": f"Deleted its worktree and branch ({pending}).",
            }
        if keep:
            record.worktree = replace(tree, keep=True).to_json()
            self.persist(record)
            return {
                **where,
                "kept": True,
                "message": f"Kept its worktree ({pending}) until it is deleted: "
                f"{delete_hint(record, tree)}.",
            }
        return {
            **where,
            "kept": True,
            "message": f"Its worktree was kept ({pending}). Choose: apply it with agent_apply; "
            f'keep it for good with agent_close {{"agent_id": "{record.agent_id}", '
            f'"keep_worktree": true}}; or delete it now with {delete_hint(record, tree)}. '
            f"Otherwise it is deleted {self.keep_hours} h after the sub-agent finished.",
        }

    # -- session open ----------------------------------------------------------------------

    def prune(self, records: Iterable[WorkerRecord]) -> list[str]:
        """Delete the worktrees (and branches) of children finished for longer than the
        configured hours, unless kept for good; returns the branches deleted (blocking)."""
        deadline = now_ms() - self.keep_hours * HOUR_MS
        pruned = []
        for record in records:
            tree = tree_of(record)
            if (
                tree is None
                or tree.removed_at_ms is not None
                or tree.keep
                or record.status not in FINISHED
                or (record.finished_at_ms or now_ms()) > deadline
            ):
                continue
            try:
                worktree.remove(tree)
            except WorktreeError:
                continue  # git is missing here, say: tried again at the next session
            record.worktree = replace(tree, removed_at_ms=now_ms()).to_json()
            pruned.append(tree.branch or tree.path)
        return pruned


def _clock(ms: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ms / 1000))
